#pragma once
// The sign-off report's plots: inline SVG with explicit sizes and viewBox (they render the same everywhere), axis
// ticks on both axes, and paths rather than one element per bar or column, so a mutant night's report stays small.
#include <string>

#include "fusediff/model/error_bins.h"
#include "fusediff/model/results.h"

namespace fusediff::reports {

// Signed-error histogram on a log count axis; wide ranges (a mutant's thousands of LSB) binned per pixel column.
std::string HistogramSvg(const ErrorStats& s);
// min..max error per intermediate code, knees dashed blue, the intermediate saturation edges orange.
std::string CodeErrorSvg(const CaseResult& c);
// Per-region share of inexact samples.
std::string RegionSvg(const CaseResult& c);
// BatchNorm's two plots: error against |u - zu| and against the channel gain (docs/batchnorm.md).
std::string BatchNormBinsSvg(const BatchNormErrorBins& bins);
// The gate's error by code, candidate over canonical, every worse row marked and labelled at its worst code.
std::string CanonicalSvg(const CaseResult& sweep, const CanonicalComparison& k);
// One zoomed panel per worse run (the `max_panels` worst), code by code: candidate, canonical, the knots.
std::string CanonicalPanelsSvg(const CaseResult& sweep, const CanonicalComparison& k, size_t max_panels = 8);

}  // namespace fusediff::reports
