// The fused path under test: int32 conv in the production zero-point-folding form, per-channel requantization
// by the declared variant (requant.h), then the activation table. No I/O.
#include "fusediff/fused/fused_kernel.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "fusediff/fused/lut.h"
#include "fusediff/model/errors.h"
#include "requant.h"

namespace fusediff::fused {
namespace {

// f applied to the unrounded real value acc*sx*sw (double), then one output rounding with the declared mode and
// zero-point order.
int32_t ActivateUnquantized(int32_t acc, float sx, float sw, const Convention& convention) {
  const double v = static_cast<double>(acc) * static_cast<double>(sx) * static_cast<double>(sw);
  const double t = EvaluateActivationDouble(convention.activation, v) / static_cast<double>(convention.output.q.scale);
  const OutputSpec& out = convention.output;
  const bool before = out.zero_point_order == ZeroPointOrder::before_rounding;
  const double to_round = before ? t + out.q.zero_point : t;
  double rounded = 0;
  switch (out.rounding) {
    case RoundingMode::half_away_from_zero: rounded = std::round(to_round); break;
    case RoundingMode::half_to_even: rounded = std::nearbyint(to_round); break;
    case RoundingMode::half_up: rounded = std::floor(to_round + 0.5); break;
  }
  const double code = before ? rounded : rounded + out.q.zero_point;
  return static_cast<int32_t>(std::clamp(code, double(out.q.type.qmin()), double(out.q.type.qmax())));
}

std::string Describe(const QuantParams& q) { return to_string(q.type) + " zero point " + std::to_string(q.zero_point); }

// What the table is built from: the activation, u's quantization as the table reads it, the output rounding.
struct TableRecipe {
  Activation activation;
  QuantParams input;
  OutputSpec output;
};

// What a kernel's table holds; each lookup reads the part its kind fills.
struct Tables {
  QuantType u_type, y_type;
  std::vector<int32_t> lut;          // lut: one entry per intermediate code, index u - qmin
  std::array<int16_t, 513> knots{};  // lut_interp: TFLite knots
  std::vector<PwlSegment> segments;  // pwl: from a table file
};

struct Kernel;
using Lookup = int32_t (*)(const Tables& t, int32_t u);

// The steps of the kernel, chosen once at construction (SelectSteps): the declared ones, or one mutant's variant
// of one of them. The kernel's arithmetic calls only these; none of it tests a mutant.
struct Steps {
  TableRecipe (*recipe)(const Convention& c);                                        // what the table is built from
  std::vector<int32_t> (*populate_lut)(const TableRecipe& r, const Convention& c);   // the lut kind's table
  int32_t (*index)(int32_t u, const QuantType& u_type);                              // the table entry read for u
  Lookup lookup;                                                                     // that entry, by the table kind
  Requantizer requantize;                                                            // acc -> u (requant.h)
  int32_t (*activate)(const Kernel& k, int32_t acc, int32_t u, float sx, float sw);  // acc and u -> y
};

// The kernel's state: its convention, steps and tables; Table and Finish are its arithmetic after the conv.
struct Kernel {
  Convention convention;
  Steps steps;
  Tables tables;

  int32_t Table(int32_t u) const { return steps.lookup(tables, steps.index(u, tables.u_type)); }

  // Everything after the convolution for one output element: requantize, then activate; writes y, acc and u at
  // `out`.
  void Finish(const ConvCase& conv, int32_t k, int32_t accumulator, const ChannelRequant& channel, size_t out,
              std::span<int32_t> y, std::span<int32_t> acc, std::span<int32_t> u) const {
    const int32_t code = steps.requantize(accumulator, channel, convention.intermediate);
    y[out] = steps.activate(*this, accumulator, code, conv.input_quant().scale,
                            conv.weight_scales()[static_cast<size_t>(k)]);
    if (!acc.empty()) acc[out] = accumulator;
    if (!u.empty()) u[out] = code;
  }
};

// ---- Table recipes: the declared one, and the table-building mutants beside it.

TableRecipe DeclaredRecipe(const Convention& c) { return {c.activation, c.intermediate.q, c.output}; }

// Mutant use-output-scale: breaks u's dequantization; u read with sy in place of su (zero point unchanged).
TableRecipe RecipeWithOutputScale(const Convention& c) {
  TableRecipe r = DeclaredRecipe(c);
  r.input.scale = c.output.q.scale;
  return r;
}

// Mutant ignore-intermediate-zero-point: breaks u's dequantization; the table built as if zu = 0.
TableRecipe RecipeWithoutIntermediateZeroPoint(const Convention& c) {
  TableRecipe r = DeclaredRecipe(c);
  r.input.zero_point = 0;
  return r;
}

// Mutant gelu-tanh-for-erf: breaks the activation's definition; the tanh-form GELU serves an erf-GELU node.
TableRecipe RecipeWithTanhGelu(const Convention& c) {
  TableRecipe r = DeclaredRecipe(c);
  if (r.activation.kind == ActivationKind::gelu_erf) r.activation.kind = ActivationKind::gelu_tanh;
  return r;
}

// Mutant zero-point-before-rounding: breaks y's rounding; zy added before the rounding, not after it.
TableRecipe RecipeWithZeroPointBeforeRounding(const Convention& c) {
  TableRecipe r = DeclaredRecipe(c);
  r.output.zero_point_order = ZeroPointOrder::before_rounding;
  return r;
}

// Mutant output-half-even-for-half-away: breaks y's rounding; ties to even where half away from zero is declared.
TableRecipe RecipeWithHalfEvenOutput(const Convention& c) {
  TableRecipe r = DeclaredRecipe(c);
  if (r.output.rounding == RoundingMode::half_away_from_zero) r.output.rounding = RoundingMode::half_to_even;
  return r;
}

// ---- The lut kind's table: declared, and the knee mutant.

std::vector<int32_t> PopulateLut(const TableRecipe& r, const Convention&) {
  return LUTPopulateInt8(r.activation, r.input, r.output);
}

// Mutant knee-entry-off-by-one: breaks one table entry; the entry at the code nearest the first knee point is one
// LSB high (saturating at the output maximum).
std::vector<int32_t> PopulateLutKneeEntryHigh(const TableRecipe& r, const Convention& c) {
  std::vector<int32_t> table = PopulateLut(r, c);
  const QuantParams& uq = c.intermediate.q;
  const double knee = knee_points(c.activation).front();
  const double nearest = std::round(uq.zero_point + knee / static_cast<double>(uq.scale));
  if (nearest >= uq.type.qmin() && nearest <= uq.type.qmax()) {
    int32_t& entry = table[static_cast<size_t>(static_cast<int32_t>(nearest) - uq.type.qmin())];
    entry = std::min(entry + 1, c.output.q.type.qmax());
  }
  return table;
}

// ---- The entry read for u, and the lookups by table kind.

int32_t IndexOfCode(int32_t u, const QuantType&) { return u; }

// Mutant lut-index-off-by-one: breaks the table's indexing; u reads entry u + 1 (saturating at the type's maximum).
int32_t IndexOneHigh(int32_t u, const QuantType& u_type) { return std::min(u + 1, u_type.qmax()); }

int32_t LookupLut(const Tables& t, int32_t u) { return LUTLookupInt8(t.lut, t.u_type.qmin(), u); }

int32_t LookupPwl(const Tables& t, int32_t u) { return PwlLookup(t.segments, u, t.y_type); }

// lut_interp: the int16 lookup; clamped to the output type (matters only for int16_narrow output).
int32_t LookupInterp(const Tables& t, int32_t u) {
  return SaturateToType(LUTLookup(static_cast<int16_t>(u), t.knots), t.y_type);
}

// Mutant interp-truncate: breaks the interpolation's rounding; (slope * f) >> 7 without the +64 term (lut.h).
int32_t LookupInterpTruncating(const Tables& t, int32_t u) {
  return SaturateToType(LUTLookupTruncating(static_cast<int16_t>(u), t.knots), t.y_type);
}

// ---- acc and u -> y.

// The declared post-processing: the table at the rounded code u.
int32_t ActivateCode(const Kernel& k, int32_t, int32_t u, float, float) { return k.Table(u); }

// Mutant skip-intermediate-quantization: breaks u's boundary; f of the unrounded acc*sx*sw, one output rounding.
int32_t ActivateUnrounded(const Kernel& k, int32_t acc, int32_t, float sx, float sw) {
  return ActivateUnquantized(acc, sx, sw, k.convention);
}

Lookup DeclaredLookup(TableKind kind) {
  switch (kind) {
    case TableKind::lut: return LookupLut;
    case TableKind::pwl: return LookupPwl;
    case TableKind::lut_interp: return LookupInterp;
  }
  return LookupLut;
}

// The one place the conv2d+act kernel's mutant is chosen: the declared steps for the table kind and requantization
// variant, with at most one replaced by the mutant's variant. A mutant that does not apply leaves them as declared.
Steps SelectSteps(TableKind kind, RequantVariant variant, Mutant mutant) {
  Steps s{DeclaredRecipe, PopulateLut, IndexOfCode, DeclaredLookup(kind), SelectRequantizer(variant, mutant),
          ActivateCode};
  switch (mutant) {
    case Mutant::use_output_scale: s.recipe = RecipeWithOutputScale; break;
    case Mutant::ignore_intermediate_zero_point: s.recipe = RecipeWithoutIntermediateZeroPoint; break;
    case Mutant::gelu_tanh_for_erf: s.recipe = RecipeWithTanhGelu; break;
    case Mutant::zero_point_before_rounding: s.recipe = RecipeWithZeroPointBeforeRounding; break;
    case Mutant::output_half_even_for_half_away: s.recipe = RecipeWithHalfEvenOutput; break;
    case Mutant::knee_entry_off_by_one: s.populate_lut = PopulateLutKneeEntryHigh; break;
    case Mutant::lut_index_off_by_one: s.index = IndexOneHigh; break;
    case Mutant::interp_truncate:
      if (kind == TableKind::lut_interp) s.lookup = LookupInterpTruncating;
      break;
    case Mutant::skip_intermediate_quantization: s.activate = ActivateUnrounded; break;
    default: break;  // the requantization mutants are in s.requantize; pattern mutants are not this kernel's
  }
  return s;
}

// Why `kind` cannot implement `convention` with a built table; empty when it can.
std::string UnsupportedReason(const Convention& convention, TableKind kind) {
  const QuantParams& uq = convention.intermediate.q;
  const QuantParams& yq = convention.output.q;
  if (kind == TableKind::pwl) {
    return "fused kind pwl has no built-in table: give it a table file (fusediff gate DESCRIPTOR.json)";
  }
  if (convention.intermediate.kind == IntermediateKind::f32) {
    return "the built-in tables index a quantized intermediate; an f32 intermediate has no codes";
  }
  if (kind == TableKind::lut) {
    if (uq.type.scalar != ScalarType::int8 && uq.type.scalar != ScalarType::uint8) {
      return "fused kind lut needs an 8-bit intermediate (int8 or uint8), got " + to_string(uq.type);
    }
    return {};
  }
  if (uq.type.scalar != ScalarType::int16)
    return "fused kind lut_interp needs an int16 intermediate, got " + to_string(uq.type);
  if (yq.type.scalar != ScalarType::int16)
    return "fused kind lut_interp needs an int16 output, got " + to_string(yq.type);
  if (uq.zero_point != 0) return "fused kind lut_interp needs intermediate zero point 0, got " + Describe(uq);
  if (yq.zero_point != 0) return "fused kind lut_interp needs output zero point 0, got " + Describe(yq);
  return {};
}

// The external table of a table file, checked against the convention (the header's contract: InputError).
void LoadTable(const TableData& table, TableKind kind, const Convention& convention, Tables& tables) {
  const QuantType& u_type = convention.intermediate.q.type;
  switch (kind) {
    case TableKind::lut:
      if (table.lut.size() != u_type.code_count()) {
        throw InputError("lut table has " + std::to_string(table.lut.size()) + " entries, expected " +
                         std::to_string(u_type.code_count()));
      }
      for (int32_t y : table.lut) {
        if (!convention.output.q.type.contains(y))
          throw InputError("lut entry " + std::to_string(y) + " outside the output type");
      }
      tables.lut = table.lut;
      break;
    case TableKind::lut_interp:
      if (table.knots.size() != tables.knots.size()) {
        throw InputError("lut_interp table has " + std::to_string(table.knots.size()) + " knots, expected 513");
      }
      for (size_t i = 0; i < table.knots.size(); ++i) {
        if (table.knots[i] < INT16_MIN || table.knots[i] > INT16_MAX) throw InputError("lut_interp knot outside int16");
        tables.knots[i] = static_cast<int16_t>(table.knots[i]);
      }
      break;
    case TableKind::pwl: {
      int64_t next = u_type.qmin();
      for (const PwlSegment& s : table.segments) {
        if (s.u_lo != next || s.u_hi < s.u_lo || s.shift < 0 || s.shift > kPwlMaxShift) {
          throw InputError("pwl segment [" + std::to_string(s.u_lo) + ", " + std::to_string(s.u_hi) +
                           "] is not contiguous, sorted and well formed");
        }
        next = int64_t{s.u_hi} + 1;
      }
      if (next != int64_t{u_type.qmax()} + 1) throw InputError("pwl segments do not cover the intermediate range");
      tables.segments = table.segments;
      break;
    }
  }
}

// The caller's contract of FusedKernel::Run: spans sized by the conv (a programming error otherwise; user input
// reaches Run only through parsers that check these sizes and throw InputError).
void CheckSpans(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y, std::span<int32_t> acc,
                std::span<int32_t> u) {
  const size_t outputs = conv.output_elements();
  if (input.size() != conv.input_elements()) {
    throw std::invalid_argument("FusedKernel::Run: input has " + std::to_string(input.size()) +
                                " codes, the conv needs " + std::to_string(conv.input_elements()));
  }
  if (y.size() != outputs) {
    throw std::invalid_argument("FusedKernel::Run: y has " + std::to_string(y.size()) + " slots, the conv has " +
                                std::to_string(outputs) + " outputs");
  }
  if (!acc.empty() && acc.size() != outputs) {
    throw std::invalid_argument("FusedKernel::Run: acc has " + std::to_string(acc.size()) + " slots, expected 0 or " +
                                std::to_string(outputs));
  }
  if (!u.empty() && u.size() != outputs) {
    throw std::invalid_argument("FusedKernel::Run: u has " + std::to_string(u.size()) + " slots, expected 0 or " +
                                std::to_string(outputs));
  }
}

// Weight rows in tap order (ky, kx, c) and their sums, once per call. |sum w| <= 127 * taps.
struct WeightRows {
  std::vector<int32_t> weights;
  std::vector<uint32_t> sums;
};

WeightRows MakeWeightRows(const ConvCase& conv) {
  const int32_t channels_out = conv.output_channels();
  const size_t taps = static_cast<size_t>(conv.kernel_height()) * static_cast<size_t>(conv.kernel_width()) *
                      static_cast<size_t>(conv.input_channels());
  WeightRows rows{std::vector<int32_t>(static_cast<size_t>(channels_out) * taps),
                  std::vector<uint32_t>(static_cast<size_t>(channels_out), 0)};
  for (int32_t k = 0; k < channels_out; ++k) {
    size_t t = 0;
    for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
      for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
        for (int32_t c = 0; c < conv.input_channels(); ++c, ++t) {
          const int32_t w = conv.weights().at(conv.weight_index(k, ky, kx, c));
          rows.weights[static_cast<size_t>(k) * taps + t] = w;
          rows.sums[static_cast<size_t>(k)] += static_cast<uint32_t>(w);
        }
      }
    }
  }
  return rows;
}

}  // namespace

struct FusedKernel::Impl : Kernel {
  Impl(const Convention& convention, TableKind kind, Mutant mutant)
      : Kernel{convention, SelectSteps(kind, convention.requant, mutant),
               Tables{convention.intermediate.q.type, convention.output.q.type, {}, {}, {}}} {}
};

FusedKernel::FusedKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedKernel::~FusedKernel() = default;

std::unique_ptr<FusedKernel> FusedKernel::Create(const Convention& convention, TableKind kind, Mutant mutant,
                                                 std::string* unsupported_reason) {
  validate(convention);  // throws InputError: scales must be finite and > 0 before anything divides by them
  if (std::string reason = UnsupportedReason(convention, kind); !reason.empty()) {
    if (unsupported_reason != nullptr) *unsupported_reason = std::move(reason);
    return nullptr;
  }
  auto impl = std::make_unique<Impl>(convention, kind, mutant);
  const TableRecipe recipe = impl->steps.recipe(convention);
  if (kind == TableKind::lut) {
    impl->tables.lut = impl->steps.populate_lut(recipe, convention);
  } else {
    impl->tables.knots = LUTPopulateInt16(recipe.activation, recipe.input.scale, 0, convention.output.q.scale, 0);
  }
  if (unsupported_reason != nullptr) unsupported_reason->clear();
  return std::unique_ptr<FusedKernel>(new FusedKernel(std::move(impl)));
}

std::unique_ptr<FusedKernel> FusedKernel::Create(const Convention& convention, TableKind kind, Mutant mutant,
                                                 std::string* unsupported_reason,
                                                 std::shared_ptr<const TableData> table) {
  if (!table) return Create(convention, kind, mutant, unsupported_reason);
  validate(convention);
  if (mutant != Mutant::none)
    throw InputError("mutant " + std::string(to_string(mutant)) + ": not applicable to a table file");
  if (table->kind != kind) {
    throw InputError("table kind " + std::string(to_string(table->kind)) + " does not match fused kind " +
                     std::string(to_string(kind)));
  }
  if (const std::string mismatch = table_kind_mismatch(kind, convention); !mismatch.empty()) throw InputError(mismatch);
  auto impl = std::make_unique<Impl>(convention, kind, Mutant::none);
  LoadTable(*table, kind, convention, impl->tables);
  if (unsupported_reason != nullptr) unsupported_reason->clear();
  return std::unique_ptr<FusedKernel>(new FusedKernel(std::move(impl)));
}

int32_t FusedKernel::ApplyTable(int32_t u) const {
  const QuantType& type = impl_->convention.intermediate.q.type;
  if (!type.contains(u)) {
    throw std::out_of_range("FusedKernel::ApplyTable: code " + std::to_string(u) + " is outside " + to_string(type));
  }
  return impl_->Table(u);
}

int32_t FusedKernel::Requantize(const ConvCase& conv, int32_t k, int32_t acc) const {
  const ChannelRequant c =
      PrepareChannel(impl_->convention.requant, conv.input_quant().scale,
                     conv.weight_scales().at(static_cast<size_t>(k)), impl_->convention.intermediate.q.scale);
  return impl_->steps.requantize(acc, c, impl_->convention.intermediate);
}

// Transposed convolution as an accelerator computes it: scatter. Each input pixel's centred values (x - zx) are
// multiplied into the kernel and added to the output positions oy = iy*s - pad_top + ky*d (inside the output),
// accumulated in int32 two's-complement arithmetic (uint32, where wrapping is defined). Every output's true
// accumulator is bounded by accumulator_bound(k) < 2^31 (ConvCase::validate), so the wrapped sums are exact.
void FusedKernel::RunTransposed(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y,
                                std::span<int32_t> acc, std::span<int32_t> u) const {
  const int32_t channels_out = conv.output_channels();
  const int32_t zx = conv.input_quant().zero_point;
  std::vector<uint32_t> sums(conv.output_elements());
  for (int32_t n = 0; n < conv.batch(); ++n) {
    for (int32_t oy = 0; oy < conv.output_height(); ++oy) {
      for (int32_t ox = 0; ox < conv.output_width(); ++ox) {
        for (int32_t k = 0; k < channels_out; ++k) {
          sums[conv.output_index(n, oy, ox, k)] = static_cast<uint32_t>(conv.bias().at(static_cast<size_t>(k)));
        }
      }
    }
    for (int32_t iy = 0; iy < conv.input_height(); ++iy) {
      for (int32_t ix = 0; ix < conv.input_width(); ++ix) {
        for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
          const int32_t oy = iy * conv.stride_height() - conv.padding_top() + ky * conv.dilation_height();
          if (oy < 0 || oy >= conv.output_height()) continue;
          for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
            const int32_t ox = ix * conv.stride_width() - conv.padding_left() + kx * conv.dilation_width();
            if (ox < 0 || ox >= conv.output_width()) continue;
            for (int32_t k = 0; k < channels_out; ++k) {
              uint32_t dot = 0;
              for (int32_t c = 0; c < conv.input_channels(); ++c) {
                const int32_t centred = input[conv.input_index(n, iy, ix, c)] - zx;
                dot += static_cast<uint32_t>(centred) *
                       static_cast<uint32_t>(int32_t{conv.weights()[conv.weight_index(k, ky, kx, c)]});
              }
              sums[conv.output_index(n, oy, ox, k)] += dot;
            }
          }
        }
      }
    }
  }
  const std::vector<ChannelRequant> requant = PrepareChannels(conv, impl_->convention);
  for (size_t out = 0; out < sums.size(); ++out) {
    const int32_t k = static_cast<int32_t>(out % static_cast<size_t>(channels_out));
    impl_->Finish(conv, k, static_cast<int32_t>(sums[out]), requant[static_cast<size_t>(k)], out, y, acc, u);
  }
}

int32_t FusedKernel::PostProcess(const ConvCase& conv, int32_t k, int32_t acc) const {
  return impl_->steps.activate(*impl_, acc, Requantize(conv, k, acc), conv.input_quant().scale,
                               conv.weight_scales().at(static_cast<size_t>(k)));
}

// The conv as a production kernel computes it (im2col row times weight row, zero point folded):
//   acc[k] = bias[k] + sum_t x_t * w[k, t] - zx * sum_t w[k, t]
// over the taps t = (ky, kx, c) of the receptive field, where a tap outside the input (padding) holds the code zx,
// so its x*w and zx*w cancel exactly. The two sums are accumulated in int32 two's-complement arithmetic (done
// in uint32, where wrapping is defined), as a hardware accumulator would: the partial sums may pass 2^31
// (|sum x*w| <= 255 * 127 * taps), but every step is exact mod 2^32 and the true acc satisfies
// |acc| <= accumulator_bound(k) < 2^31 (ConvCase::validate), so the wrapped result equals the true accumulator.
void FusedKernel::Run(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y,
                      std::span<int32_t> acc, std::span<int32_t> u) const {
  CheckSpans(conv, input, y, acc, u);
  if (conv.op() == ConvOp::conv_transpose2d) {
    RunTransposed(conv, input, y, acc, u);
    return;
  }
  const int32_t channels_out = conv.output_channels();
  const int32_t kh = conv.kernel_height();
  const int32_t kw = conv.kernel_width();
  const int32_t cin = conv.input_channels();
  const size_t taps = static_cast<size_t>(kh) * static_cast<size_t>(kw) * static_cast<size_t>(cin);
  const uint32_t zx = static_cast<uint32_t>(conv.input_quant().zero_point);
  const WeightRows rows = MakeWeightRows(conv);
  const std::vector<ChannelRequant> requant = PrepareChannels(conv, impl_->convention);

  std::vector<uint32_t> patch(taps);  // one im2col row: input codes, zx at padded taps
  for (int32_t n = 0; n < conv.batch(); ++n) {
    for (int32_t oy = 0; oy < conv.output_height(); ++oy) {
      for (int32_t ox = 0; ox < conv.output_width(); ++ox) {
        size_t t = 0;
        for (int32_t ky = 0; ky < kh; ++ky) {
          const int32_t iy = oy * conv.stride_height() - conv.padding_top() + ky * conv.dilation_height();
          for (int32_t kx = 0; kx < kw; ++kx) {
            const int32_t ix = ox * conv.stride_width() - conv.padding_left() + kx * conv.dilation_width();
            const bool inside = iy >= 0 && iy < conv.input_height() && ix >= 0 && ix < conv.input_width();
            for (int32_t c = 0; c < cin; ++c, ++t) {
              patch[t] = inside ? static_cast<uint32_t>(input[conv.input_index(n, iy, ix, c)]) : zx;
            }
          }
        }
        for (int32_t k = 0; k < channels_out; ++k) {
          const int32_t* w = rows.weights.data() + static_cast<size_t>(k) * taps;
          uint32_t dot = 0;  // sum x * w mod 2^32
          for (size_t i = 0; i < taps; ++i) dot += patch[i] * static_cast<uint32_t>(w[i]);
          const uint32_t folded = static_cast<uint32_t>(conv.bias().at(static_cast<size_t>(k))) + dot -
                                  zx * rows.sums[static_cast<size_t>(k)];
          const int32_t accumulator = static_cast<int32_t>(folded);  // modular (two's complement) in C++20
          impl_->Finish(conv, k, accumulator, requant[static_cast<size_t>(k)], conv.output_index(n, oy, ox, k), y, acc,
                        u);
        }
      }
    }
  }
}

}  // namespace fusediff::fused
