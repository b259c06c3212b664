#pragma once
// What one case of a suite is: a convention, the fused path that claims to implement it, an optional
// injected bug (mutant), and where its samples come from.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/convention.h"

namespace fusediff {

struct TableData;  // model/table.h

// The fused path under test.
//   lut:        direct table over every code of an 8-bit intermediate (TFLite LUTPopulateInt8 semantics, built
//               in double with the declared output rounding).
//   lut_interp: 513-knot table, int16 intermediate -> int16 output, zero points 0 (TFLite LUTPopulateInt16 /
//               LUTLookup, bit-exact).
//   pwl:        piecewise-linear segments in fixed point over an 8- or 16-bit intermediate (only from a table
//               file: model/table.h).
enum class FusedKind { lut, lut_interp, pwl };

// Bugs injected into the fused path on purpose, to show the harness catches them.
//   use_output_scale: the table dequantizes u with the output scale sy in place of su.
enum class Mutant { none, use_output_scale };

// Where a case's samples come from.
//   conv:  random Conv2D cases; sample i is output element (i mod outputs) of input draw (i div outputs).
//   sweep: every intermediate code once; sample i is code qmin + i (no convolution).
enum class SampleSource { conv, sweep };

std::string_view to_string(FusedKind k);
std::string_view to_string(Mutant m);       // kebab-case: "use-output-scale"; "none"
std::string_view to_string(SampleSource s);
FusedKind parse_fused_kind(std::string_view text, std::string_view field);
Mutant parse_mutant(std::string_view text, std::string_view field);
SampleSource parse_sample_source(std::string_view text, std::string_view field);

struct CaseSpec {
  std::string name;
  SampleSource source = SampleSource::conv;
  Convention convention;
  FusedKind fused = FusedKind::lut;
  Mutant mutant = Mutant::none;
  uint64_t samples = 0;  // conv: requested sample count; sweep: ignored (every code once)
  // An external table (from a table file, `fusediff gate`) the fused path uses instead of building its own.
  // When set, canonical_key carries its fingerprint, so different tables get different sample streams.
  std::shared_ptr<const TableData> table;
};

// Canonical text of what determines a case's samples (source + convention + fused kind + ";table=FINGERPRINT"
// when an external table is set; not the name, the mutant or the sample count), e.g. "conv;gelu_erf;alpha=0;double_rounding;u=int8:0.0625:0:half_away_from_zero;
// y=int8:0.00390625:-128:half_away_from_zero:after_rounding;lut". Same text -> same samples.
std::string canonical_key(const CaseSpec& spec);
// 64-bit FNV-1a of canonical_key: the case's stream id c in the counter-based generator.
uint64_t case_stream_id(const CaseSpec& spec);

// Number of samples a case actually runs: `samples` for conv, the intermediate code count for sweep.
uint64_t effective_samples(const CaseSpec& spec);

// A replay string names one sample bit for bit: "fusediff-replay/1;seed=S;sample=I;name=N;" + canonical
// fields + ";mutant=M". parse_replay throws InputError naming the bad field.
struct ReplayKey {
  uint64_t seed = 0;
  uint64_t sample = 0;
  CaseSpec spec;
};
std::string format_replay(const ReplayKey& key);
ReplayKey parse_replay(std::string_view text);

}  // namespace fusediff
