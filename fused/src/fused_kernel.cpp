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
#include "fusediff/model/mutants.h"
#include "requant.h"

namespace fusediff::fused {
namespace {

// Mutant skip-intermediate-quantization: f applied to the unrounded real value acc*sx*sw (double), then one
// output rounding with the declared mode and zero-point order.
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

}  // namespace

struct FusedKernel::Impl {
  Convention convention;
  TableKind kind = TableKind::lut;
  Mutant mutant = Mutant::none;
  std::vector<int32_t> table_8bit;      // lut: one entry per intermediate code, index u - qmin
  std::array<int16_t, 513> table_interp{};  // lut_interp: TFLite knots
  std::vector<PwlSegment> segments;         // pwl: from a table file

  int32_t Table(int32_t u) const {
    if (mutant == Mutant::lut_index_off_by_one) u = std::min(u + 1, convention.intermediate.q.type.qmax());
    if (kind == TableKind::lut) return LUTLookupInt8(table_8bit, convention.intermediate.q.type.qmin(), u);
    if (kind == TableKind::pwl) return PwlLookup(segments, u, convention.output.q.type);
    // lut_interp: the int16 lookup; clamped to the output type (matters only for int16_narrow output).
    const int32_t y = mutant == Mutant::interp_truncate ? LUTLookupTruncating(static_cast<int16_t>(u), table_interp)
                                                        : LUTLookup(static_cast<int16_t>(u), table_interp);
    return SaturateToType(y, convention.output.q.type);
  }

  // Everything after the convolution for one output element: requantize, then the table (or, for the
  // skip-intermediate-quantization mutant, the activation of the unrounded value); writes y, acc and u at `out`.
  void Finish(const ConvCase& conv, int32_t k, int32_t accumulator, const ChannelRequant& channel, size_t out,
              std::span<int32_t> y, std::span<int32_t> acc, std::span<int32_t> u) const {
    const int32_t code = RequantizeChannel(accumulator, channel, convention, mutant);
    y[out] = mutant == Mutant::skip_intermediate_quantization
                 ? ActivateUnquantized(accumulator, conv.input_quant().scale,
                                       conv.weight_scales()[static_cast<size_t>(k)], convention)
                 : Table(code);
    if (!acc.empty()) acc[out] = accumulator;
    if (!u.empty()) u[out] = code;
  }
};

FusedKernel::FusedKernel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
FusedKernel::~FusedKernel() = default;

std::unique_ptr<FusedKernel> FusedKernel::Create(const Convention& convention, TableKind kind, Mutant mutant,
                                                 std::string* unsupported_reason) {
  auto reject = [unsupported_reason](std::string reason) -> std::unique_ptr<FusedKernel> {
    if (unsupported_reason != nullptr) *unsupported_reason = std::move(reason);
    return nullptr;
  };
  validate(convention);  // throws InputError: scales must be finite and > 0 before anything divides by them
  const QuantParams& uq = convention.intermediate.q;
  const QuantParams& yq = convention.output.q;

  auto impl = std::make_unique<Impl>();
  impl->convention = convention;
  impl->kind = kind;
  impl->mutant = mutant;
  // Table-building mutants: what the table is built from, as the bug would have it.
  //   use-output-scale: u dequantized with sy in place of su (zero point unchanged);
  //   ignore-intermediate-zero-point: built as if zu = 0;
  //   gelu-tanh-for-erf: the tanh-form GELU serves an erf-GELU node;
  //   zero-point-before-rounding / output-half-even-for-half-away: the output rounding as the bug declares it.
  const float table_input_scale = mutant == Mutant::use_output_scale ? yq.scale : uq.scale;
  const int32_t table_input_zero_point = mutant == Mutant::ignore_intermediate_zero_point ? 0 : uq.zero_point;
  Activation table_activation = convention.activation;
  if (mutant == Mutant::gelu_tanh_for_erf && table_activation.kind == ActivationKind::gelu_erf) {
    table_activation.kind = ActivationKind::gelu_tanh;
  }
  OutputSpec table_output = convention.output;
  if (mutant == Mutant::zero_point_before_rounding) table_output.zero_point_order = ZeroPointOrder::before_rounding;
  if (mutant == Mutant::output_half_even_for_half_away &&
      table_output.rounding == RoundingMode::half_away_from_zero) {
    table_output.rounding = RoundingMode::half_to_even;
  }

  if (kind == TableKind::pwl) {
    return reject("fused kind pwl has no built-in table: give it a table file (fusediff gate DESCRIPTOR.json)");
  }
  if (convention.intermediate.kind == IntermediateKind::f32) {
    return reject("the built-in tables index a quantized intermediate; an f32 intermediate has no codes");
  }
  if (kind == TableKind::lut) {
    if (uq.type.scalar != ScalarType::int8 && uq.type.scalar != ScalarType::uint8) {
      return reject("fused kind lut needs an 8-bit intermediate (int8 or uint8), got " + to_string(uq.type));
    }
    QuantParams table_input = uq;
    table_input.scale = table_input_scale;
    table_input.zero_point = table_input_zero_point;
    impl->table_8bit = LUTPopulateInt8(table_activation, table_input, table_output);
    if (mutant == Mutant::knee_entry_off_by_one) {
      // The entry at the code nearest the first knee point, one LSB high (saturating at the output maximum).
      const double knee = knee_points(convention.activation).front();
      const double nearest = std::round(uq.zero_point + knee / static_cast<double>(uq.scale));
      if (nearest >= uq.type.qmin() && nearest <= uq.type.qmax()) {
        int32_t& entry = impl->table_8bit[static_cast<size_t>(static_cast<int32_t>(nearest) - uq.type.qmin())];
        entry = std::min(entry + 1, yq.type.qmax());
      }
    }
  } else {
    if (uq.type.scalar != ScalarType::int16) {
      return reject("fused kind lut_interp needs an int16 intermediate, got " + to_string(uq.type));
    }
    if (yq.type.scalar != ScalarType::int16) {
      return reject("fused kind lut_interp needs an int16 output, got " + to_string(yq.type));
    }
    if (uq.zero_point != 0) {
      return reject("fused kind lut_interp needs intermediate zero point 0, got " + Describe(uq));
    }
    if (yq.zero_point != 0) {
      return reject("fused kind lut_interp needs output zero point 0, got " + Describe(yq));
    }
    impl->table_interp = LUTPopulateInt16(table_activation, table_input_scale, 0, yq.scale, 0);
  }
  if (unsupported_reason != nullptr) unsupported_reason->clear();
  return std::unique_ptr<FusedKernel>(new FusedKernel(std::move(impl)));
}

std::unique_ptr<FusedKernel> FusedKernel::Create(const Convention& convention, TableKind kind, Mutant mutant,
                                                 std::string* unsupported_reason,
                                                 std::shared_ptr<const TableData> table) {
  if (!table) return Create(convention, kind, mutant, unsupported_reason);
  validate(convention);
  if (mutant != Mutant::none) throw InputError("mutant " + std::string(to_string(mutant)) + ": not applicable to a table file");
  if (table->kind != kind) {
    throw InputError("table kind " + std::string(to_string(table->kind)) + " does not match fused kind " +
                     std::string(to_string(kind)));
  }
  if (const std::string mismatch = table_kind_mismatch(kind, convention); !mismatch.empty()) throw InputError(mismatch);
  const QuantType& u_type = convention.intermediate.q.type;
  auto impl = std::make_unique<Impl>();
  impl->convention = convention;
  impl->kind = kind;
  switch (kind) {
    case TableKind::lut:
      if (table->lut.size() != u_type.code_count()) {
        throw InputError("lut table has " + std::to_string(table->lut.size()) + " entries, expected " +
                         std::to_string(u_type.code_count()));
      }
      for (int32_t y : table->lut) {
        if (!convention.output.q.type.contains(y)) throw InputError("lut entry " + std::to_string(y) + " outside the output type");
      }
      impl->table_8bit = table->lut;
      break;
    case TableKind::lut_interp:
      if (table->knots.size() != impl->table_interp.size()) {
        throw InputError("lut_interp table has " + std::to_string(table->knots.size()) + " knots, expected 513");
      }
      for (size_t i = 0; i < table->knots.size(); ++i) {
        if (table->knots[i] < INT16_MIN || table->knots[i] > INT16_MAX) throw InputError("lut_interp knot outside int16");
        impl->table_interp[i] = static_cast<int16_t>(table->knots[i]);
      }
      break;
    case TableKind::pwl: {
      int64_t next = u_type.qmin();
      for (const PwlSegment& s : table->segments) {
        if (s.u_lo != next || s.u_hi < s.u_lo || s.shift < 0 || s.shift > kPwlMaxShift) {
          throw InputError("pwl segment [" + std::to_string(s.u_lo) + ", " + std::to_string(s.u_hi) +
                           "] is not contiguous, sorted and well formed");
        }
        next = int64_t{s.u_hi} + 1;
      }
      if (next != int64_t{u_type.qmax()} + 1) throw InputError("pwl segments do not cover the intermediate range");
      impl->segments = table->segments;
      break;
    }
  }
  if (unsupported_reason != nullptr) unsupported_reason->clear();
  return std::unique_ptr<FusedKernel>(new FusedKernel(std::move(impl)));
}

int32_t FusedKernel::ApplyTable(int32_t u) const {
  const QuantType& type = impl_->convention.intermediate.q.type;
  if (!type.contains(u)) {
    throw std::out_of_range("FusedKernel::ApplyTable: code " + std::to_string(u) + " is outside " +
                            to_string(type));
  }
  return impl_->Table(u);
}

int32_t FusedKernel::Requantize(const ConvCase& conv, int32_t k, int32_t acc) const {
  const ChannelRequant c = PrepareChannel(impl_->convention.requant, conv.input_quant().scale,
                                          conv.weight_scales().at(static_cast<size_t>(k)),
                                          impl_->convention.intermediate.q.scale);
  return RequantizeChannel(acc, c, impl_->convention, impl_->mutant);
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
                dot += static_cast<uint32_t>(centred) * static_cast<uint32_t>(int32_t{conv.weights()[conv.weight_index(k, ky, kx, c)]});
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
  if (impl_->mutant == Mutant::skip_intermediate_quantization) {
    return ActivateUnquantized(acc, conv.input_quant().scale, conv.weight_scales().at(static_cast<size_t>(k)),
                               impl_->convention);
  }
  return impl_->Table(Requantize(conv, k, acc));
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
  const size_t outputs = conv.output_elements();
  if (input.size() != conv.input_elements()) {
    throw std::invalid_argument("FusedKernel::Run: input has " + std::to_string(input.size()) + " codes, the conv needs " +
                     std::to_string(conv.input_elements()));
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

  // Weight rows in tap order (ky, kx, c) and their sums, once per call. |sum w| <= 127 * taps.
  std::vector<int32_t> weight_rows(static_cast<size_t>(channels_out) * taps);
  std::vector<uint32_t> weight_sums(static_cast<size_t>(channels_out), 0);
  for (int32_t k = 0; k < channels_out; ++k) {
    size_t t = 0;
    for (int32_t ky = 0; ky < kh; ++ky) {
      for (int32_t kx = 0; kx < kw; ++kx) {
        for (int32_t c = 0; c < cin; ++c, ++t) {
          const int32_t w = conv.weights().at(conv.weight_index(k, ky, kx, c));
          weight_rows[static_cast<size_t>(k) * taps + t] = w;
          weight_sums[static_cast<size_t>(k)] += static_cast<uint32_t>(w);
        }
      }
    }
  }
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
          const int32_t* w = weight_rows.data() + static_cast<size_t>(k) * taps;
          uint32_t dot = 0;  // sum x * w mod 2^32
          for (size_t i = 0; i < taps; ++i) dot += patch[i] * static_cast<uint32_t>(w[i]);
          const uint32_t folded = static_cast<uint32_t>(conv.bias().at(static_cast<size_t>(k))) + dot -
                                  zx * weight_sums[static_cast<size_t>(k)];
          const int32_t accumulator = static_cast<int32_t>(folded);  // modular (two's complement) in C++20
          impl_->Finish(conv, k, accumulator, requant[static_cast<size_t>(k)], conv.output_index(n, oy, ox, k), y,
                        acc, u);
        }
      }
    }
  }
}

}  // namespace fusediff::fused
