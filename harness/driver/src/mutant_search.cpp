#include "fusediff/driver/mutant_search.h"

#include <algorithm>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/model/tolerance.h"
#include "fusediff/reference/reference.h"
#include "comparison.h"
#include "conv_draws.h"
#include "table_cache.h"

namespace fusediff::driver {

namespace {

uint64_t Fnv1a(const std::string& text) {
  uint64_t hash = 0xcbf29ce484222325ull;
  for (unsigned char ch : text) {
    hash ^= ch;
    hash *= 0x100000001b3ull;
  }
  return hash;
}


uint64_t Median(std::vector<uint64_t> values) {
  std::sort(values.begin(), values.end());
  if (values.empty()) return 0;
  const size_t mid = values.size() / 2;
  return values.size() % 2 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

}  // namespace

namespace {
PatternDraw DrawOf(const ExplicitConv& e) { return PatternDraw{e.conv, e.input, e.stages}; }
ExplicitConv ExplicitOf(PatternDraw d, uint64_t element) {
  ExplicitConv e;
  e.conv = std::move(d.conv);
  e.input = std::move(d.input);
  e.stages = std::move(d.stages);
  e.element = element;
  return e;
}
}  // namespace

std::pair<int32_t, int32_t> EvaluateExplicit(const CaseSpec& spec, const ExplicitConv& sample) {
  std::string why;
  std::unique_ptr<detail::DrawComparison> comparison = detail::DrawComparison::Create(spec, nullptr, &why);
  if (!comparison) throw std::runtime_error("EvaluateExplicit: unsupported case: " + why);
  std::vector<detail::ComparedSample> samples;
  if (!comparison->Compare(DrawOf(sample), samples, &why)) throw std::runtime_error("EvaluateExplicit: refused: " + why);
  return {samples.at(sample.element).y_ref, samples.at(sample.element).y_fused};
}

SearchRun SearchMutant(Mutant mutant, bool targeted, uint64_t seed, uint64_t budget, const RegionMix& mix,
                       const std::string& backend) {
  const uint64_t space_stream = Fnv1a(std::string("mutant-search;") + std::string(to_string(mutant)) +
                                      (targeted ? ";targeted" : ";uniform"));
  TableCache tables;
  SearchRun run;
  // 8-bit tables are cheap: a new convention every draw. int16 reference tables (65,536 codes) are shared by 16.
  CaseSpec spec;
  std::unique_ptr<detail::DrawComparison> comparison;
  std::vector<detail::ComparedSample> samples;
  for (uint32_t draw = 0; run.samples < budget; ++draw) {
    const uint32_t per_convention = mutant == Mutant::interp_truncate ? 16 : 1;
    if (draw % per_convention == 0) {
      spec = generators::GenerateMutantCase(mutant, targeted, seed, space_stream, draw / per_convention);
      spec.backend = backend;
      std::string why;
      comparison = detail::DrawComparison::Create(spec, &tables, &why);
      if (!comparison) throw std::logic_error("GenerateMutantCase made an unsupported case: " + why);
    }
    const uint64_t stream = case_stream_id(spec);
    // Targeted: aimed draws; for conv2d+act and elementwise patterns, one output position, so that every sample of
    // the draw is a pivot (K-1 aimed, 1 bulk). Uniform: the same generator with the bulk region alone (no aim).
    generators::ConvShapeLimits limits = comparison->limits();
    const bool windows = has_stage(spec.pattern, StageKind::max_pool) || has_stage(spec.pattern, StageKind::avg_pool);
    // A pooled counterexample shrinks to its window by cropping a Conv2D's input (CropToWindow); pooling after a
    // transposed convolution is rare in practice, so the pool mutants search Conv2D draws only.
    if (windows) limits.transposed_share = 0;
    if (targeted && !windows && spec.pattern.producer == Producer::conv2d) {
      limits.single_output_position = true;
      limits.min_output_channels = 4;
    }
    const PatternDraw pattern_draw = generators::GeneratePatternDraw(seed, stream, draw, spec.pattern, spec.convention,
                                                                     targeted ? mix : RegionMix{0, 0, 0, 1}, limits);
    const int64_t tolerance = default_tolerance(spec).max_abs_lsb;
    std::string rejected;
    if (!comparison->Compare(pattern_draw, samples, &rejected)) throw std::logic_error("the mutated path refused a draw: " + rejected);
    for (size_t j = 0; j < samples.size() && run.samples < budget; ++j) {
      ++run.samples;
      if (std::abs(samples[j].error()) > tolerance) {
        run.detected = true;
        run.counterexample = Counterexample{spec, ExplicitOf(pattern_draw, j), samples[j].y_ref, samples[j].y_fused, tolerance};
        return run;
      }
    }
  }
  return run;
}

namespace {

bool StillFails(const Counterexample& c) {
  const auto [y_ref, y_fused] = EvaluateExplicit(c.spec, c.sample);
  return std::abs(int64_t{y_fused} - y_ref) > c.tolerance;
}

// Output channels `keep` of a draw's per-channel data: weight scales, conv biases, BatchNorm parameters (if any).
struct ChannelData {
  std::vector<float> scales;
  std::vector<int32_t> bias;
  BatchNormParams bn;
};
ChannelData ChannelsOf(const ExplicitConv& sample, const BatchNormParams& bn, const std::vector<int32_t>& keep) {
  ChannelData d;
  for (int32_t k : keep) {
    const auto i = static_cast<size_t>(k);
    d.scales.push_back(sample.conv.weight_scales()[i]);
    d.bias.push_back(sample.conv.bias()[i]);
    if (bn.gamma.empty()) continue;
    d.bn.gamma.push_back(bn.gamma[i]);
    d.bn.beta.push_back(bn.beta[i]);
    d.bn.mean.push_back(bn.mean[i]);
    d.bn.var.push_back(bn.var[i]);
  }
  return d;
}

// The sample's operands of the pattern's stage of `kind` (the searched patterns have at most one of each): null,
// or an empty set, where the pattern has none.
StageOperands* OperandsOf(Counterexample& c, StageKind kind) {
  const Pattern& p = c.spec.pattern;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    if (p.stages[i].kind != kind) continue;
    if (c.sample.stages.size() < p.stages.size()) c.sample.stages.resize(p.stages.size());
    return &c.sample.stages[i];
  }
  return nullptr;
}
const StageOperands& OperandsOf(const Counterexample& c, StageKind kind) {
  static const StageOperands kNone;
  const Pattern& p = c.spec.pattern;
  for (size_t i = 0; i < p.stages.size(); ++i) {
    if (p.stages[i].kind == kind) return i < c.sample.stages.size() ? c.sample.stages[i] : kNone;
  }
  return kNone;
}

// The failing output alone: its receptive field becomes the whole input (padding taps become zx codes, dilation
// collapses), one output channel, stride 1. The accumulator is the same sum over the same (x, w) pairs.
// `all_channels` keeps every output channel at that position instead (a BatchNorm fold quantized per tensor reads
// every channel's weights; SliceToElement has already cut them to the ones it needs).
Counterexample ReceptiveField(const Counterexample& c, bool all_channels) {
  const ConvCase& conv = c.sample.conv;
  const ConvCase::OutputCoord at = conv.output_coord(c.sample.element);
  std::vector<int32_t> channels;
  for (int32_t k = all_channels ? 0 : at.k; k <= (all_channels ? conv.output_channels() - 1 : at.k); ++k) channels.push_back(k);
  // The (ky, kx) taps that read a source pixel, and that pixel: every kernel tap for a Conv2D (outside the map it
  // reads the zero point), the taps with a source pixel for a transposed convolution (which becomes a 1 x T conv2d).
  struct Tap { int32_t ky, kx, iy, ix; };
  std::vector<Tap> taps;
  const bool transposed = conv.op() == ConvOp::conv_transpose2d;
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
      if (!transposed) {
        taps.push_back({ky, kx, at.oy * conv.stride_height() - conv.padding_top() + ky * conv.dilation_height(),
                        at.ox * conv.stride_width() - conv.padding_left() + kx * conv.dilation_width()});
        continue;
      }
      const int32_t ty = at.oy + conv.padding_top() - ky * conv.dilation_height();
      const int32_t tx = at.ox + conv.padding_left() - kx * conv.dilation_width();
      if (ty < 0 || ty % conv.stride_height() != 0 || ty / conv.stride_height() >= conv.input_height()) continue;
      if (tx < 0 || tx % conv.stride_width() != 0 || tx / conv.stride_width() >= conv.input_width()) continue;
      taps.push_back({ky, kx, ty / conv.stride_height(), tx / conv.stride_width()});
    }
  }
  std::vector<int32_t> input;
  for (const Tap& t : taps) {
    const bool inside = t.iy >= 0 && t.iy < conv.input_height() && t.ix >= 0 && t.ix < conv.input_width();
    for (int32_t ci = 0; ci < conv.input_channels(); ++ci) {
      input.push_back(inside ? c.sample.input[conv.input_index(at.n, t.iy, t.ix, ci)] : conv.input_quant().zero_point);
    }
  }
  std::vector<int8_t> weights;
  for (int32_t k : channels) {
    for (const Tap& t : taps) {
      for (int32_t ci = 0; ci < conv.input_channels(); ++ci) weights.push_back(conv.weights()[conv.weight_index(k, t.ky, t.kx, ci)]);
    }
    if (taps.empty()) weights.insert(weights.end(), static_cast<size_t>(conv.input_channels()), int8_t{0});
  }
  ChannelData data = ChannelsOf(c.sample, OperandsOf(c, StageKind::batchnorm).bn, channels);
  if (taps.empty()) input.assign(static_cast<size_t>(conv.input_channels()), conv.input_quant().zero_point);  // bias only: one tap holding the zero point (contributes 0)
  const int32_t rows = transposed ? 1 : conv.kernel_height();
  const int32_t cols = transposed ? std::max<int32_t>(1, static_cast<int32_t>(taps.size())) : conv.kernel_width();
  Counterexample out = c;
  out.sample.conv = ConvCase()
                        .batch(1)
                        .input_size(rows, cols)
                        .input_channels(conv.input_channels())
                        .output_channels(static_cast<int32_t>(channels.size()))
                        .kernel_size(rows, cols)
                        .input_quant(conv.input_quant())
                        .weight_scales(std::move(data.scales))
                        .weights(std::move(weights))
                        .bias(std::move(data.bias));
  if (StageOperands* o = OperandsOf(out, StageKind::batchnorm)) o->bn = std::move(data.bn);
  out.sample.input = std::move(input);
  out.sample.element = all_channels ? static_cast<uint64_t>(at.k) : 0;
  return out;
}

// Drops input channel `drop_c`, kernel row `drop_ky` or kernel column `drop_kx` (-1: keep all), moving the
// dropped taps' contribution into each output channel's bias. The conv has one output position whose receptive
// field is the whole input (after ReceptiveField, or a fully connected layer). Returns nullopt when a bias would
// leave int32.
std::optional<Counterexample> Drop(const Counterexample& c, int32_t drop_c, int32_t drop_ky, int32_t drop_kx) {
  const ConvCase& conv = c.sample.conv;
  const int32_t zx = conv.input_quant().zero_point;
  const int32_t channels_out = conv.output_channels();
  std::vector<int64_t> moved(static_cast<size_t>(channels_out), 0);
  std::vector<int8_t> weights;
  std::vector<int32_t> input;
  for (int32_t k = 0; k < channels_out; ++k) {
    for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
      for (int32_t kx = 0; kx < conv.kernel_width(); ++kx) {
        for (int32_t ci = 0; ci < conv.input_channels(); ++ci) {
          const int32_t x = c.sample.input[conv.input_index(0, ky, kx, ci)];
          const int8_t w = conv.weights()[conv.weight_index(k, ky, kx, ci)];
          if (ci == drop_c || ky == drop_ky || kx == drop_kx) {
            moved[static_cast<size_t>(k)] += int64_t{x - zx} * w;
          } else {
            weights.push_back(w);
            if (k == 0) input.push_back(x);
          }
        }
      }
    }
  }
  std::vector<int32_t> bias;
  for (int32_t k = 0; k < channels_out; ++k) {
    const int64_t b = int64_t{conv.bias()[static_cast<size_t>(k)]} + moved[static_cast<size_t>(k)];
    if (b < INT32_MIN || b > INT32_MAX) return std::nullopt;
    bias.push_back(static_cast<int32_t>(b));
  }
  Counterexample out = c;
  const int32_t kh = conv.kernel_height() - (drop_ky >= 0 ? 1 : 0);
  const int32_t kw = conv.kernel_width() - (drop_kx >= 0 ? 1 : 0);
  const int32_t channels = conv.input_channels() - (drop_c >= 0 ? 1 : 0);
  out.sample.conv = ConvCase()
                        .input_size(kh, kw)
                        .input_channels(channels)
                        .output_channels(channels_out)
                        .kernel_size(kh, kw)
                        .input_quant(conv.input_quant())
                        .weight_scales(conv.weight_scales())
                        .weights(std::move(weights))
                        .bias(std::move(bias));
  out.sample.input = std::move(input);
  for (int32_t k = 0; k < channels_out; ++k) {
    if (out.sample.conv.accumulator_bound(k) > INT32_MAX) return std::nullopt;
  }
  return out;
}

// Input channel `drop` removed from input and weights (the accumulators change).
Counterexample WithoutInputChannel(const Counterexample& c, int32_t drop) {
  const ConvCase& conv = c.sample.conv;
  std::vector<int32_t> input;
  for (size_t i = 0; i < c.sample.input.size(); ++i) {
    if (static_cast<int32_t>(i % static_cast<size_t>(conv.input_channels())) != drop) input.push_back(c.sample.input[i]);
  }
  std::vector<int8_t> weights;
  for (size_t i = 0; i < conv.weights().size(); ++i) {
    if (static_cast<int32_t>(i % static_cast<size_t>(conv.input_channels())) != drop) weights.push_back(conv.weights()[i]);
  }
  Counterexample out = c;
  out.sample.conv.input_channels(conv.input_channels() - 1).weights(std::move(weights));
  out.sample.input = std::move(input);
  return out;
}

// A pooled element's window alone: the conv outputs it reads become the whole (padding-free) output of a conv over
// exactly the input they need (padding taps materialised as zx codes). Only for a Conv2D whose window lies inside
// the map (pool padding 0 there); nullopt otherwise.
std::optional<Counterexample> CropToWindow(const Counterexample& c) {
  const ConvCase& conv = c.sample.conv;
  const Stage* pool = find_stage(c.spec.pattern, StageKind::max_pool);
  if (!pool) pool = find_stage(c.spec.pattern, StageKind::avg_pool);
  if (!pool || conv.op() != ConvOp::conv2d || conv.batch() != 1 || conv.output_channels() != 1) return std::nullopt;
  const PatternGeometry g = pattern_output_geometry(c.spec.pattern, conv);
  const int32_t py = static_cast<int32_t>(c.sample.element / static_cast<uint64_t>(g.width));
  const int32_t px = static_cast<int32_t>(c.sample.element % static_cast<uint64_t>(g.width));
  const PoolWindow& w = pool->window;
  const int32_t oy0 = py * w.stride - w.padding, ox0 = px * w.stride - w.padding;
  if (oy0 < 0 || ox0 < 0 || oy0 + w.kernel > conv.output_height() || ox0 + w.kernel > conv.output_width()) return std::nullopt;
  const int32_t rows = (w.kernel - 1) * conv.stride_height() + (conv.kernel_height() - 1) * conv.dilation_height() + 1;
  const int32_t cols = (w.kernel - 1) * conv.stride_width() + (conv.kernel_width() - 1) * conv.dilation_width() + 1;
  std::vector<int32_t> input;
  for (int32_t r = 0; r < rows; ++r) {
    const int32_t iy = oy0 * conv.stride_height() - conv.padding_top() + r;
    for (int32_t q = 0; q < cols; ++q) {
      const int32_t ix = ox0 * conv.stride_width() - conv.padding_left() + q;
      const bool inside = iy >= 0 && iy < conv.input_height() && ix >= 0 && ix < conv.input_width();
      for (int32_t ci = 0; ci < conv.input_channels(); ++ci) {
        input.push_back(inside ? c.sample.input[conv.input_index(0, iy, ix, ci)] : conv.input_quant().zero_point);
      }
    }
  }
  Counterexample out = c;
  out.sample.conv = ConvCase()
                        .input_size(rows, cols)
                        .input_channels(conv.input_channels())
                        .output_channels(1)
                        .kernel_size(conv.kernel_height(), conv.kernel_width())
                        .stride(conv.stride_height(), conv.stride_width())
                        .dilation(conv.dilation_height(), conv.dilation_width())
                        .input_quant(conv.input_quant())
                        .weight_scales(conv.weight_scales())
                        .weights(conv.weights())
                        .bias(conv.bias());
  out.sample.input = std::move(input);
  out.sample.element = 0;
  for (Stage& st : out.spec.pattern.stages) {
    if (st.kind == StageKind::max_pool || st.kind == StageKind::avg_pool) st.window.padding = 0;
  }
  return out;
}

}  // namespace

// Batch n alone, and the one output channel (pools: the conv's channel k) or output feature (FC chains: the second
// layer's j, the pattern's fc_outputs becoming 1) the failing element belongs to. The element's value is computed
// from the same codes, so the failure stays unless the path depends on the others (then the slice is not kept).
// `partner` >= 0 keeps a second conv output channel beside it: a per-tensor fold's scale is max|w'| over every
// channel, so the channel that sets it has to stay for the failing channel's codes to stay.
Counterexample SliceToElement(const Counterexample& c, int32_t partner = -1) {
  const ConvCase& conv = c.sample.conv;
  const PatternGeometry g = pattern_output_geometry(c.spec.pattern, conv);
  const uint64_t e = c.sample.element;
  const int32_t ch = static_cast<int32_t>(e % static_cast<uint64_t>(g.channels));
  const int32_t n = static_cast<int32_t>(e / g.channels / g.width / g.height);
  const uint64_t within = e % (static_cast<uint64_t>(g.channels) * g.width * g.height);  // offset inside batch n
  Counterexample out = c;
  ConvCase& small = out.sample.conv;
  small.batch(1);
  std::vector<int32_t> input(c.sample.input.begin() + static_cast<ptrdiff_t>(conv.input_elements() / conv.batch()) * n,
                             c.sample.input.begin() + static_cast<ptrdiff_t>(conv.input_elements() / conv.batch()) * (n + 1));
  out.sample.input = std::move(input);
  Stage* fc = nullptr;
  for (Stage& st : out.spec.pattern.stages) fc = st.kind == StageKind::fully_connected ? &st : fc;
  if (fc) {
    // Keep every hidden feature; the second layer keeps output j only.
    const StageOperands& from = OperandsOf(c, StageKind::fully_connected);
    StageOperands& layer = *OperandsOf(out, StageKind::fully_connected);
    layer.weights.assign(from.weights.begin() + static_cast<ptrdiff_t>(ch) * conv.output_channels(),
                         from.weights.begin() + static_cast<ptrdiff_t>(ch + 1) * conv.output_channels());
    layer.weight_scales = {from.weight_scales[static_cast<size_t>(ch)]};
    layer.bias = {from.bias[static_cast<size_t>(ch)]};
    fc->fc_outputs = 1;
    out.sample.element = 0;
    return out;
  }
  // Output channel ch alone (and the partner): their weights, scales and biases, BatchNorm parameters and residual.
  // A layernorm reads the whole row: every feature of batch n stays (with its gamma and beta).
  std::vector<int32_t> keep{ch};
  if (partner >= 0 && partner != ch) keep.push_back(partner);
  if (has_stage(c.spec.pattern, StageKind::layernorm)) {
    keep.resize(static_cast<size_t>(conv.output_channels()));
    for (int32_t k = 0; k < conv.output_channels(); ++k) keep[static_cast<size_t>(k)] = k;
  }
  std::sort(keep.begin(), keep.end());
  const size_t per_channel = conv.weight_elements() / static_cast<size_t>(conv.output_channels());
  std::vector<int8_t> weights;
  for (int32_t k : keep) {
    const auto at = static_cast<size_t>(k);
    weights.insert(weights.end(), conv.weights().begin() + static_cast<ptrdiff_t>(per_channel * at),
                   conv.weights().begin() + static_cast<ptrdiff_t>(per_channel * (at + 1)));
  }
  ChannelData data = ChannelsOf(c.sample, OperandsOf(c, StageKind::batchnorm).bn, keep);
  const auto kept = static_cast<int32_t>(keep.size());
  small.output_channels(kept).weights(std::move(weights)).weight_scales(std::move(data.scales)).bias(std::move(data.bias));
  if (StageOperands* o = OperandsOf(out, StageKind::batchnorm)) o->bn = std::move(data.bn);
  for (StageKind kind : {StageKind::add, StageKind::mul}) {
    const std::vector<int32_t>& from = OperandsOf(c, kind).codes;
    if (from.empty()) continue;
    std::vector<int32_t>& codes = OperandsOf(out, kind)->codes;
    codes.clear();
    if (from.size() == static_cast<size_t>(conv.output_channels())) {  // mul per channel: the kept channels'
      for (int32_t k : keep) codes.push_back(from[static_cast<size_t>(k)]);
      continue;
    }
    // The residual (mul's tensor input) has the producer's shape: its (n, ., ., keep) slice.
    for (int32_t y = 0; y < conv.output_height(); ++y) {
      for (int32_t x = 0; x < conv.output_width(); ++x) {
        for (int32_t k : keep) codes.push_back(from[conv.output_index(n, y, x, k)]);
      }
    }
  }
  const int32_t slot = static_cast<int32_t>(std::find(keep.begin(), keep.end(), ch) - keep.begin());
  out.sample.element = within / static_cast<uint64_t>(g.channels) * static_cast<uint64_t>(kept) + static_cast<uint64_t>(slot);
  return out;
}

Counterexample Shrink(const Counterexample& failing) {
  Counterexample best = failing;
  const Stage* bn = find_stage(failing.spec.pattern, StageKind::batchnorm);
  const bool folded = bn && !bn->bn_reads_codes;  // a BatchNorm after the activation is elementwise, never folded
  if (!is_conv_act(failing.spec.pattern)) {
    const Counterexample sliced = SliceToElement(failing);
    if (StillFails(sliced)) best = sliced;
    else if (folded) {
      // A per-tensor fold's scale comes from the channel with the largest |w'|: the failing channel and that one.
      const int32_t channels = failing.sample.conv.output_channels();
      for (int32_t partner = 0; partner < channels; ++partner) {
        const Counterexample pair = SliceToElement(failing, partner);
        if (pair.sample.conv.output_channels() == 2 && StillFails(pair)) {
          best = pair;
          break;
        }
      }
    }
    const bool elementwise = pattern_is_elementwise(best.spec.pattern);
    if (const std::optional<Counterexample> window = CropToWindow(best); window && StillFails(*window)) best = *window;
    if (!elementwise && best.spec.pattern.producer == Producer::conv2d) {
      // Several output positions share the input: a dropped channel changes every accumulator, so it is kept only
      // where the sample still fails with the new values.
      for (bool progress = true; progress && best.sample.conv.input_channels() > 1;) {
        progress = false;
        for (int32_t ci = best.sample.conv.input_channels() - 1; ci >= 0; --ci) {
          const Counterexample candidate = WithoutInputChannel(best, ci);
          if (StillFails(candidate)) {
            best = candidate;
            progress = true;
            break;
          }
        }
      }
    }
    if (best.spec.pattern.producer == Producer::fully_connected) {
      // The first layer's input features, one at a time, into its biases.
      for (bool progress = true; progress;) {
        progress = false;
        for (int32_t ci = best.sample.conv.input_channels() - 1; ci >= 0 && best.sample.conv.input_channels() > 1; --ci) {
          const std::optional<Counterexample> candidate = Drop(best, ci, -1, -1);
          if (candidate && StillFails(*candidate)) {
            best = *candidate;
            progress = true;
            break;
          }
        }
      }
    }
    if (!elementwise) {
      const auto [y_ref, y_fused] = EvaluateExplicit(best.spec, best.sample);
      best.y_reference = y_ref;
      best.y_fused = y_fused;
      return best;
    }
    // An elementwise pattern shrinks like conv2d+act below, its residual reduced to the failing element's.
  }
  Counterexample field = ReceptiveField(best, folded);
  if (const std::vector<int32_t>& r = OperandsOf(std::as_const(best), StageKind::add).codes; !r.empty()) {
    OperandsOf(field, StageKind::add)->codes = {r[best.sample.element]};
  }
  if (const std::vector<int32_t>& b = OperandsOf(std::as_const(best), StageKind::mul).codes; !b.empty()) {
    const Stage& mul = *find_stage(best.spec.pattern, StageKind::mul);
    const uint64_t channels = static_cast<uint64_t>(best.sample.conv.output_channels());
    OperandsOf(field, StageKind::mul)->codes = {
        b[mul.mul_operand == MulOperand::per_channel ? best.sample.element % channels : best.sample.element]};
  }
  if (StillFails(field)) best = field;
  else {  // a failure that is not local to one output: keep what we have
    const auto [y_ref, y_fused] = EvaluateExplicit(best.spec, best.sample);
    best.y_reference = y_ref;
    best.y_fused = y_fused;
    return best;
  }
  bool progress = true;
  while (progress) {
    progress = false;
    const ConvCase& conv = best.sample.conv;
    // Last first (the order of earlier versions), then the others: a fold's rounding can keep the failure only
    // for some of them.
    std::vector<std::optional<Counterexample>> candidates;
    for (int32_t ci = conv.input_channels() - 1; ci >= 0 && conv.input_channels() > 1; --ci) candidates.push_back(Drop(best, ci, -1, -1));
    for (int32_t ky = conv.kernel_height() - 1; ky >= 0 && conv.kernel_height() > 1; --ky) candidates.push_back(Drop(best, -1, ky, -1));
    for (int32_t kx = conv.kernel_width() - 1; kx >= 0 && conv.kernel_width() > 1; --kx) candidates.push_back(Drop(best, -1, -1, kx));
    for (const auto& candidate : candidates) {
      if (candidate && StillFails(*candidate)) {
        best = *candidate;
        progress = true;
        break;
      }
    }
  }
  const auto [y_ref, y_fused] = EvaluateExplicit(best.spec, best.sample);
  best.y_reference = y_ref;
  best.y_fused = y_fused;
  return best;
}

std::optional<ShrunkFailure> ShrinkWorstSample(const CaseResult& result, uint64_t seed) {
  const CaseSpec& spec = result.spec;
  if (result.verdict != Verdict::fail || spec.source != SampleSource::conv || result.worst.empty()) return std::nullopt;
  std::string why;
  const std::unique_ptr<detail::DrawComparison> comparison = detail::DrawComparison::Create(spec, nullptr, &why);
  if (!comparison) return std::nullopt;
  const WorstCase& worst = result.worst.front().sample;
  const uint64_t stream = case_stream_id(spec);
  const generators::SampleLocation at =
      detail::LocatePatternSample(seed, stream, worst.sample, comparison->limits(), spec.pattern);
  const std::optional<Formulation> formulation =
      worst.formulation.empty() ? std::nullopt : std::optional(parse_formulation(worst.formulation, "worst.formulation"));
  const PatternDraw draw = comparison->Draw(seed, stream, at.draw, formulation);
  Counterexample failing{spec, ExplicitConv{draw.conv, draw.input, at.element, draw.stages, formulation}, worst.y_ref,
                         worst.y_fused, result.tolerance.max_abs_lsb};
  if (!StillFails(failing)) return std::nullopt;
  ShrunkFailure shrunk{Shrink(failing), {}};
  ReplayKey key;
  key.spec = shrunk.counterexample.spec;
  key.explicit_conv = shrunk.counterexample.sample;
  shrunk.replay = format_replay(key);
  return shrunk;
}

MutantReport EvaluateMutant(Mutant mutant, const MutantSearchOptions& options) {
  MutantReport report;
  report.mutant = mutant;
  report.seeds = options.seeds;
  report.budget = options.budget;
  std::vector<uint64_t> targeted, uniform;
  for (uint32_t i = 0; i < options.seeds; ++i) {
    const uint64_t seed = options.first_seed + i;
    SearchRun aimed = SearchMutant(mutant, true, seed, options.budget, options.mix, options.backend);
    targeted.push_back(aimed.samples);
    report.missed_targeted += aimed.detected ? 0 : 1;
    if (aimed.detected && !report.shrunk) {
      report.detected = true;
      report.shrunk = Shrink(*aimed.counterexample);
      ReplayKey key;
      key.spec = report.shrunk->spec;
      key.explicit_conv = report.shrunk->sample;
      report.replay = format_replay(key);
    }
    const SearchRun plain = SearchMutant(mutant, false, seed, options.budget, RegionMix{}, options.backend);
    uniform.push_back(plain.samples);
    report.missed_uniform += plain.detected ? 0 : 1;
  }
  report.median_targeted = Median(targeted);
  report.median_uniform = Median(uniform);
  report.ratio_is_lower_bound = report.median_uniform >= options.budget;
  report.ratio = report.median_targeted == 0 ? 0 : double(report.median_uniform) / double(report.median_targeted);
  return report;
}

}  // namespace fusediff::driver
