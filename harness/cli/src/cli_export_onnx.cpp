// `fusediff export-onnx`: fusediff's patterns, a ResNet-style block and a two-cause model as QDQ ONNX models with
// their inputs (ONNX test-data .pb and .npy), optionally verified through ONNX Runtime against the exact reference.
#include <fmt/format.h>

#include <filesystem>
#include <memory>
#include <ostream>

#include "command.h"
#include "fusediff/bisect/export.h"
#include "fusediff/cli/cli.h"
#include "fusediff/fused/ort_runtime.h"
#include "fusediff/model/errors.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

namespace {

struct ExportArgs {
  std::string out_dir, scales = "pow2";
  uint64_t seed = 1;
  bool verify = false;
};

void WriteInputs(const std::filesystem::path& dir, const std::vector<onnx_io::Tensor>& inputs) {
  std::filesystem::create_directories(dir / "test_data_set_0");
  std::filesystem::create_directories(dir / "npy");
  for (size_t i = 0; i < inputs.size(); ++i) {
    reports::WriteFileAtomically((dir / "test_data_set_0" / fmt::format("input_{}.pb", i)).string(),
                                 onnx_io::SerializeTensorPb(inputs[i]));
    reports::WriteFileAtomically((dir / "npy" / (inputs[i].name + ".npy")).string(), onnx_io::SerializeNpy(inputs[i]));
  }
}

int DoExport(const ExportArgs& a, const CommandContext& context) {
  if (a.out_dir.empty()) throw InputError("--out-dir: required");
  if (a.scales != "pow2" && a.scales != "general") throw InputError("--scales: expected pow2 or general");
  std::error_code ec;
  const std::filesystem::path out(a.out_dir);
  const std::filesystem::path parent = out.has_parent_path() ? out.parent_path() : std::filesystem::path(".");
  if (!std::filesystem::is_directory(out, ec) && !std::filesystem::is_directory(parent, ec)) {
    throw InputError("--out-dir: neither '" + a.out_dir + "' nor its parent folder exists");
  }
  std::filesystem::create_directories(out);
  bisect::ExportOptions o;
  o.seed = a.seed;
  o.power_of_two = a.scales == "pow2";
  std::unique_ptr<fused::ort::Runtime> runtime;
  if (a.verify) runtime = fused::ort::StartRuntime();
  const bisect::ExportPlan plan = bisect::PlanPatternExports();
  bool all_pass = true;
  auto export_pattern = [&](const std::string& pattern, ActivationKind kind, const bisect::ExportOptions& options) {
    const bisect::PatternExport e = bisect::BuildPatternExport(pattern, kind, options);
    const std::filesystem::path dir = std::filesystem::path(a.out_dir) / e.stem;
    std::filesystem::create_directories(dir);
    const std::string model = (dir / "model.onnx").string();
    reports::WriteFileAtomically(model, e.model_bytes);
    WriteInputs(dir, e.inputs);
    std::string line = fmt::format("{:<34} {}", e.name, model);
    if (runtime) {
      const bisect::BaselineCheck check = bisect::VerifyBaseline(*runtime, model, e);
      all_pass = all_pass && check.pass;
      line += fmt::format("  baseline vs reference: {}/{} differ, max {} LSB, {} near a tie: {}", check.differing,
                          check.elements, check.max_abs_lsb, check.allowed_near_tie, check.pass ? "PASS" : "FAIL");
      for (const std::string& l : check.listed) line += "\n    " + l;
    }
    context.out << line << "\n";
  };
  for (const auto& [pattern, kind] : plan.supported) export_pattern(pattern, kind, o);
  bisect::ExportOptions wide = o;
  wide.int16 = true;
  for (const auto& [pattern, kind] : plan.supported_int16) export_pattern(pattern, kind, wide);
  std::vector<bisect::ModelExport> models = {bisect::BuildResNet(true, o), bisect::BuildResNet(false, o),
                                             bisect::BuildTwinCauses(o)};
  for (bisect::ModelExport& m : bisect::BuildTransformerModels(o)) models.push_back(std::move(m));
  for (const bisect::ModelExport& m : models) {
    const std::filesystem::path dir = std::filesystem::path(a.out_dir) / m.stem;
    std::filesystem::create_directories(dir);
    reports::WriteFileAtomically((dir / "model.onnx").string(), m.model_bytes);
    WriteInputs(dir, m.inputs);
    context.out << fmt::format("{:<34} {} ({})\n", m.name, (dir / "model.onnx").string(), m.note);
  }
  for (const std::string& u : plan.unsupported) context.out << "unsupported: " << u << "\n";
  return all_pass ? kExitPass : kExitFail;
}

}  // namespace

Command AddExportOnnxCommand(CLI::App& app) {
  CLI::App* cmd = app.add_subcommand(
      "export-onnx", "Write the patterns, a ResNet-style block, a two-cause model and transformer blocks (LayerNorm, SkipLayerNorm, "
                     "GELU) as ONNX models with inputs "
                     "(ONNX test-data .pb and .npy)");
  auto a = std::make_shared<ExportArgs>();
  cmd->add_option("--out-dir", a->out_dir, "The folder (created in an existing one); one subfolder per model")->required();
  cmd->add_option("--seed", a->seed, "Seed of the weights and draws");
  cmd->add_option("--scales", a->scales, "pow2 (exact in f32; the baseline must equal the reference) or general");
  cmd->add_flag("--verify", a->verify, "Run each pattern through ONNX Runtime (optimizations disabled) against "
                                       "fusediff's exact reference; exit 1 if one differs beyond its tolerance");
  return Command{cmd, [a](const CommandContext& context) { return DoExport(*a, context); }};
}

}  // namespace fusediff::cli
