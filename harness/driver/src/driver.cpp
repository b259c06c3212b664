#include "fusediff/driver/driver.h"

#include <algorithm>
#include <array>
#include <climits>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "fusediff/fused/fused_kernel.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"
#include "classify.h"
#include "conv_draws.h"
#include "onednn_case.h"
#include "table_cache.h"

namespace fusediff::driver {

ReferenceCache::ReferenceCache() : impl_(std::make_unique<Impl>()) {}
ReferenceCache::~ReferenceCache() = default;

namespace {

// Samples between progress reports and stop checks in the sweep and thresholds sources (a conv draw is one batch).
constexpr uint64_t kSampleBatch = 4096;

RegionSet Classify(const std::vector<double>& knees, const Convention& c, const reference::ActivationPoint& point,
                   const reference::RequantTrace* requant) {
  return detail::ClassifySample(knees, c.intermediate.q.scale, point, requant);
}

// The thresholds source, in sample order: for each output channel of draw 0, for each tie between neighbouring
// intermediate codes (and the two beyond the range's ends), the accumulators at and +-1 around it that the conv can
// reach.
struct ThresholdSample {
  int32_t k;
  int64_t acc;
};
std::vector<ThresholdSample> ThresholdSamples(const ConvCase& conv, const Convention& convention) {
  std::vector<ThresholdSample> samples;
  const QuantType& type = convention.intermediate.q.type;
  for (int32_t k = 0; k < conv.output_channels(); ++k) {
    const int64_t bound = conv.accumulator_bound(k);
    for (int64_t u = int64_t{type.qmin()}; u <= int64_t{type.qmax()} + 1; ++u) {
      for (int64_t acc :
           generators::BoundaryAccumulators(convention, conv.input_quant().scale, conv.weight_scales()[k], u)) {
        if (acc >= -bound && acc <= bound) samples.push_back({k, acc});
      }
    }
  }
  return samples;
}

// What the comparison needs of the reference table per code, packed small: the int16 table's 48-byte points
// (3 MiB) miss the cache on every sample, these 5 bytes a code (320 KiB) mostly hit it.
//   y:       the reference output code
//   regions: the regions that follow from the code alone (knee, the output's saturation and rounding tie);
//            Classify adds the requantization's own saturation and tie
struct CodeFacts {
  int32_t qmin = 0;
  std::vector<int32_t> y;
  std::vector<RegionSet> regions;

  CodeFacts(const reference::ActivationTable& table, const Convention& c) : qmin(c.intermediate.q.type.qmin()) {
    const std::vector<double> knees = knee_points(c.activation);
    y.resize(table.size());
    regions.resize(table.size());
    for (size_t i = 0; i < table.size(); ++i) {
      const reference::ActivationPoint& point = table.at(qmin + static_cast<int32_t>(i));
      y[i] = point.y;
      regions[i] = Classify(knees, c, point, nullptr);
    }
  }
  // Classify(knees, c, table.at(u), requant), from the packed facts.
  RegionSet classify(int32_t u, const reference::RequantTrace& requant) const {
    RegionSet r = regions[static_cast<size_t>(u - qmin)];
    if (requant.saturated) r |= region_bit(Region::saturation);
    if (requant.tie_distance <= kBoundaryTieDistance) r |= region_bit(Region::quant_boundary);
    return r;
  }
};

// Per code, the smallest and largest error one worker saw, dense (a map lookup per sample was a fifth of the
// time). int32 holds every error: both codes are 8- or 16-bit, so |e| < 2^17.
struct CodeRanges {
  static constexpr int32_t kUnseen = INT32_MAX;
  std::vector<std::array<int32_t, 2>> range;  // {min, max}; min == kUnseen: no sample at this code

  explicit CodeRanges(size_t codes) : range(codes, {kUnseen, INT32_MIN}) {}
  void add(size_t i, int64_t error) {
    std::array<int32_t, 2>& r = range[i];
    r[0] = std::min(r[0], static_cast<int32_t>(error));
    r[1] = std::max(r[1], static_cast<int32_t>(error));
  }
};

// One worker's share of a case; merged into the case's result after the workers join.
struct Partial {
  CaseStats stats;
  CodeRanges per_code;
};

// Runs the batches of a case on partials.size() workers (the calling thread is one of them). `next` hands out
// the next batch (nullopt: none left); it, the stop check and the progress callback run under one lock, so
// batches are handed out in order and the callback is never concurrent. `work` compares one batch into the
// worker's own Partial and returns how many samples it compared. Returns false when stopped early; the first
// exception a worker throws stops the others and is rethrown here.
template <typename Batch, typename Next, typename Work>
bool ForEachBatch(const RunOptions& options, std::vector<Partial>& partials, Next& next, Work& work) {
  std::mutex mutex;
  uint64_t done = 0;
  bool stopped = false;
  std::exception_ptr failure;
  const auto worker = [&](Partial& partial) {
    uint64_t compared = 0;
    for (;;) {
      std::optional<Batch> batch;
      {
        const std::lock_guard<std::mutex> lock(mutex);
        done += compared;
        if (failure || stopped) return;
        if (options.progress) options.progress(done);
        if (options.stop && options.stop->load()) {
          stopped = true;
          return;
        }
        batch = next();
        if (!batch) return;
      }
      try {
        compared = work(*batch, partial);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(mutex);
        if (!failure) failure = std::current_exception();
        return;
      }
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (size_t w = 1; w < partials.size(); ++w) helpers.emplace_back(worker, std::ref(partials[w]));
    worker(partials[0]);
  }  // joined
  if (failure) std::rethrow_exception(failure);
  return !stopped;
}

// Every stage of output `element` of one conv draw: both accumulators, the exact requantized value, both codes.
void TraceConvSample(ReplayTrace& trace, const Convention& convention, const fused::FusedKernel& kernel,
                     const reference::ActivationTable& table, const ConvCase& conv, const std::vector<int32_t>& input,
                     uint64_t element) {
  const ConvCase::OutputCoord coord = detail::TraceConvElement(trace, conv, input, element);
  std::vector<int32_t> y(conv.output_elements()), acc(conv.output_elements()), u(conv.output_elements());
  kernel.Run(conv, input, y, acc, u);
  trace.acc_fused = acc[element];
  trace.u_fused = u[element];
  trace.y_fused = y[element];
  const reference::Requantizer requantizer(convention, conv.input_quant().scale, conv.weight_scales()[coord.k]);
  const reference::RequantTrace requant = requantizer(trace.acc_reference, /*with_decimal=*/true);
  trace.requant_exact = requant.exact_value;
  trace.u = requant.u;
  trace.regions = Classify(knee_points(convention.activation), convention, table.at(requant.u), &requant);
}

}  // namespace

CaseResult RunCase(const CaseSpec& spec, const RunOptions& options, ReferenceCache& cache) {
  const auto start = std::chrono::steady_clock::now();
  CaseResult result;
  result.spec = spec;
  if (options.shard_count == 0 || options.shard_index >= options.shard_count) {
    throw InputError("shard " + std::to_string(options.shard_index) + "/" + std::to_string(options.shard_count) +
                     ": expected 0 <= I < N");
  }
  if (options.threads == 0) throw InputError("threads: expected at least 1");
  result.shard_index = options.shard_index;
  result.shard_count = options.shard_count;
  result.stats.worst = WorstCases(options.worst_count);
  const Convention& convention = spec.convention;
  validate(convention);
  result.tolerance = default_tolerance(spec.fused, convention.activation.kind);
  if (options.tolerance) result.tolerance = *options.tolerance;
  if (options.max_abs_lsb) result.tolerance.max_abs_lsb = *options.max_abs_lsb;
  validate(spec);
  result.reference_convention = describe(reference_convention(spec));
  result.fused_convention = describe(declared_convention(spec));
  if (is_onednn(spec.fused)) return detail::RunOneDnnCase(std::move(result), options, *cache.impl_);

  std::string unsupported;
  std::unique_ptr<fused::FusedKernel> kernel =
      fused::FusedKernel::Create(convention, spec.fused, spec.mutant, &unsupported, spec.table);
  if (!kernel) {
    result.verdict = Verdict::unsupported;
    result.reason = unsupported;
    return result;
  }

  const reference::ActivationTable& table = cache.impl_->get(convention);
  result.reference_escalations = table.escalations();
  const int32_t u_min = convention.intermediate.q.type.qmin();
  const uint64_t total = effective_samples(spec);

  const uint32_t code_count = convention.intermediate.q.type.code_count();
  const CodeFacts facts(table, convention);
  std::vector<Partial> partials(options.threads, Partial{CaseStats{}, CodeRanges(code_count)});
  for (Partial& partial : partials) partial.stats.worst = WorstCases(options.worst_count);
  bool finished = true;

  if (spec.source == SampleSource::sweep || spec.source == SampleSource::thresholds) {
    // Both sources are flat sample lists: batches are blocks of kSampleBatch sample indices.
    std::optional<ConvCase> conv;
    std::vector<reference::Requantizer> requantizers;
    std::vector<ThresholdSample> samples;
    uint64_t count = total;
    if (spec.source == SampleSource::thresholds) {
      conv = generators::GenerateConvCase(options.seed, case_stream_id(spec), 0, convention);
      for (int32_t k = 0; k < conv->output_channels(); ++k) {
        requantizers.emplace_back(convention, conv->input_quant().scale, conv->weight_scales()[k]);
      }
      samples = ThresholdSamples(*conv, convention);
      count = samples.size();
    }
    uint64_t next_block = 0;
    const auto next = [&]() -> std::optional<uint64_t> {
      if (next_block * kSampleBatch >= count) return std::nullopt;
      return next_block++;
    };
    const auto work = [&](uint64_t block, Partial& partial) -> uint64_t {
      const uint64_t end = std::min(count, (block + 1) * kSampleBatch);
      uint64_t compared = 0;
      // The shard's first index in the block: i % shard_count == shard_index.
      const uint64_t first = block * kSampleBatch;
      const uint64_t offset = (options.shard_index + options.shard_count - first % options.shard_count) % options.shard_count;
      for (uint64_t i = first + offset; i < end; i += options.shard_count, ++compared) {
        if (spec.source == SampleSource::sweep) {
          const int32_t u = u_min + static_cast<int32_t>(i);
          const int32_t y_ref = facts.y[i];
          const int32_t y_fused = kernel->ApplyTable(u);
          const int64_t error = int64_t{y_fused} - y_ref;
          partial.per_code.add(i, error);
          partial.stats.add(WorstCase{i, error, 0, u, y_ref, y_fused, facts.regions[i]});
        } else {
          const ThresholdSample& s = samples[i];
          const reference::RequantTrace requant = requantizers[s.k](s.acc);
          const size_t code = static_cast<size_t>(requant.u - u_min);
          const int32_t y_fused = kernel->PostProcess(*conv, s.k, static_cast<int32_t>(s.acc));
          const int64_t error = int64_t{y_fused} - facts.y[code];
          partial.per_code.add(code, error);
          partial.stats.add(
              WorstCase{i, error, s.acc, requant.u, facts.y[code], y_fused, facts.classify(requant.u, requant)});
        }
      }
      return compared;
    };
    finished = ForEachBatch<uint64_t>(options, partials, next, work);
  } else {
    const uint64_t stream = case_stream_id(spec);
    detail::ShardDraws draws(options, stream, total);
    const auto next = [&] { return draws.next(); };
    const auto work = [&](const detail::DrawBatch& batch, Partial& partial) -> uint64_t {
      const generators::TargetedDraw targeted =
          generators::GenerateTargetedDraw(options.seed, stream, batch.draw, convention, spec.mix);
      const ConvCase& conv = targeted.conv;
      const std::vector<int32_t>& input = targeted.input;
      const std::vector<int64_t> acc = reference::Conv2DAccumulators(conv, input);
      std::vector<int32_t> y_fused(conv.output_elements(), 0);
      kernel->Run(conv, input, y_fused);
      std::vector<reference::Requantizer> requantizers;
      requantizers.reserve(conv.output_channels());
      for (int32_t k = 0; k < conv.output_channels(); ++k) {
        requantizers.emplace_back(convention, conv.input_quant().scale, conv.weight_scales()[k]);
      }
      for (uint64_t j = 0; j < batch.take; ++j) {
        const int32_t k = static_cast<int32_t>(j % conv.output_channels());  // NHWK: k is the fastest index
        const reference::RequantTrace requant = requantizers[k](acc[j]);
        const size_t code = static_cast<size_t>(requant.u - u_min);
        const int64_t error = int64_t{y_fused[j]} - facts.y[code];
        partial.per_code.add(code, error);
        partial.stats.add(WorstCase{batch.first + j, error, acc[j], requant.u, facts.y[code], y_fused[j],
                                    facts.classify(requant.u, requant)});
      }
      return batch.take;
    };
    finished = ForEachBatch<detail::DrawBatch>(options, partials, next, work);
  }
  // Every merged structure is order-independent (histogram sums, per-code ranges, a total order on the worst
  // list), so the merged result does not depend on which worker compared which batch.
  result.stats = std::move(partials[0].stats);
  for (size_t w = 1; w < partials.size(); ++w) result.stats.merge(partials[w].stats);
  // A code's range over all workers, then as CodeErrors: covered, with the range [min, max] of its errors unless
  // every one was 0 (what CodeErrors::add of every sample gives).
  result.per_code = CodeErrors(u_min, code_count);
  for (size_t i = 0; i < code_count; ++i) {
    std::array<int32_t, 2> r = partials[0].per_code.range[i];
    for (size_t w = 1; w < partials.size(); ++w) {
      r[0] = std::min(r[0], partials[w].per_code.range[i][0]);
      r[1] = std::max(r[1], partials[w].per_code.range[i][1]);
    }
    if (r[0] == CodeRanges::kUnseen) continue;
    const int32_t code = u_min + static_cast<int32_t>(i);
    result.per_code.mark_covered(code);
    if (r[0] != 0 || r[1] != 0) result.per_code.set_range(code, CodeErrors::Range{r[0], r[1]});
  }
  if (!finished) result.complete = false;

  result.hard_codes = generators::HardCodes(convention);
  // Coverage, replay strings and verdict as a merge of shards recomputes them.
  finish_case_result(result, options.seed);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

ReplayTrace Replay(const ReplayKey& key) {
  if (is_onednn(key.spec.fused)) return detail::ReplayOneDnn(key);
  const CaseSpec& spec = key.spec;
  const Convention& convention = spec.convention;
  validate(convention);
  std::string unsupported;
  std::unique_ptr<fused::FusedKernel> kernel =
      fused::FusedKernel::Create(convention, spec.fused, spec.mutant, &unsupported);
  if (!kernel) throw InputError("replay: fused path " + std::string(to_string(spec.fused)) + " is unsupported here: " + unsupported);
  const reference::ActivationTable table(convention);

  ReplayTrace trace;
  trace.key = key;
  trace.convention = describe(convention);
  if (key.explicit_conv) {
    const ExplicitConv& e = *key.explicit_conv;
    TraceConvSample(trace, convention, *kernel, table, e.conv, e.input, e.element);
  } else if (spec.source == SampleSource::sweep) {
    if (key.sample >= convention.intermediate.q.type.code_count()) {
      throw InputError("replay.sample: " + std::to_string(key.sample) + " is past the sweep's " +
                       std::to_string(convention.intermediate.q.type.code_count()) + " codes");
    }
    trace.u = convention.intermediate.q.type.qmin() + static_cast<int32_t>(key.sample);
    trace.y_fused = kernel->ApplyTable(trace.u);
  } else if (spec.source == SampleSource::thresholds) {
    const ConvCase conv = generators::GenerateConvCase(key.seed, case_stream_id(spec), 0, convention);
    const std::vector<ThresholdSample> samples = ThresholdSamples(conv, convention);
    if (key.sample >= samples.size()) {
      throw InputError("replay.sample: " + std::to_string(key.sample) + " is past the case's " +
                       std::to_string(samples.size()) + " threshold samples");
    }
    const ThresholdSample& s = samples[key.sample];
    trace.k = s.k;
    trace.conv_shape = describe(conv);
    trace.input_quant = format_quant_params(conv.input_quant());
    trace.weight_scale = conv.weight_scales()[s.k];
    trace.acc_reference = s.acc;
    trace.acc_fused = static_cast<int32_t>(s.acc);
    trace.u_fused = kernel->Requantize(conv, s.k, trace.acc_fused);
    trace.y_fused = kernel->PostProcess(conv, s.k, trace.acc_fused);
    const reference::Requantizer requantizer(convention, conv.input_quant().scale, conv.weight_scales()[s.k]);
    const reference::RequantTrace requant = requantizer(s.acc, /*with_decimal=*/true);
    trace.requant_exact = requant.exact_value;
    trace.u = requant.u;
    trace.regions = Classify(knee_points(convention.activation), convention, table.at(requant.u), &requant);
  } else {
    const uint64_t stream = case_stream_id(spec);
    const generators::SampleLocation location = generators::LocateSample(key.seed, stream, key.sample);
    const generators::TargetedDraw targeted =
        generators::GenerateTargetedDraw(key.seed, stream, location.draw, convention, spec.mix);
    trace.draw = location.draw;
    TraceConvSample(trace, convention, *kernel, table, targeted.conv, targeted.input, location.element);
  }
  const reference::ActivationPoint& point = table.at(trace.u);
  if (spec.source == SampleSource::sweep && !key.explicit_conv) {
    trace.regions = Classify(knee_points(convention.activation), convention, point, nullptr);
  }
  trace.v = point.v;
  trace.f_exact = reference::ExactActivationDecimal(convention, trace.u, 30);
  trace.t = point.t;
  trace.y_reference = point.y;
  trace.error = int64_t{trace.y_fused} - trace.y_reference;
  return trace;
}

}  // namespace fusediff::driver
