// The plugin backend (fused/plugin, docs/plugins.md): the case's two encodings, the path word, the declaration, the
// version rules against deliberately skewed plugins, batching, replay facts, and the example plugins end to end.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "fusediff/driver/driver.h"
#include "fusediff/driver/suite.h"
#include "fusediff/fused/plugin_case.h"
#include "fusediff/fused/plugin_transport.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/suite_options.h"

namespace fusediff::fused::plugin {
namespace {

// The default suite's conv cases of the built-in path, for one activation (int8 lut, int16 lut_interp), and
// --pattern's.
std::vector<CaseSpec> SuiteCases(ActivationKind kind, std::optional<std::string> pattern = std::nullopt) {
  SuiteOptions options;
  options.activation = kind;
  options.samples = 600;
  options.pattern = pattern;
  std::vector<CaseSpec> out;
  for (CaseSpec& spec : driver::BuildSuite(options)) {
    if (spec.source == SampleSource::conv && spec.backend == kBuiltInPath) out.push_back(std::move(spec));
  }
  return out;
}

// `word`'s case of a built-in suite case (SuiteCases of the plugin backend).
CaseSpec PluginCaseOf(const CaseSpec& builtin, const std::string& word) {
  CaseSpec path;
  parse_fused_path(word, "test", path);
  const std::vector<CaseSpec> cases = BackendOf(path).SuiteCases(builtin, path);
  EXPECT_EQ(cases.size(), 1u);
  return cases.at(0);
}

const std::string kConvLut = std::string("plugin:") + CONV_LUT_PLUGIN;
const std::string kWrongScale = std::string("plugin:") + WRONG_SCALE_PLUGIN;

TEST(PluginCase, JsonAndCEncodingsRoundTrip) {
  std::vector<CaseSpec> specs = SuiteCases(ActivationKind::leaky_relu);
  for (CaseSpec& s : SuiteCases(ActivationKind::sigmoid, "conv2d+add+act")) specs.push_back(std::move(s));
  ASSERT_GE(specs.size(), 3u);
  for (const CaseSpec& spec : specs) {
    const PluginCase c = MakePluginCase(spec, DrawLimits{});
    EXPECT_EQ(PluginCaseFromJson(ToJson(c)), c) << spec.name;
    const CCase encoded(c);
    EXPECT_EQ(PluginCaseFromC(*encoded.get()), c) << spec.name;
    EXPECT_EQ(encoded.get()->struct_size, sizeof(fusediff_case));
    EXPECT_EQ(std::string(encoded.get()->name), spec.name);
  }
}

TEST(PluginCase, FeaturesNameWhatTheCaseUses) {
  const std::vector<CaseSpec> act = SuiteCases(ActivationKind::tanh);
  bool saw_lut = false, saw_interp = false;
  for (const CaseSpec& spec : act) {
    const std::vector<std::string> f = MakePluginCase(spec, DrawLimits{}).features;
    EXPECT_EQ(f.at(0), "producer:conv2d");
    EXPECT_EQ(f.at(1), "stage:act");
    const bool eight = spec.convention.intermediate.q.type.bits() == 8;
    EXPECT_EQ(f.back(), eight ? "table:lut" : "table:lut_interp") << spec.name;
    (eight ? saw_lut : saw_interp) = true;
  }
  EXPECT_TRUE(saw_lut && saw_interp);
  const std::vector<CaseSpec> add = SuiteCases(ActivationKind::sigmoid, "conv2d+add+act");
  ASSERT_FALSE(add.empty());
  const std::vector<std::string> f = CaseFeatures(add.front());
  EXPECT_NE(std::find(f.begin(), f.end(), "stage:add"), f.end());
}

TEST(PluginCase, EnumValuesOutsideTheHeaderAreRefused) {
  EXPECT_THROW(ActivationFromC(13, "case.activation"), InputError);
  EXPECT_THROW(RequantFromC(-1, "case.requant"), InputError);
  EXPECT_EQ(ActivationFromC(FUSEDIFF_ACT_MISH, "a"), ActivationKind::mish);
  EXPECT_EQ(RoundingFromC(FUSEDIFF_HALF_UP, "r"), RoundingMode::half_up);
}

TEST(PluginAddress, ParsesOptionsAndRefusesWhatAReplayLineCannotCarry) {
  const PluginAddress a = ParseAddress("plugin", "./lib.so,mode=fast,level=2", "fused");
  EXPECT_EQ(a.target, "./lib.so");
  ASSERT_EQ(a.options.size(), 2u);
  EXPECT_EQ(a.options[1], (std::pair<std::string, std::string>{"level", "2"}));
  EXPECT_EQ(OptionsDigest(a), OptionsDigest(ParseAddress("plugin", "./lib.so,level=2,mode=fast", "fused")));
  EXPECT_NE(OptionsDigest(a), OptionsDigest(ParseAddress("plugin", "./lib.so,level=3,mode=fast", "fused")));
  EXPECT_THROW(ParseAddress("plugin", "", "fused"), InputError);
  EXPECT_THROW(ParseAddress("plugin", "lib.so,mode", "fused"), InputError);
  EXPECT_THROW(ParseAddress("plugin", "lib.so,a=1,a=2", "fused"), InputError);
  EXPECT_THROW(ParseAddress("plugin", "lib;rm.so", "fused"), InputError);
}

TEST(PluginDeclaration, BuildsTheDeclaredConvention) {
  Convention graph;  // double_rounding, half away from zero
  PluginDeclaration d;
  EXPECT_EQ(DeclaredConvention(d, graph), graph);
  d.requant = RequantVariant::single_rounding;
  const Convention declared = DeclaredConvention(d, graph);
  EXPECT_EQ(declared.requant, RequantVariant::single_rounding);
  EXPECT_EQ(declared.intermediate.rounding, RoundingMode::half_up);  // its fixed rounding
  d.requant.reset();
  d.post_ops = PostOpArithmetic::binary32;
  EXPECT_EQ(DeclaredConvention(d, graph).output.rounding, RoundingMode::half_to_even);
  EXPECT_EQ(DeclaredConvention(d, graph).output.zero_point_order, ZeroPointOrder::before_rounding);
  EXPECT_EQ(describe(PluginDeclaration{}), "requant=graph intermediate=graph post_ops=graph weights=symmetric threading=serial");
}

// Each skewed plugin (tests/plugin/skew_plugin.c) is refused with an error naming what is wrong.
void ExpectRefused(const std::string& target, const std::string& says) {
  try {
    (void)OpenInProcess(PluginAddress{"plugin", target, {}});
    ADD_FAILURE() << target << " was loaded";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(PluginVersions, SkewedPluginsAreRefusedWithTheReason) {
  ExpectRefused("/nonexistent/libnothing.so", "cannot load");
  ExpectRefused(SKEW_NO_ENTRY_PLUGIN, "no entry symbol fusediff_plugin_entry");
  ExpectRefused(SKEW_MAJOR_PLUGIN, "speaks ABI 1.0, this fusediff offers major 0");
  ExpectRefused(SKEW_SMALL_TABLE_PLUGIN, "needs " + std::to_string(sizeof(fusediff_plugin_api)));
  ExpectRefused(SKEW_REFUSE_PLUGIN, "speaks none of the ABI versions");
}

TEST(PluginHello, TheExampleDeclaresTfliteArithmetic) {
  const std::unique_ptr<Transport> t = OpenInProcess(ParseAddress("plugin", CONV_LUT_PLUGIN, "test"));
  const PluginHello h = t->Hello();
  EXPECT_EQ(h.name, "conv_lut");
  EXPECT_EQ(h.abi_major, uint32_t{FUSEDIFF_PLUGIN_ABI_MAJOR});
  EXPECT_EQ(h.declaration.requant, RequantVariant::double_rounding);
  EXPECT_EQ(h.declaration.threading, Threading::shared);
  EXPECT_FALSE(h.declaration.limits.transposed);
  EXPECT_THROW(OpenInProcess(ParseAddress("plugin", std::string(CONV_LUT_PLUGIN) + ",x=1", "test")), InputError);
}

TEST(PluginRun, ConvLutPassesAtToleranceZeroAndWrongScaleFails) {
  driver::ReferenceCache cache;
  const CaseSpec builtin = SuiteCases(ActivationKind::silu).at(0);  // int8 lut
  const CaseSpec good = PluginCaseOf(builtin, kConvLut);
  EXPECT_EQ(good.comparison, Comparison::same_convention);
  EXPECT_EQ(default_tolerance(good).max_abs_lsb, 0);
  const CaseResult passed = driver::RunCase(good, driver::RunOptions{}, cache);
  EXPECT_EQ(passed.verdict, Verdict::pass) << passed.reason;
  EXPECT_EQ(compared_samples(passed), 600u);
  EXPECT_NE(passed.implementation.find("conv_lut_plugin.c"), std::string::npos);
  const CaseResult failed = driver::RunCase(PluginCaseOf(builtin, kWrongScale), driver::RunOptions{}, cache);
  EXPECT_EQ(failed.verdict, Verdict::fail);
}

TEST(PluginRun, UnclaimedFeaturesLeaveTheCaseUnsupportedWithTheReason) {
  driver::ReferenceCache cache;
  for (const CaseSpec& builtin : SuiteCases(ActivationKind::tanh)) {
    if (builtin.convention.intermediate.q.type.bits() == 8) continue;
    const CaseResult r = driver::RunCase(PluginCaseOf(builtin, kConvLut), driver::RunOptions{}, cache);
    EXPECT_EQ(r.verdict, Verdict::unsupported);
    EXPECT_NE(r.reason.find("does not claim feature 'table:lut_interp'"), std::string::npos) << r.reason;
  }
}

// The driver hands a batching path blocks of draws; the statistics are the ones draw-by-draw runs give.
TEST(PluginRun, BatchesGiveTheSameResultsAsSingleDraws) {
  class OneAtATime final : public FusedPath {
   public:
    explicit OneAtATime(std::unique_ptr<FusedPath> inner) : inner_(std::move(inner)) {}
    bool Run(const PatternDraw& d, std::span<int32_t> y, std::string* r) override { return inner_->Run(d, y, r); }
    DrawLimits draw_limits() const override { return inner_->draw_limits(); }
    std::vector<std::string> implementations() const override { return inner_->implementations(); }
    RunInfo last_run() const override { return inner_->last_run(); }

   private:
    std::unique_ptr<FusedPath> inner_;
  };
  driver::ReferenceCache cache;
  const CaseSpec spec = PluginCaseOf(SuiteCases(ActivationKind::hard_swish).at(0), kWrongScale);
  driver::RunOptions batched;
  batched.threads = 2;
  const CaseResult a = driver::RunCase(spec, batched, cache);
  driver::RunOptions single;
  single.fused_path = [](const CaseSpec& s, std::string* why) -> std::unique_ptr<FusedPath> {
    std::unique_ptr<FusedPath> inner = BackendOf(s).CreatePath(s, why);
    return inner ? std::make_unique<OneAtATime>(std::move(inner)) : nullptr;
  };
  const CaseResult b = driver::RunCase(spec, single, cache);
  EXPECT_EQ(a.stats.overall, b.stats.overall);
  EXPECT_EQ(a.stats.worst.sorted(), b.stats.worst.sorted());
  EXPECT_GT(a.stats.overall.max_abs(), 0);  // the wrong plugin: something to compare
}

// FUSEDIFF_THREADING_INSTANCE_PER_THREAD: each calling thread gets its own instance, prepared with the case; a
// shared plugin's path is concurrent too, a serial one's is not.
TEST(PluginThreading, EachThreadGetsItsOwnInstance) {
  const CaseSpec spec = PluginCaseOf(SuiteCases(ActivationKind::relu).at(0), std::string("plugin:") + THREADS_PLUGIN);
  std::string why;
  const std::unique_ptr<FusedPath> path = BackendOf(spec).CreatePath(spec, &why);
  ASSERT_TRUE(path) << why;
  EXPECT_TRUE(path->concurrent());
  EXPECT_EQ(path->preferred_batch(), 1u);
  PatternDraw draw;
  draw.conv = ConvCase().input_channels(1).output_channels(1).weight_scales({1.0f}).weights({1}).bias({0});
  draw.input = {0};
  const auto run_one = [&] {
    std::vector<int32_t> y(1, -1);
    std::string rejected;
    EXPECT_TRUE(path->Run(draw, y, &rejected)) << rejected;
    EXPECT_EQ(y[0], 0);
  };
  run_one();  // the creating thread: its first instance
  std::thread other(run_one);
  other.join();
  std::vector<std::string> implementations = path->implementations();
  std::sort(implementations.begin(), implementations.end());
  ASSERT_EQ(implementations.size(), 2u);
  EXPECT_NE(implementations[0], implementations[1]);
  // conv_lut declares shared: concurrent, one instance.
  const CaseSpec shared = PluginCaseOf(SuiteCases(ActivationKind::relu).at(0), kConvLut);
  EXPECT_TRUE(BackendOf(shared).CreatePath(shared, &why)->concurrent());
}

// Results read back keep a plugin's word without loading it: its library may be gone by the time of the report.
TEST(PluginResults, ReadingAWordBackLoadsNothing) {
  CaseSpec s;
  read_fused_path("plugin:/nonexistent/libgone.so,mode=fast", s);
  EXPECT_EQ(fused_path_name(s), "plugin:/nonexistent/libgone.so,mode=fast");
  EXPECT_EQ(declared_convention(s), s.convention);
  CaseSpec parsed;
  parse_fused_path("plugin:/nonexistent/libgone.so", "fused", parsed);  // the syntax only: nothing loaded yet
  EXPECT_EQ(parsed.backend, "plugin");
  EXPECT_EQ(parsed.backend_arg, "/nonexistent/libgone.so");
  EXPECT_THROW(declared_convention(parsed), InputError);  // what a run needs: the plugin itself
}

TEST(PluginReplay, FactsTravelAndLimitsAreChecked) {
  const CaseSpec spec = PluginCaseOf(SuiteCases(ActivationKind::relu).at(0), kConvLut);
  ReplayKey key;
  key.seed = 1;
  key.sample = 5;
  key.spec = spec;
  const std::string line = format_replay(key);
  EXPECT_NE(line.find(";plugin_name=conv_lut;plugin_version=1.0.0;"), std::string::npos) << line;
  EXPECT_NE(line.find("plugin_limits=batch:2/spatial:10/channels:8/kernel:3/stride:2/dilation:2/transposed:0"),
            std::string::npos) << line;
  const ReplayKey parsed = parse_replay(line);
  EXPECT_EQ(parsed.spec.backend_facts, spec.backend_facts);
  EXPECT_EQ(fused_path_name(parsed.spec), kConvLut);
  std::vector<std::string> warnings;
  BackendOf(parsed.spec).CheckReplayFacts(parsed.spec, &warnings);
  EXPECT_TRUE(warnings.empty());
  // Another version warns; other limits refuse the line (they would generate another draw).
  ReplayKey other = parsed;
  for (auto& [k, v] : other.spec.backend_facts) {
    if (k == "plugin_version") v = "0.9";
  }
  BackendOf(other.spec).CheckReplayFacts(other.spec, &warnings);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("0.9"), std::string::npos);
  for (auto& [k, v] : other.spec.backend_facts) {
    if (k == "plugin_limits") v = "batch:4/spatial:10/channels:8/kernel:3/stride:2/dilation:2/transposed:0/weights:symmetric";
  }
  EXPECT_THROW(BackendOf(other.spec).CheckReplayFacts(other.spec, nullptr), InputError);
}

}  // namespace
}  // namespace fusediff::fused::plugin
