// Issue-level acceptance of the mutant catalog, with the default budget: every mutant detected in its own space;
// targeted generation >= 10x fewer samples than uniform (lower bounds count) for the edge-only mutants and at most
// 2x as many for the others; every detection shrinks to one output position (a per-tensor BatchNorm fold keeps
// <= 2 channels, a layernorm its row, or two for ln-mean-wrong-axis), <= 4 input channels and a kernel <= 3x3, and its replay line reproduces it bit for bit.
#include <gtest/gtest.h>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/mutant_search.h"
#include "fusediff/model/mutants.h"

namespace fusediff {
namespace {

TEST(MutantCatalog, EveryMutantIsFoundShrunkAndReplayed) {
  const driver::MutantSearchOptions options;  // the defaults `fusediff mutants` uses
  for (const MutantInfo& info : mutant_catalog()) {
    const driver::MutantReport r = driver::EvaluateMutant(info.mutant, options);
    SCOPED_TRACE(std::string(info.name));
    ASSERT_TRUE(r.detected);
    EXPECT_EQ(r.missed_targeted, 0u) << "every targeted search should find it within the budget";
    if (info.needs_targeting) {
      EXPECT_GE(double(r.median_uniform), 10.0 * double(r.median_targeted))
          << "targeted " << r.median_targeted << " vs uniform " << r.median_uniform;
    } else {
      EXPECT_LE(double(r.median_targeted), 2.0 * double(r.median_uniform))
          << "targeted " << r.median_targeted << " vs uniform " << r.median_uniform;
    }
    ASSERT_TRUE(r.shrunk.has_value());
    const ConvCase& conv = r.shrunk->sample.conv;
    const Pattern& pattern = r.shrunk->spec.pattern;
    if (has_stage(pattern, StageKind::layernorm)) {
      // A layernorm reads its whole row: one position per row, every feature of it.
      EXPECT_EQ(conv.output_elements(), size_t(conv.batch()) * size_t(conv.output_channels()));
    } else if (has_stage(pattern, StageKind::batchnorm)) {
      // One output position; a per-tensor fold keeps a second channel, the one whose |w'| sets the scale.
      EXPECT_EQ(conv.output_elements() / size_t(conv.output_channels()), 1u);
      EXPECT_LE(conv.output_channels(), 2);
    } else {
      EXPECT_EQ(pattern_output_geometry(pattern, conv).elements(), 1u);  // one sample of the final tensor
    }
    EXPECT_LE(conv.input_channels(), 4);
    EXPECT_LE(conv.kernel_height(), 3);
    EXPECT_LE(conv.kernel_width(), 3);
    // The mean over the wrong axis may need the second row it averaged over.
    EXPECT_LE(conv.batch(), info.mutant == Mutant::ln_mean_wrong_axis ? 2 : 1);
    if (const Stage* pool = find_stage(pattern, StageKind::max_pool) ? find_stage(pattern, StageKind::max_pool)
                                                                      : find_stage(pattern, StageKind::avg_pool)) {
      // The pooled element's window alone: one output channel, at most a window of conv outputs.
      EXPECT_EQ(conv.output_channels(), 1);
      EXPECT_LE(conv.output_elements(), size_t(pool->window.kernel) * size_t(pool->window.kernel));
    } else if (pattern.producer == Producer::conv2d && !has_stage(pattern, StageKind::batchnorm)) {
      EXPECT_EQ(conv.output_elements(), 1u);
    }
    const ReplayTrace t = driver::Replay(parse_replay(r.replay));
    EXPECT_EQ(t.y_reference, r.shrunk->y_reference);
    EXPECT_EQ(t.y_fused, r.shrunk->y_fused);
    EXPECT_GT(std::abs(t.error), r.shrunk->tolerance);
  }
}

}  // namespace
}  // namespace fusediff
