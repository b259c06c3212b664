// BatchNorm's error bins (model/error_bins.h, docs/batchnorm.md): the bins' keys, that they hold exactly the judged
// samples, that threads and shards do not change them, and that results JSON carries them (format 4, /3 still read)
// and the sign-off report plots them.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/model/error_bins.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff {
namespace {

TEST(ErrorBins, KeysAndMerge) {
  EXPECT_EQ(u_magnitude_bin(5, 5), 0);
  EXPECT_EQ(u_magnitude_bin(6, 5), 1);
  EXPECT_EQ(u_magnitude_bin(-128, 0), 8);  // 128 = 2^7: bit_width 8
  EXPECT_EQ(u_magnitude_bin(3, 5), 2);
  EXPECT_EQ(gain_bin(4.0f, 1.0f - 1e-5f, 1e-5f), 2);  // |gamma| / sqrt(1) = 4
  EXPECT_EQ(gain_bin(-0.75f, 1.0f, 0.0f), -1);
  EXPECT_EQ(gain_bin(0.0f, 1.0f, 1e-5f), -64);
  ErrorBins a, b;
  a.add(3, -4);
  a.add(3, 1);
  b.add(3, 2);
  b.add(-1, 0);
  a.merge(b);
  ASSERT_EQ(a.bins.size(), 2u);
  EXPECT_EQ(a.bins[3], (ErrorBin{3, 7, 4}));
  EXPECT_EQ(a.bins[-1], (ErrorBin{1, 0, 0}));
}

std::vector<CaseSpec> LargeMeanF16Cases() {
  driver::SuiteOptions options;
  options.pattern = "conv2d+batchnorm+act";
  options.activation = ActivationKind::relu;
  options.fold_precision = FoldPrecision::f16;
  options.weight_quant = WeightQuant::per_tensor;
  options.bn_regime = BnRegime::large_mean;
  options.samples = 3000;
  return driver::BuildSuite(options);
}

TEST(ErrorBins, HoldTheJudgedSamplesAndSurviveThreadsShardsAndJson) {
  const std::vector<CaseSpec> specs = LargeMeanF16Cases();
  ASSERT_EQ(specs.size(), 3u);  // declared fold, exact fold, graph
  for (const CaseSpec& spec : specs) {
    driver::ReferenceCache cache;
    driver::RunOptions one;
    const CaseResult base = driver::RunCase(spec, one, cache);
    ASSERT_TRUE(base.batchnorm_bins) << spec.name;
    for (const ErrorBins* bins : {&base.batchnorm_bins->by_u, &base.batchnorm_bins->by_gain}) {
      uint64_t count = 0;
      int64_t max_abs = 0;
      for (const auto& [key, b] : bins->bins) {
        count += b.count;
        max_abs = std::max(max_abs, b.max_abs);
      }
      EXPECT_EQ(count, base.stats.overall.count()) << spec.name;
      EXPECT_EQ(max_abs, base.stats.overall.max_abs()) << spec.name;
    }
    driver::RunOptions two = one;
    two.threads = 2;
    EXPECT_EQ(driver::RunCase(spec, two, cache).batchnorm_bins, base.batchnorm_bins) << spec.name;
    driver::RunOptions shard0 = one, shard1 = one;
    shard0.shard_count = shard1.shard_count = 2;
    shard1.shard_index = 1;
    CaseResult merged = driver::RunCase(spec, shard0, cache);
    merge_case_result(merged, driver::RunCase(spec, shard1, cache), one.seed);
    EXPECT_EQ(merged.batchnorm_bins, base.batchnorm_bins) << spec.name;

    RunResult run;
    run.cases.push_back(base);
    nlohmann::json j = nlohmann::json::parse(reports::ToJson(run).dump());
    EXPECT_EQ(j["format"], reports::kResultsFormat);
    EXPECT_EQ(reports::FromJson(j, "test.json").cases.at(0).batchnorm_bins, base.batchnorm_bins) << spec.name;
    j["format"] = "fusediff-results/3";
    j["cases"][0].erase("batchnorm_error_bins");
    for (auto& w : j["cases"][0]["worst"]) w["replay"] = "fusediff-replay/1;as /3 wrote it";  // /7 and earlier
    EXPECT_FALSE(reports::FromJson(j, "old.json").cases.at(0).batchnorm_bins) << spec.name;
    j = nlohmann::json::parse(reports::ToJson(run).dump());
    j["cases"][0]["batchnorm_error_bins"]["by_u_magnitude"][0]["count"] = 0;
    EXPECT_THROW(reports::FromJson(j, "bad.json"), InputError);
    // The sign-off report plots both.
    const std::string html = reports::ToHtml(run);
    EXPECT_NE(html.find("aria-label=\"error against |u|\""), std::string::npos) << spec.name;
    EXPECT_NE(html.find("aria-label=\"error against channel gain\""), std::string::npos) << spec.name;
  }
}

TEST(ErrorBins, TheFoldErrorGrowsWhereF16LosesTheMean) {
  // f16 under large_mean (docs/batchnorm.md): the exact-fold comparison has errors, the declared fold none.
  const std::vector<CaseSpec> specs = LargeMeanF16Cases();
  driver::ReferenceCache cache;
  const CaseResult declared = driver::RunCase(specs[0], {}, cache);
  const CaseResult exact_fold = driver::RunCase(specs[1], {}, cache);
  for (const auto& [key, b] : declared.batchnorm_bins->by_gain.bins) EXPECT_EQ(b.max_abs, 0) << key;
  int64_t worst = 0;
  for (const auto& [key, b] : exact_fold.batchnorm_bins->by_gain.bins) worst = std::max(worst, b.max_abs);
  EXPECT_GT(worst, 10);
}

}  // namespace
}  // namespace fusediff
