// `fusediff table generate`: writes a descriptor and its table the way a toolchain would build them.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/canonical.h"
#include "fusediff/fused/canonical.h"
#include "fusediff/fused/lut.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/table.h"
#include "fusediff/reports/reports.h"
#include "fusediff/tables/tables.h"

namespace fusediff::cli {

namespace {

// --knots minimax searches each knot within the TFLite table's max |e| of its reference: the search grows with
// the square of that bound.
constexpr int64_t kMaxMinimaxKnotBound = 32;

struct TableArgs {
  std::string activation, alpha, intermediate, output, kind, requant = "double_rounding", output_rounding,
      zero_point_order, out_dir, name, knots, line_fit;
  int32_t segments = 0;
};

int DoGenerate(const TableArgs& a, std::ostream& out) {
  FusedOpDescriptor d;
  Convention& c = d.convention;
  c.activation = make_activation(parse_activation_kind(a.activation, "--activation"));
  if (!a.alpha.empty()) c.activation.alpha = parse_float32(a.alpha, "--alpha");
  // Written into the descriptor: both boundaries in full (`run --intermediate TYPE`, a filter, may leave them open).
  c.intermediate.q = parse_full_quant_params(a.intermediate, "--intermediate");
  c.output.q = parse_full_quant_params(a.output, "--output");
  c.requant = parse_requant_variant(a.requant, "--requant");
  // The intermediate rounding a fixed-point variant imposes; `exact` defaults to TFLite's half away from zero.
  c.intermediate.rounding = fixed_rounding(c.requant).value_or(RoundingMode::half_away_from_zero);
  if (!a.output_rounding.empty()) c.output.rounding = parse_rounding_mode(a.output_rounding, "--output-rounding");
  if (!a.zero_point_order.empty()) c.output.zero_point_order = parse_zero_point_order(a.zero_point_order, "--zero-point-order");
  validate(c);
  d.table_kind = parse_table_kind(a.kind, "--kind");
  if (const std::string mismatch = table_kind_mismatch(d.table_kind, c); !mismatch.empty()) {
    throw InputError("--kind: " + mismatch);
  }
  std::error_code ec;
  if (!std::filesystem::is_directory(a.out_dir, ec)) throw InputError("--out-dir: folder '" + a.out_dir + "' does not exist");
  if (a.segments != 0 && d.table_kind != TableKind::pwl) throw InputError("--segments: applies to --kind pwl only");
  if (!a.line_fit.empty() && d.table_kind != TableKind::pwl) throw InputError("--line-fit: applies to --kind pwl only");
  if (!a.knots.empty() && d.table_kind != TableKind::lut_interp) {
    throw InputError("--knots: applies to --kind lut_interp only");
  }
  // The table goes beside its descriptor, the only place `gate` reads it from by default.
  if (a.name.find('/') != std::string::npos || a.name == "." || a.name == "..") {
    throw InputError("--name: '" + a.name + "' is not a plain file stem (expected no '/', '.' or '..': STEM.json and "
                     "STEM.csv are written into --out-dir)");
  }

  const std::string stem = a.name.empty() ? std::string(to_string(c.activation.kind)) + "_" +
                                                 to_string(c.intermediate.q.type) + "_" + std::string(to_string(d.table_kind))
                                          : a.name;
  d.table_file = stem + ".csv";
  TableData table;
  table.kind = d.table_kind;
  std::string summary;
  switch (d.table_kind) {
    case TableKind::lut:
      table.lut = fused::LUTPopulateInt8(c.activation, c.intermediate.q, c.output);
      summary = fmt::format("{} entries (LUTPopulateInt8 semantics in double)", table.lut.size());
      break;
    case TableKind::lut_interp: {
      const auto knots = fused::LUTPopulateInt16(c.activation, c.intermediate.q.scale, 0, c.output.q.scale, 0);
      table.knots.assign(knots.begin(), knots.end());
      summary = "513 knots (TFLite LUTPopulateInt16, bit-exact)";
      if (a.knots == "minimax") {
        // The best knots for this lookup, searched within the TFLite table's own max |e| (docs/tolerances.md).
        driver::ReferenceCache cache;
        const std::vector<int32_t> y = driver::ReferenceCodes(c, cache);
        int64_t tflite_max = 0;
        for (size_t i = 0; i < y.size(); ++i) {
          const int16_t u = static_cast<int16_t>(static_cast<int32_t>(i) - 32768);
          tflite_max = std::max<int64_t>(tflite_max, std::abs(fused::LUTLookup(u, knots) - y[i]));
        }
        if (tflite_max > kMaxMinimaxKnotBound) {
          throw InputError(fmt::format("--knots minimax: the TFLite table errs by {} LSB here; the search covers up to {}",
                                       tflite_max, kMaxMinimaxKnotBound));
        }
        const std::optional<fused::MinimaxKnots> best = fused::BestLutInterpKnots(y, tflite_max);
        if (!best) throw InputError("--knots minimax: no knots found within the TFLite table's max |e|");
        table.knots.assign(best->knots.begin(), best->knots.end());
        summary = fmt::format("513 minimax knots: max |e| {} LSB (TFLite LUTPopulateInt16: {})", best->max_abs_error,
                              tflite_max);
      } else if (!a.knots.empty() && a.knots != "tflite") {
        throw InputError("--knots: '" + a.knots + "' (expected tflite or minimax)");
      }
      break;
    }
    case TableKind::pwl: {
      const int32_t codes = static_cast<int32_t>(c.intermediate.q.type.code_count());
      const int32_t segments = a.segments != 0 ? a.segments : (c.intermediate.q.type.bits() == 8 ? 16 : 64);
      if (segments < 1 || segments > codes) {
        throw InputError("--segments: " + std::to_string(segments) + " (expected 1.." + std::to_string(codes) + ")");
      }
      std::vector<int64_t> errors;
      if (a.line_fit.empty() || a.line_fit == "minimax") {
        driver::ReferenceCache cache;
        driver::MinimaxPwlTable fit = driver::GenerateMinimaxPwl(c, segments, cache);
        table.segments = std::move(fit.segments);
        errors = std::move(fit.segment_max_abs_error);
        summary = fmt::format("{} segments, the minimax line per segment, max |e| {} LSB against the exact reference",
                              table.segments.size(), *std::max_element(errors.begin(), errors.end()));
      } else if (a.line_fit == "chord") {
        fused::PwlFit fit = fused::FitPwl(c, segments);
        table.segments = std::move(fit.segments);
        errors = std::move(fit.segment_max_abs_error);
        summary = fmt::format("{} segments, chord lines, max |e| {} LSB against the double-precision table",
                              table.segments.size(), fit.max_abs_error);
      } else {
        throw InputError("--line-fit: '" + a.line_fit + "' (expected minimax or chord)");
      }
      for (size_t i = 0; i < table.segments.size(); ++i) {
        const PwlSegment& s = table.segments[i];
        summary += fmt::format("\n  [{}, {}] slope {} shift {} offset {}: max |e| {}", s.u_lo, s.u_hi, s.slope, s.shift,
                               s.offset, errors[i]);
      }
      break;
    }
  }
  const std::filesystem::path dir(a.out_dir);
  const std::string descriptor_path = (dir / (stem + ".json")).string();
  const std::string table_path = (dir / d.table_file).string();
  reports::WriteFileAtomically(table_path, tables::FormatTable(table, c));
  reports::WriteFileAtomically(descriptor_path, tables::FormatDescriptor(d));
  out << fmt::format("wrote {} and {}: {}\n", descriptor_path, table_path, summary);
  return kExitPass;
}

}  // namespace

Command AddTableCommand(CLI::App& app) {
  auto a = std::make_shared<TableArgs>();
  CLI::App* table = app.add_subcommand("table", "Activation tables as files");
  table->require_subcommand(1);
  CLI::App* generate = table->add_subcommand("generate", "Write a fused-op descriptor and its table");
  generate->add_option("--activation", a->activation, "Activation (snake_case, e.g. gelu_erf)")->required();
  generate->add_option("--alpha", a->alpha, "alpha of leaky_relu / elu");
  generate->add_option("--intermediate", a->intermediate, "Intermediate u: TYPE:SCALE:ZP")->required();
  generate->add_option("--output", a->output, "Output y: TYPE:SCALE:ZP")->required();
  generate->add_option("--kind", a->kind, "lut | lut_interp | pwl")->required();
  generate->add_option("--segments", a->segments, "pwl segment count (default 16 for 8-bit, 64 for 16-bit)");
  generate->add_option("--knots", a->knots, "lut_interp knots: tflite (LUTPopulateInt16, default) | minimax");
  generate->add_option("--line-fit", a->line_fit,
                       "pwl line per segment: minimax (exact, against the exact reference; default) | chord");
  generate->add_option("--requant", a->requant, "Requantization in the descriptor (default double_rounding)");
  generate->add_option("--output-rounding", a->output_rounding, "half_away_from_zero | half_to_even | half_up");
  generate->add_option("--zero-point-order", a->zero_point_order, "after_rounding | before_rounding");
  generate->add_option("--name", a->name, "File stem (default ACTIVATION_TYPE_KIND)");
  generate->add_option("--out-dir", a->out_dir, "Folder to write STEM.json and STEM.csv into")->required();
  return Command{generate, [a](const CommandContext& ctx) { return DoGenerate(*a, ctx.out); }};
}

}  // namespace fusediff::cli
