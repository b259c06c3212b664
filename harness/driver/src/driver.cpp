#include "fusediff/driver/driver.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "classify.h"
#include "comparison.h"
#include "conv_draws.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/reference/float_conv.h"
#include "fusediff/reference/float_formats.h"
#include "fusediff/reference/reference.h"
#include "fusediff/reference/stages.h"
#include "table_cache.h"

namespace fusediff::driver {

ReferenceCache::ReferenceCache() : impl_(std::make_unique<Impl>()) {}
ReferenceCache::~ReferenceCache() = default;

namespace {

bool IsF32(const Convention& c) { return c.intermediate.kind == IntermediateKind::f32; }

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
    return static_cast<RegionSet>(regions[static_cast<size_t>(u - qmin)] |
                                  reference::RoundingRegions(requant.saturated, requant.tie_distance));
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
  explicit Partial(size_t codes, size_t worst_count) : per_code(codes) {
    stats.worst = WorstCases(worst_count);
    stats.nondeterministic_worst = WorstCases(worst_count);
  }
  CaseStats stats;
  CodeRanges per_code;
  // Samples of draws the path refused: counted, never compared. The lowest sample index and the path's reason.
  uint64_t unsupported_samples = 0;
  uint64_t first_unsupported_sample = UINT64_MAX;
  std::string unsupported_reason;
  // Samples of draws the path withheld (the library would crash on them) that no ledger entry explains: they fail.
  uint64_t withheld_samples = 0;
  uint64_t first_withheld_sample = UINT64_MAX;
  std::string withheld_reason;
  // Samples of draws the path's process lost (it crashed, or gave no answer in time): they fail the case.
  LostSamples crashed, timed_out;
  // Per ledger entry whose conditions a draw met (by index into the ledger): its tally.
  std::map<size_t, KnownDefectTally> known;
  // conv2d+batchnorm+act: |e| against |u| and the channel gain (CaseResult::batchnorm_bins).
  BatchNormErrorBins bn;
  // A float output: r against its bound (CaseResult::bound_ratio).
  BoundRatio ratio;

  // The one place a compared sample is recorded (`code_index`: its keyed code's index, or none; `draw`: the conv
  // draw it belongs to, or none for the sweep and thresholds sources).
  void Record(std::optional<size_t> code_index, const WorstCase& sample, std::optional<uint64_t> draw = std::nullopt) {
    if (code_index) per_code.add(*code_index, sample.error);
    if (draw) stats.draws.add(*draw, sample.error);
    stats.add(sample);
  }
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

// A block of draws, drawn and (for a path that takes batches) run, waiting for its comparison.
struct RanBlock {
  std::vector<detail::DrawBatch> batches;
  std::vector<PatternDraw> drawn;
  std::vector<detail::BatchedRun> runs;  // empty: the path takes no batches (compare runs each draw)
};

// next()'s items through make(item), made on one thread of its own while the caller works on the item before: one
// item is always in the making. The items and their order are next()'s; a failure in make() comes out of the call
// that would have handed its item out.
template <typename Item, typename Made>
class RunAhead {
 public:
  RunAhead(std::function<std::optional<Item>()> next, std::function<Made(Item)> make)
      : next_(std::move(next)), make_(std::move(make)), maker_([this](std::stop_token stop) { Make(stop); }) {}
  std::optional<Made> operator()() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (!started_) {
      started_ = true;
      Post();
    }
    changed_.wait(lock, [&] { return !todo_; });
    if (failure_) std::rethrow_exception(std::exchange(failure_, nullptr));
    std::optional<Made> made = std::exchange(made_, std::nullopt);
    if (made) Post();
    return made;
  }

 private:
  void Post() {  // under mutex_
    todo_ = next_();
    if (todo_) changed_.notify_all();
  }
  void Make(std::stop_token stop) {
    std::unique_lock<std::mutex> lock(mutex_);
    while (changed_.wait(lock, stop, [&] { return todo_.has_value(); })) {
      Item item = std::move(*todo_);
      lock.unlock();
      std::optional<Made> made;
      std::exception_ptr failure;
      try {
        made = make_(std::move(item));
      } catch (...) {
        failure = std::current_exception();
      }
      lock.lock();
      made_ = std::move(made);
      failure_ = failure;
      todo_.reset();
      changed_.notify_all();
    }
  }
  std::function<std::optional<Item>()> next_;
  std::function<Made(Item)> make_;
  std::mutex mutex_;
  std::condition_variable_any changed_;
  bool started_ = false;
  std::optional<Item> todo_;  // posted, not yet made
  std::optional<Made> made_;
  std::exception_ptr failure_;
  std::jthread maker_;  // last: stopped and joined first
};

// Folds the workers' partials into the case result. Every merged structure is order-independent (histogram sums,
// per-code ranges, a total order on the worst list, the lowest unsupported sample), so the merged result does not
// depend on which worker compared which batch. `key`: the keyed codes' type (none: no per-code statistics).
void MergePartials(CaseResult& result, std::vector<Partial>& partials, std::optional<QuantType> key) {
  result.stats = std::move(partials[0].stats);
  for (size_t w = 1; w < partials.size(); ++w) result.stats.merge(partials[w].stats);
  std::map<size_t, KnownDefectTally> known;
  for (const Partial& p : partials) {
    for (const auto& [index, tally] : p.known) {
      auto [it, fresh] = known.emplace(index, tally);
      if (fresh) continue;
      it->second.draws += tally.draws;
      it->second.samples += tally.samples;
      it->second.predicted_samples += tally.predicted_samples;
      it->second.withheld_samples += tally.withheld_samples;
      it->second.stats.merge(tally.stats);
    }
  }
  result.known_defects.clear();
  for (auto& [index, tally] : known) merge_known_defects(result.known_defects, {std::move(tally)});
  if (has_stage(result.spec.pattern, StageKind::batchnorm)) {
    result.batchnorm_bins.emplace();
    for (const Partial& p : partials) result.batchnorm_bins->merge(p.bn);
  }
  if (const std::optional<FloatOutput> out = float_output(result.spec.pattern, result.spec.fusion)) {
    result.bound_ratio.emplace();
    result.bound_ratio->unbounded_reason = out->unbounded;
    for (const Partial& p : partials) result.bound_ratio->merge(p.ratio);
  }
  for (const Partial& p : partials) {
    result.unsupported_samples += p.unsupported_samples;
    if (p.unsupported_samples > 0 &&
        (result.unsupported_sample_reason.empty() || p.first_unsupported_sample < result.first_unsupported_sample)) {
      result.first_unsupported_sample = p.first_unsupported_sample;
      result.unsupported_sample_reason = p.unsupported_reason;
    }
    result.withheld_samples += p.withheld_samples;
    if (p.withheld_samples > 0 &&
        (result.withheld_reason.empty() || p.first_withheld_sample < result.first_withheld_sample)) {
      result.first_withheld_sample = p.first_withheld_sample;
      result.withheld_reason = p.withheld_reason;
    }
    result.crashed.merge(p.crashed);
    result.timed_out.merge(p.timed_out);
  }
  if (!key) return;
  // A code's range over all workers, then as CodeErrors: covered, with the range [min, max] of its errors unless
  // every one was 0 (what CodeErrors::add of every sample gives).
  const int32_t qmin = key->qmin();
  const uint32_t code_count = key->code_count();
  result.per_code = CodeErrors(qmin, code_count);
  for (size_t i = 0; i < code_count; ++i) {
    std::array<int32_t, 2> r = partials[0].per_code.range[i];
    for (size_t w = 1; w < partials.size(); ++w) {
      r[0] = std::min(r[0], partials[w].per_code.range[i][0]);
      r[1] = std::max(r[1], partials[w].per_code.range[i][1]);
    }
    if (r[0] == CodeRanges::kUnseen) continue;
    const int32_t code = qmin + static_cast<int32_t>(i);
    result.per_code.mark_covered(code);
    if (r[0] != 0 || r[1] != 0) result.per_code.set_range(code, CodeErrors::Range{r[0], r[1]});
  }
}

// One draw's paired formulations (the first `take` elements count: a case's last draw may be cut short).
void RecordPaired(PairedFormulations& p, const detail::PairedOutcome& o, uint64_t take) {
  if (o.dimension.empty()) return;
  if (p.dimension.empty()) {
    p.dimension = o.dimension;
    p.values = o.values;
    p.errors.assign(o.values.size(), ErrorStats{});
    p.rejected.assign(o.values.size(), 0);
  }
  if (p.dimension != o.dimension || p.values != o.values || o.runs.size() != o.values.size()) {
    throw std::logic_error("paired formulations: a draw ran other formulations than the case's first");
  }
  ++p.draws;
  bool all = true;
  for (size_t i = 0; i < o.runs.size(); ++i) {
    if (!o.runs[i].ran) {
      p.rejected[i] += take;
      all = false;
      continue;
    }
    for (uint64_t j = 0; j < take; ++j) p.errors[i].add(int64_t{o.runs[i].y[j]} - o.y_ref[j]);
  }
  if (!all || o.runs.empty()) return;
  p.both_samples += take;
  for (uint64_t j = 0; j < take; ++j) {
    int64_t spread = 0;
    for (size_t i = 1; i < o.runs.size(); ++i)
      spread = std::max<int64_t>(spread, std::abs(int64_t{o.runs[i].y[j]} - o.runs[0].y[j]));
    if (spread > 0) ++p.differing_samples;
    p.max_abs_difference = std::max(p.max_abs_difference, spread);
  }
}

// |y_fused - y_ref| of a float output's ordered codes, on the real values (0 where the codes are equal, NaN where
// one value is NaN).
double FloatOutputDelta(int32_t y_ref, int32_t y_fused, FloatFormat format) {
  if (y_ref == y_fused) return 0;
  return std::fabs(static_cast<double>(f32_from_order_code(y_fused, format)) -
                   static_cast<double>(f32_from_order_code(y_ref, format)));
}

// Every conv-source case, whatever its pattern or path: draws through detail::DrawComparison, one sample per element
// of the final tensor, compared by the one Record.
CaseResult RunDrawCase(CaseResult result, const RunOptions& options, TableCache& tables,
                       std::chrono::steady_clock::time_point start) {
  const CaseSpec& spec = result.spec;
  std::string why;
  std::unique_ptr<detail::DrawComparison> comparison =
      detail::DrawComparison::Create(spec, &tables, &why, &options.fused_path);
  if (!comparison) {
    result.verdict = Verdict::unsupported;
    result.reason = why;
    return result;
  }
  // A library-built table is checked against the declaration before any draw: a mismatch fails the case here.
  result.table_readback = comparison->ReadBackTable();
  if (result.table_readback && result.table_readback->mismatches > 0) {
    result.implementation = join_implementations(comparison->path().implementations());
    finish_case_result(result, options.seed);
    result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }
  const std::optional<QuantType> key = comparison->key_type();
  const int32_t key_min = key ? key->qmin() : 0;
  // A library that parallelises itself, and the f32 evaluator (it counts escalations), run on one thread.
  const unsigned threads = comparison->path().concurrent() && !comparison->f32_reference() ? options.threads : 1;
  std::vector<Partial> partials(threads, Partial(key ? key->code_count() : 0, options.worst_count));

  const KnownDefectLedger* ledger = comparison->library().empty() ? nullptr : options.known_defects;
  const Stage* bn_stage = find_stage(spec.pattern, StageKind::batchnorm);
  const std::optional<FloatOutput> float_out = float_output(spec.pattern, spec.fusion);
  const int32_t bn_zero_point = bn_stage ? keyed_boundary(spec.pattern, reference_convention(spec)).zero_point : 0;
  const uint64_t stream = case_stream_id(spec);
  const uint32_t repeat = comparison->repetitions(options.repeat);
  result.repeat = repeat;
  detail::ShardDraws draws(options, stream, effective_samples(spec), comparison->limits(), spec.pattern);
  // A path that takes draws in batches (FusedPath::preferred_batch > 0) gets blocks of them, in the same order; any
  // other one Run per draw.
  const size_t block = comparison->path().preferred_batch();
  const auto next = [&]() -> std::optional<std::vector<detail::DrawBatch>> {
    std::vector<detail::DrawBatch> batches;
    while (batches.size() < std::max<size_t>(1, block)) {
      std::optional<detail::DrawBatch> batch = draws.next();
      if (!batch) break;
      batches.push_back(*batch);
    }
    if (batches.empty()) return std::nullopt;
    return batches;
  };
  const auto compare = [&](const detail::DrawBatch& batch, const PatternDraw& draw, const detail::BatchedRun* batched,
                           Partial& partial) -> uint64_t {
    if (batched && (batched->outcome.status == DrawOutcome::Status::crashed ||
                    batched->outcome.status == DrawOutcome::Status::timeout)) {
      // Lost: the path's process died or hung on the draw (a plugin child). Counted, never compared; fails the case.
      LostSamples& lost =
          batched->outcome.status == DrawOutcome::Status::crashed ? partial.crashed : partial.timed_out;
      lost.add(batch.first, batch.take, batched->outcome.reason);
      return 0;
    }
    std::vector<detail::ComparedSample> samples;
    std::string rejected;
    const bool compared = comparison->Compare(draw, samples, &rejected, repeat, batched);
    RecordPaired(partial.stats.paired, comparison->paired(), batch.take);
    if (!compared && !batched && !comparison->path().last_run().withheld.empty()) {
      // Not executed: the library would crash on the draw. A ledger entry of model not_executed whose conditions
      // the draw meets counts it (withheld, explained); otherwise the case fails. Never unsupported.
      const RunInfo info = comparison->path().last_run();
      const DefectCallAttributes call = call_attributes(draw.formulation, draw.conv);
      for (size_t e = 0; ledger && e < ledger->entries.size(); ++e) {
        const KnownDefect& d = ledger->entries[e];
        if (!not_executed(d) ||
            !defect_applies(d, comparison->library(), comparison->library_version(), comparison->library_isa(),
                            info.implementation) ||
            !draw_meets_rule(d, draw.conv, call)) {
          continue;
        }
        auto [it, fresh] = partial.known.try_emplace(e);
        if (fresh) {
          it->second.id = d.id;
          it->second.kind = d.kind;
          it->second.stats.worst = WorstCases(kLedgerTallyWorst);
        }
        ++it->second.draws;
        it->second.samples += batch.take;
        it->second.withheld_samples += batch.take;
        return 0;
      }
      if (batch.first < partial.first_withheld_sample) {
        partial.first_withheld_sample = batch.first;
        partial.withheld_reason = info.withheld + " (" + info.implementation +
                                  (info.formulation.empty() ? "" : "; form=" + info.formulation) + ")";
      }
      partial.withheld_samples += batch.take;
      return 0;
    }
    if (!compared) {
      if (batch.first < partial.first_unsupported_sample) {
        partial.first_unsupported_sample = batch.first;
        partial.unsupported_reason = rejected;
      }
      partial.unsupported_samples += batch.take;
      return 0;
    }
    // Attribution: empty for the built-in paths; a batched draw's from its outcome.
    RunInfo info = batched ? RunInfo{} : comparison->path().last_run();
    if (batched) info.implementation = batched->outcome.implementation;
    // The formulation the library ran (a path may answer with another than the drawn one: a library path's extended
    // input where the negative padding is refused).
    const Formulation used_formulation =
        info.formulation.empty() ? draw.formulation : parse_formulation(info.formulation, "formulation");
    // Every ledger entry whose conditions this draw meets, and the outputs of their models applied together (two
    // defects can touch one draw: a stride-hole row and the dropped last column); with more than one, each entry's
    // own model too, so that a sample is counted for the entries whose defect changes it.
    struct Matched {
      KnownDefectTally* tally;
      std::vector<int32_t> alone;  // this entry's model alone (only when several match)
    };
    std::vector<Matched> matched;
    KnownDefectTally* race = nullptr;  // an entry of model thread_race whose rule the draw meets (below)
    std::vector<int32_t> model_y,
        declared_y;  // declared_y: a cross-convention case's answer under the path's convention
    if (ledger) {
      PatternDraw changed = draw;
      std::vector<const KnownDefect*> entries;
      const DefectCallAttributes call = call_attributes(used_formulation, draw.conv);
      for (size_t e = 0; e < ledger->entries.size(); ++e) {
        const KnownDefect& d = ledger->entries[e];
        if (not_executed(d) ||  // withheld draws only (above)
            !defect_applies(d, comparison->library(), comparison->library_version(), comparison->library_isa(),
                            info.implementation) ||
            !draw_meets_rule(d, draw.conv, call)) {
          continue;
        }
        auto [it, fresh] = partial.known.try_emplace(e);
        KnownDefectTally* tally = &it->second;
        if (fresh) {
          tally->id = d.id;
          tally->kind = d.kind;
          tally->stats.worst = WorstCases(kLedgerTallyWorst);
        }
        ++tally->draws;
        tally->samples += batch.take;
        if (thread_race(d)) {  // no values to model
          if (!race) race = tally;
          continue;
        }
        apply_defect_model(d, &changed.conv, &changed.input, call);
        matched.push_back({tally, {}});
        entries.push_back(&d);
      }
      if (!matched.empty()) {
        model_y = comparison->DeclaredOutputs(changed);
        if (comparison->cross_convention()) declared_y = comparison->DeclaredOutputs(draw);
      }
      for (size_t m = 0; matched.size() > 1 && m < matched.size(); ++m) {
        PatternDraw alone = draw;
        apply_defect_model(*entries[m], &alone.conv, &alone.input, call);
        matched[m].alone = comparison->DeclaredOutputs(alone);
      }
    }
    // BatchNorm's bins: each channel's gain, and u's zero point (the keyed boundary is u).
    std::vector<int32_t> gain_bins;
    if (bn_stage) {
      const BatchNormParams& bn = draw.operands(spec.pattern, StageKind::batchnorm).bn;
      for (size_t k = 0; k < bn.gamma.size(); ++k) {
        gain_bins.push_back(gain_bin(bn.gamma[k], bn.var[k], bn_stage->bn_eps));
      }
    }
    for (uint64_t j = 0; j < batch.take; ++j) {
      detail::ComparedSample& c = samples[j];
      const std::optional<size_t> code =
          key ? std::optional<size_t>(static_cast<size_t>(c.code - key_min)) : std::nullopt;
      WorstCase sample{batch.first + j,
                       c.error(),
                       c.acc,
                       c.code,
                       c.y_ref,
                       c.y_fused,
                       c.regions,
                       info.implementation,
                       info.formulation,
                       std::move(c.repetitions)};
      // The library is judged against the model under its own declared convention (in a cross-convention case, not
      // the graph's): the defect's samples leave the measurement, fusion's own effect stays. A sample whose
      // repetitions differ is never explained by a value model: it stays, as nondeterministic, unless a thread_race
      // entry's rule meets the draw (below).
      const int32_t base = declared_y.empty() ? c.y_ref : declared_y[j];
      if (!matched.empty() && model_y[j] != base) {
        // The entries whose own model changes this sample (all of them when one matches, else the first).
        std::vector<KnownDefectTally*> owners;
        for (const Matched& m : matched) {
          if (matched.size() == 1 || m.alone[j] != base) owners.push_back(m.tally);
        }
        if (owners.empty()) owners.push_back(matched.front().tally);
        for (KnownDefectTally* t : owners) ++t->predicted_samples;
        if (sample.repetitions.empty() &&
            explained_by_defect(base, c.y_fused, model_y[j], result.tolerance.max_abs_lsb)) {
          for (KnownDefectTally* t : owners) t->stats.add(sample);
          continue;
        }
      }
      // The library's race (model thread_race) on a draw its rule meets: a sample whose repetitions differ, or that
      // differs from the reference where no value model explains it (a clobbered pixel can come out alike twice),
      // is counted as the entry's, never judged.
      if (race && (!sample.repetitions.empty() || c.y_fused != base)) {
        race->stats.add(sample);
        continue;
      }
      partial.Record(code, sample, batch.draw);
      if (float_out) {
        const double bound = float_out->unbounded.empty() ? c.bound : std::numeric_limits<double>::infinity();
        partial.ratio.add(batch.first + j, FloatOutputDelta(c.y_ref, c.y_fused, float_out->format), bound);
      }
      if (bn_stage) {
        partial.bn.by_u.add(u_magnitude_bin(c.code, bn_zero_point), sample.error);
        partial.bn.by_gain.add(gain_bins[j % gain_bins.size()], sample.error);
      }
    }
    return batch.take;
  };
  const auto run = [&](std::vector<detail::DrawBatch> batches) {
    RanBlock ran{std::move(batches), {}, {}};
    ran.drawn.reserve(ran.batches.size());
    for (const detail::DrawBatch& b : ran.batches) ran.drawn.push_back(comparison->Draw(options.seed, stream, b.draw));
    if (block > 0) ran.runs = comparison->RunBatch(ran.drawn);
    return ran;
  };
  const auto compare_block = [&](const RanBlock& ran, Partial& partial) -> uint64_t {
    uint64_t compared = 0;
    for (size_t i = 0; i < ran.batches.size(); ++i) {
      compared += compare(ran.batches[i], ran.drawn[i], ran.runs.empty() ? nullptr : &ran.runs[i], partial);
    }
    return compared;
  };
  bool finished = false;
  // An out-of-process path runs block N + 1 while the one worker compares block N (FusedPath::out_of_process).
  // (Smaller first blocks, to shorten the wait for the first one, measured worse: each block costs a round trip.)
  if (block > 0 && threads == 1 && repeat == 1 && comparison->path().out_of_process()) {
    RunAhead<std::vector<detail::DrawBatch>, RanBlock> ahead(next, run);
    finished = ForEachBatch<RanBlock>(options, partials, ahead, compare_block);
  } else {
    const auto work = [&](std::vector<detail::DrawBatch>& batches, Partial& partial) {
      return compare_block(run(std::move(batches)), partial);
    };
    finished = ForEachBatch<std::vector<detail::DrawBatch>>(options, partials, next, work);
  }
  MergePartials(result, partials, key);
  if (!finished) result.complete = false;
  result.implementation = join_implementations(comparison->path().implementations());
  result.reference_escalations = comparison->escalations();
  if (key && keyed_by_activation_input(spec.pattern)) {
    result.hard_codes = generators::HardCodes(activation_convention(spec.pattern, reference_convention(spec)));
  }
  // Coverage, replay strings and verdict as a merge of shards recomputes them (nothing compared because the path
  // refused every draw: unsupported).
  finish_case_result(result, options.seed);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace

namespace {
// Why the sweep and threshold sources do not apply to a path without code-level steps (model/fused_path.h).
std::string WholeDrawsOnly(const CaseSpec& spec) {
  return "fused path " + fused_path_name(spec) + " runs whole draws: only the conv source applies (not " +
         std::string(to_string(spec.source)) + ")";
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
  result.stats.nondeterministic_worst = WorstCases(options.worst_count);
  const Convention& convention = spec.convention;
  validate(convention);
  result.tolerance = default_tolerance(spec);
  if (options.tolerance) result.tolerance = *options.tolerance;
  if (options.max_abs_lsb) result.tolerance.max_abs_lsb = *options.max_abs_lsb;
  if (options.strict) result.tolerance.documented_behaviour_fails = true;
  validate(spec);
  // The reference runs the graph's pattern with every boundary kept; the path declares its own fusion.
  result.reference_convention = describe(reference_convention(spec)) +
                                describe_pattern(spec.pattern, Fusion::keep_all, IsF32(reference_convention(spec)));
  result.fused_convention = describe(declared_convention(spec)) +
                            describe_pattern(spec.pattern, spec.fusion, IsF32(declared_convention(spec)));
  if (spec.source == SampleSource::conv) return RunDrawCase(std::move(result), options, *cache.impl_, start);
  if (!is_conv_act(spec.pattern)) {
    result.verdict = Verdict::unsupported;
    result.reason = "the " + std::string(to_string(spec.source)) + " source feeds codes to one table: conv2d+act only";
    return result;
  }
  std::string unsupported;
  const std::unique_ptr<FusedPath> path =
      options.fused_path ? options.fused_path(spec, &unsupported) : detail::CreateFusedPath(spec, &unsupported);
  const CodeSteps* kernel = path ? path->code_steps() : nullptr;
  if (!kernel) {
    result.verdict = Verdict::unsupported;
    result.reason = path ? WholeDrawsOnly(spec) : unsupported;
    return result;
  }

  const reference::ActivationTable& table = cache.impl_->get(convention);
  result.reference_escalations = table.escalations();
  const int32_t u_min = convention.intermediate.q.type.qmin();
  const uint64_t total = effective_samples(spec);

  const uint32_t code_count = convention.intermediate.q.type.code_count();
  const CodeFacts facts(table, convention);
  std::vector<Partial> partials(options.threads, Partial(code_count, options.worst_count));
  bool finished = true;

  {
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
      const uint64_t offset =
          (options.shard_index + options.shard_count - first % options.shard_count) % options.shard_count;
      for (uint64_t i = first + offset; i < end; i += options.shard_count, ++compared) {
        if (spec.source == SampleSource::sweep) {
          const int32_t u = u_min + static_cast<int32_t>(i);
          const int32_t y_ref = facts.y[i];
          const int32_t y_fused = kernel->ApplyTable(u);
          const int64_t error = int64_t{y_fused} - y_ref;
          partial.Record(i, WorstCase{i, error, 0, u, y_ref, y_fused, facts.regions[i]});
        } else {
          const ThresholdSample& s = samples[i];
          const reference::RequantTrace requant = requantizers[s.k](s.acc);
          const size_t code = static_cast<size_t>(requant.u - u_min);
          const int32_t y_fused = kernel->PostProcess(*conv, s.k, static_cast<int32_t>(s.acc));
          const int64_t error = int64_t{y_fused} - facts.y[code];
          partial.Record(
              code, WorstCase{i, error, s.acc, requant.u, facts.y[code], y_fused, facts.classify(requant.u, requant)});
        }
      }
      return compared;
    };
    finished = ForEachBatch<uint64_t>(options, partials, next, work);
  }
  MergePartials(result, partials, QuantType(convention.intermediate.q.type));
  if (!finished) result.complete = false;

  result.hard_codes = generators::HardCodes(convention);
  // Coverage, replay strings and verdict as a merge of shards recomputes them.
  finish_case_result(result, options.seed);
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

namespace {

// The draw a replay string names (an explicit one, or a generated one under its formulation) and the element's
// index in its final tensor; a generated draw's index goes to trace.draw.
PatternDraw ReplayedDraw(const ReplayKey& key, detail::DrawComparison& comparison, ReplayTrace& trace,
                         uint64_t* element) {
  const CaseSpec& spec = key.spec;
  PatternDraw draw;
  // The formulation the string names; none: the default one (strings written before formulations existed).
  const std::optional<Formulation> formulation = key.explicit_conv ? key.explicit_conv->formulation : key.formulation;
  if (formulation && !comparison.path().draws_formulations()) {
    throw InputError("replay.form: fused path " + std::string(fused_path_name(spec)) + " takes no formulation");
  }
  if (key.explicit_conv) {
    const ExplicitConv& e = *key.explicit_conv;
    draw = PatternDraw{e.conv, e.input, e.stages, formulation.value_or(Formulation{})};
    *element = e.element;
  } else {
    const uint64_t stream = case_stream_id(spec);
    const generators::SampleLocation location =
        detail::LocatePatternSample(key.seed, stream, key.sample, comparison.limits(), spec.pattern);
    draw = comparison.Draw(key.seed, stream, location.draw, formulation.value_or(Formulation{}));
    *element = location.element;
    trace.draw = location.draw;
  }
  return draw;
}

// An element of a pattern's final tensor behind a pool or a layer: its coordinates there, and the accumulator that
// fed it (the fused path's intermediates are not traced through pools and layers).
ReplayTrace TraceFinalTensorElement(ReplayTrace trace, const CaseSpec& spec, const PatternDraw& draw, uint64_t element,
                                    const detail::ComparedSample& sample, const Convention& reference_conv) {
  trace.conv_shape = describe(draw.conv);
  trace.input_quant = format_quant_params(draw.conv.input_quant());
  const PatternGeometry g = pattern_output_geometry(spec.pattern, draw.conv);
  trace.k = static_cast<int32_t>(element % static_cast<uint64_t>(g.channels));
  trace.ox = static_cast<int32_t>(element / g.channels % static_cast<uint64_t>(g.width));
  trace.oy = static_cast<int32_t>(element / g.channels / g.width % static_cast<uint64_t>(g.height));
  trace.n = static_cast<int32_t>(element / g.channels / g.width / g.height);
  trace.acc_reference = sample.acc;
  trace.black_box = true;  // the fused path's intermediates are not traced through pools and layers
  trace.pattern_stages.push_back("element of the final tensor " + std::to_string(g.batch) + "x" +
                                 std::to_string(g.height) + "x" + std::to_string(g.width) + "x" +
                                 std::to_string(g.channels) + "; key code " + std::to_string(sample.code) + " (" +
                                 format_quant_params(keyed_boundary(spec.pattern, reference_conv)) + ")");
  return trace;
}

// A binary32 intermediate (oneDNN's float boundaries and convolutions): v and its exact decimal, a residual added
// in binary32, the activation's exact value, and a float output's values.
ReplayTrace TraceF32Intermediate(ReplayTrace trace, const CaseSpec& spec, const PatternDraw& draw, uint64_t element,
                                 const ConvCase::OutputCoord& coord, const detail::ComparedSample& sample,
                                 const Convention& reference_conv) {
  float v32 = 0;
  if (reference_conv.float_conv.enabled) {
    // A float convolution: v from its float operands (reference/float_conv.h), not from acc.
    const reference::FloatConvElement fc = reference::FloatConvValues(draw.conv, draw.input, reference_conv.float_conv,
                                                                      reference_conv.float_conv.operands)[element];
    v32 = reference::RoundToFormat(fc.v, reference_conv.intermediate.stored);
    char line[160];
    std::snprintf(line, sizeof line, "float conv %s: %d products, sum |x w| + |b| = %.9g",
                  format_float_conv(reference_conv.float_conv).c_str(), fc.terms, fc.abs_sum);
    trace.pattern_stages.push_back(line);
  } else {
    v32 = reference::RoundToFormat(
        reference::F32IntermediateValue(trace.acc_reference, draw.conv.input_quant().scale,
                                        draw.conv.weight_scales()[static_cast<size_t>(coord.k)]),
        reference_conv.intermediate.stored);
  }
  trace.f32_intermediate = true;
  // The exact decimal of the float (glibc prints every digit asked for; a binary32 needs far fewer than 160).
  char exact[192];
  std::snprintf(exact, sizeof exact, "%.160g", static_cast<double>(v32));
  trace.requant_exact = exact;
  if (const Stage* add = find_stage(spec.pattern, StageKind::add)) {
    // The activation reads d, the residual added to v in binary32 by the f32 add rule.
    const float v = v32;
    const int32_t r = draw.operands(spec.pattern, StageKind::add).codes[element];
    v32 = reference::F32PostOpAdd(add->f32_add_rule, v, r, add->residual);
    std::snprintf(exact, sizeof exact, "%.160g", static_cast<double>(v32));
    trace.pattern_stages.push_back("residual r = " + std::to_string(r) + " (" + format_quant_params(add->residual) +
                                   ") -> d = " + exact + " (f32, add " + std::string(to_string(add->f32_add_rule)) +
                                   ")");
  }
  trace.f_exact = reference::ActivationDecimal(reference_conv.activation, exact, 30);
  if (const std::optional<FloatBoundary>& out = reference_conv.output.float_value) {
    // A float output: y is its ordered code; the values themselves, and the activation's binary32 result.
    const float e = reference::Binary32Activation(reference_conv.activation, v32);
    char line[200];
    std::snprintf(line, sizeof line, "y (%s): reference %.9g, fused %.9g (binary32 activation %.9g)",
                  std::string(to_string(out->format)).c_str(),
                  static_cast<double>(f32_from_order_code(sample.y_ref, out->format)),
                  static_cast<double>(f32_from_order_code(sample.y_fused, out->format)), static_cast<double>(e));
    trace.pattern_stages.push_back(line);
    trace.v = v32;
    trace.t = e;
    trace.u = 0;
    return trace;
  }
  reference::ActivationEvaluator evaluator(reference_conv);
  const reference::ActivationPoint point = evaluator(v32);
  trace.v = point.v;
  trace.t = point.t;
  trace.u = 0;
  return trace;
}

// The conventions a replay shows: the reference's, and the fused path's where it declares its own, fuses otherwise
// or is a library's black box (with the implementations it ran).
void DescribeReplayConventions(ReplayTrace& trace, const CaseSpec& spec, detail::DrawComparison& comparison,
                               const Convention& reference_conv) {
  trace.convention = describe(reference_conv) + describe_pattern(spec.pattern, Fusion::keep_all, IsF32(reference_conv));
  const Backend& backend = comparison.backend();
  const Convention declared = declared_convention(spec);
  if (backend.black_box() || !(declared == spec.convention) || spec.fusion != Fusion::keep_all) {
    trace.fused_convention = describe(declared) + describe_pattern(spec.pattern, spec.fusion, IsF32(declared));
  }
  if (backend.black_box()) {
    trace.black_box = true;
    trace.implementation =
        join_implementations(comparison.path().implementations()) + " (" + backend.LibraryDescription() + ")";
  }
}

// The replayed element compared once (every repetition the string or the path asks for): its sample, with the
// repetitions and the draw's formulation and implementation in the trace.
detail::ComparedSample CompareReplayedElement(const ReplayKey& key, detail::DrawComparison& comparison,
                                              const PatternDraw& draw, uint64_t element, ReplayTrace& trace) {
  std::vector<detail::ComparedSample> samples;
  std::string rejected;
  const uint32_t repeat = comparison.repetitions(key.repeat > 0 ? std::optional<uint32_t>(key.repeat) : std::nullopt);
  if (!comparison.Compare(draw, samples, &rejected, repeat)) {
    throw InputError("replay: the path refused the draw: " + rejected);
  }
  trace.repeat = repeat;
  if (comparison.path().draws_formulations()) {
    trace.formulation = format_formulation(draw.formulation);
    trace.implementation_of_draw = comparison.path().last_run().implementation;
  }
  if (element >= samples.size()) {
    throw InputError("replay.element: past the draw's " + std::to_string(samples.size()) + " outputs");
  }
  trace.y_repetitions = samples[element].repetitions;
  return samples[element];
}

// A quantized intermediate: the requantization's exact value and u, an add stage's sum, the path's own
// accumulator and code where it exposes them, and the activation at the keyed code.
ReplayTrace TraceQuantizedIntermediate(ReplayTrace trace, const CaseSpec& spec, const PatternDraw& draw,
                                       uint64_t element, const ConvCase::OutputCoord& coord,
                                       const detail::ComparedSample& sample, const Convention& reference_conv,
                                       const FusedPath& path) {
  const auto [sx, sw] = reference::MultiplierOperands(spec.pattern.multiplier, draw.conv.input_quant().scale,
                                                      draw.conv.weight_scales()[static_cast<size_t>(coord.k)]);
  const reference::RequantTrace requant =
      reference::Requantizer(reference_conv, sx, sw)(trace.acc_reference, /*with_decimal=*/true);
  trace.requant_exact = requant.exact_value;
  trace.u = requant.u;
  // The code the add reads: u, or the mul's product of u and b (conv2d+mul+add+act).
  std::string add_reads = "u = " + std::to_string(requant.u) + " (" + format_quant_params(reference_conv.intermediate.q);
  if (const Stage* mul = find_stage(spec.pattern, StageKind::mul)) {
    const std::vector<int32_t>& codes = draw.operands(spec.pattern, StageKind::mul).codes;
    const int32_t b = codes[mul->mul_operand == MulOperand::per_channel ? static_cast<size_t>(coord.k) : element];
    const int32_t product =
        reference::QuantizedMul(mul->mul_rule, requant.u, reference_conv.intermediate.q, b, mul->mul_input, mul->out).code;
    trace.pattern_stages.push_back(add_reads + "), b = " + std::to_string(b) + " (" + format_quant_params(mul->mul_input) +
                                   ") -> p = " + std::to_string(product) + " (" + format_quant_params(mul->out) +
                                   ", mul " + std::string(to_string(mul->mul_rule)) + ")");
    add_reads = "p = " + std::to_string(product) + " (" + format_quant_params(mul->out);
  }
  if (const Stage* add = find_stage(spec.pattern, StageKind::add)) {
    const int32_t r = draw.operands(spec.pattern, StageKind::add).codes[element];
    trace.pattern_stages.push_back(add_reads + "), residual r = " + std::to_string(r) + " (" + format_quant_params(add->residual) +
                                   ") -> s = " + std::to_string(sample.code) + " (" + format_quant_params(add->out) +
                                   ", add " + std::string(to_string(add->add_rule)) + ")");
  }
  if (const CodeSteps* steps = path.code_steps()) {
    // The path's own accumulator and code, side by side with the reference's.
    std::vector<int32_t> y(draw.conv.output_elements()), acc(y.size()), u(y.size());
    steps->Trace(draw.conv, draw.input, y, acc, u);
    trace.acc_fused = acc[element];
    trace.u_fused = u[element];
  } else {
    trace.black_box = true;
  }
  if (has_stage(spec.pattern, StageKind::activation)) {
    const Convention act = activation_convention(spec.pattern, reference_conv);
    const reference::ActivationTable table(act);
    const reference::ActivationPoint& point = table.at(sample.code);
    trace.v = point.v;
    trace.t = point.t;
    trace.f_exact = reference::ExactActivationDecimal(act, sample.code, 30);
  }
  return trace;
}

// Replay of a conv-source sample (a generated draw, or an explicit one from a v2 string): the one comparison for
// the values, then the producer's stages for display where the element is one of the producer's outputs.
ReplayTrace ReplayDraw(const ReplayKey& key) {
  const CaseSpec& spec = key.spec;
  std::string why;
  std::unique_ptr<detail::DrawComparison> comparison = detail::DrawComparison::Create(spec, nullptr, &why);
  if (!comparison) {
    throw InputError("replay: fused path " + std::string(fused_path_name(spec)) + " is unsupported here: " + why);
  }
  ReplayTrace trace;
  trace.key = key;
  uint64_t element = 0;
  const PatternDraw draw = ReplayedDraw(key, *comparison, trace, &element);
  const detail::ComparedSample sample = CompareReplayedElement(key, *comparison, draw, element, trace);
  const Convention reference_conv = reference_convention(spec);
  DescribeReplayConventions(trace, spec, *comparison, reference_conv);
  trace.y_reference = sample.y_ref;
  trace.y_fused = sample.y_fused;
  trace.error = sample.error();
  trace.regions = sample.regions;
  trace.u = sample.code;

  if (!pattern_is_elementwise(spec.pattern)) {
    return TraceFinalTensorElement(std::move(trace), spec, draw, element, sample, reference_conv);
  }
  const ConvCase::OutputCoord coord = detail::TraceConvElement(trace, draw.conv, draw.input, element);
  if (reference_conv.intermediate.kind == IntermediateKind::f32) {
    return TraceF32Intermediate(std::move(trace), spec, draw, element, coord, sample, reference_conv);
  }
  return TraceQuantizedIntermediate(std::move(trace), spec, draw, element, coord, sample, reference_conv,
                                    comparison->path());
}

}  // namespace

ReplayTrace Replay(const ReplayKey& key) {
  const CaseSpec& spec = key.spec;
  validate(spec);
  if (key.explicit_conv || spec.source == SampleSource::conv) return ReplayDraw(key);
  if (!is_conv_act(spec.pattern))
    throw InputError("replay.source: the " + std::string(to_string(spec.source)) + " source is conv2d+act only");
  const Convention& convention = spec.convention;
  std::string unsupported;
  const std::unique_ptr<FusedPath> path = detail::CreateFusedPath(spec, &unsupported);
  if (!path) throw InputError("replay: fused path " + fused_path_name(spec) + " is unsupported here: " + unsupported);
  const CodeSteps* kernel = path->code_steps();
  if (!kernel) throw InputError("replay.source: " + WholeDrawsOnly(spec));
  const reference::ActivationTable table(convention);

  ReplayTrace trace;
  trace.key = key;
  trace.convention = describe(convention);
  if (spec.source == SampleSource::sweep) {
    if (key.sample >= convention.intermediate.q.type.code_count()) {
      throw InputError("replay.sample: " + std::to_string(key.sample) + " is past the sweep's " +
                       std::to_string(convention.intermediate.q.type.code_count()) + " codes");
    }
    trace.u = convention.intermediate.q.type.qmin() + static_cast<int32_t>(key.sample);
    trace.y_fused = kernel->ApplyTable(trace.u);
    trace.regions = Classify(knee_points(convention.activation), convention, table.at(trace.u), nullptr);
  } else {
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
  }
  const reference::ActivationPoint& point = table.at(trace.u);
  trace.v = point.v;
  trace.f_exact = reference::ExactActivationDecimal(convention, trace.u, 30);
  trace.t = point.t;
  trace.y_reference = point.y;
  trace.error = int64_t{trace.y_fused} - trace.y_reference;
  return trace;
}

}  // namespace fusediff::driver
