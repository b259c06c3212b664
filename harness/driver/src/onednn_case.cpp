// oneDNN cases: the same targeted conv draws as the graph's quantize-then-activate convention (spec.convention),
// run through oneDNN, against the reference under reference_convention(spec): the f32-intermediate convention
// oneDNN's fused kernel declares (a verdict), the graph's convention (cross_convention, no verdict), or, for the
// unfused oneDNN graph, the graph's convention (a verdict).
#include "onednn_case.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fusediff/driver/suite.h"
#include "fusediff/generators/conv_generator.h"
#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"
#include "fusediff/reference/reference.h"
#include "classify.h"
#include "conv_draws.h"
#if FUSEDIFF_HAVE_ONEDNN
#include "fusediff/fused/onednn_kernel.h"
#endif

namespace fusediff::driver::detail {

#if FUSEDIFF_HAVE_ONEDNN

namespace {

// oneDNN's int8 convolution takes s8 weights over their whole range: its draws use [-128, 127].
generators::ConvShapeLimits OneDnnDrawLimits() {
  generators::ConvShapeLimits limits;
  limits.full_range_weights = true;
  return limits;
}

// The reference side of one output element: the f32 intermediate (per value) or the quantized one (per code).
struct ReferenceSample {
  reference::ActivationPoint point;
  std::optional<reference::RequantTrace> requant;  // quantized intermediate only
  float v32 = 0;                                   // f32 intermediate only
};

class ReferenceSide {
 public:
  ReferenceSide(const Convention& reference, TableCache* tables)
      : convention_(reference), f32_(reference.intermediate.kind == IntermediateKind::f32) {
    if (f32_) evaluator_.emplace(reference);
    else if (tables) table_ = &tables->get(reference);
    else owned_table_.emplace(reference), table_ = &*owned_table_;
  }
  bool f32() const { return f32_; }
  void prepare(const ConvCase& conv) {
    requantizers_.clear();
    if (f32_) return;
    for (int32_t k = 0; k < conv.output_channels(); ++k) {
      requantizers_.emplace_back(convention_, conv.input_quant().scale, conv.weight_scales()[static_cast<size_t>(k)]);
    }
  }
  ReferenceSample operator()(const ConvCase& conv, int32_t k, int64_t acc, bool with_decimal = false) {
    ReferenceSample s;
    if (f32_) {
      s.v32 = reference::F32IntermediateValue(acc, conv.input_quant().scale, conv.weight_scales()[static_cast<size_t>(k)]);
      s.point = (*evaluator_)(s.v32);
    } else {
      s.requant = requantizers_[static_cast<size_t>(k)](acc, with_decimal);
      s.point = table_->at(s.requant->u);
    }
    return s;
  }
  uint64_t escalations() const { return f32_ ? evaluator_->escalations() : table_->escalations(); }

 private:
  Convention convention_;
  bool f32_;
  std::optional<reference::ActivationEvaluator> evaluator_;
  std::optional<reference::ActivationTable> owned_table_;
  const reference::ActivationTable* table_ = nullptr;
  std::vector<reference::Requantizer> requantizers_;
};

}  // namespace

CaseResult RunOneDnnCase(CaseResult result, const RunOptions& options, TableCache& tables) {
  const auto start = std::chrono::steady_clock::now();
  const CaseSpec& spec = result.spec;
  auto unsupported = [&](std::string reason) {
    result.verdict = Verdict::unsupported;
    result.reason = std::move(reason);
    return result;
  };
  if (spec.source != SampleSource::conv) {
    return unsupported("oneDNN runs whole convolutions: only the conv source applies (not " +
                       std::string(to_string(spec.source)) + ")");
  }
  if (spec.mutant != Mutant::none) return unsupported("mutants are injected into the built-in fused paths only");
  std::string why;
  std::unique_ptr<fused::onednn::OneDnnKernel> kernel =
      fused::onednn::OneDnnKernel::Create(spec.convention, spec.fused, &why);
  if (!kernel) return unsupported(why);

  const Convention reference_conv = reference_convention(spec);
  ReferenceSide reference(reference_conv, &tables);
  const std::vector<double> knees = knee_points(spec.convention.activation);
  const double su = spec.convention.intermediate.q.scale;
  if (!reference.f32()) {
    result.per_code = CodeErrors(reference_conv.intermediate.q.type.qmin(), reference_conv.intermediate.q.type.code_count());
  }
  const uint64_t total = effective_samples(spec);
  const uint64_t stream = case_stream_id(spec);
  ShardDraws draws(options, stream, total, OneDnnDrawLimits());
  std::vector<int32_t> y_fused;
  // One draw at a time: oneDNN parallelises each primitive itself.
  while (const std::optional<DrawBatch> batch = draws.next()) {
    if (options.progress) options.progress(result.stats.overall.count());
    if (options.stop && options.stop->load()) {
      result.complete = false;
      break;
    }
    const generators::TargetedDraw targeted = generators::GenerateTargetedDraw(
        options.seed, stream, batch->draw, spec.convention, spec.mix, OneDnnDrawLimits());
    const ConvCase& conv = targeted.conv;
    y_fused.assign(conv.output_elements(), 0);
    std::string rejected;
    if (!kernel->Run(conv, targeted.input, y_fused, &rejected)) {
      if (result.unsupported_samples == 0) {
        result.unsupported_sample_reason = rejected;
        result.first_unsupported_sample = batch->first;
      }
      result.unsupported_samples += batch->take;
      continue;
    }
    const std::vector<int64_t> acc = reference::Conv2DAccumulators(conv, targeted.input);
    reference.prepare(conv);
    for (uint64_t j = 0; j < batch->take; ++j) {
      const int32_t k = static_cast<int32_t>(j % conv.output_channels());  // NHWK: k is the fastest index
      const ReferenceSample r = reference(conv, k, acc[j]);
      const int64_t error = int64_t{y_fused[j]} - r.point.y;
      const int32_t u = r.requant ? r.requant->u : 0;
      if (r.requant) result.per_code.add(u, error);
      result.stats.add(WorstCase{batch->first + j, error, acc[j], u, r.point.y, y_fused[j],
                                 ClassifySample(knees, su, r.point, r.requant ? &*r.requant : nullptr)});
    }
  }
  result.implementation = join_implementations(kernel->implementations());
  result.reference_escalations = reference.escalations();
  if (!reference.f32()) result.hard_codes = generators::HardCodes(reference_conv);
  finish_case_result(result, options.seed);  // nothing compared because oneDNN rejected every draw: unsupported
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

ReplayTrace ReplayOneDnn(const ReplayKey& key) {
  const CaseSpec& spec = key.spec;
  validate(spec);
  std::string why;
  std::unique_ptr<fused::onednn::OneDnnKernel> kernel =
      fused::onednn::OneDnnKernel::Create(spec.convention, spec.fused, &why);
  if (!kernel) throw InputError("replay: fused path " + std::string(to_string(spec.fused)) + " is unsupported here: " + why);
  if (spec.source != SampleSource::conv) throw InputError("replay.source: oneDNN cases have conv samples only");
  if (spec.mutant != Mutant::none) throw InputError("replay.mutant: mutants apply to the built-in fused paths only");
  const Convention reference_conv = reference_convention(spec);

  std::optional<generators::TargetedDraw> targeted;
  const ConvCase* conv = nullptr;
  const std::vector<int32_t>* input = nullptr;
  uint64_t element = 0;
  ReplayTrace trace;
  trace.key = key;
  if (key.explicit_conv) {
    conv = &key.explicit_conv->conv;
    input = &key.explicit_conv->input;
    element = key.explicit_conv->element;
  } else {
    const uint64_t stream = case_stream_id(spec);
    const generators::SampleLocation location = generators::LocateSample(key.seed, stream, key.sample, OneDnnDrawLimits());
    targeted = generators::GenerateTargetedDraw(key.seed, stream, location.draw, spec.convention, spec.mix,
                                                OneDnnDrawLimits());
    conv = &targeted->conv;
    input = &targeted->input;
    element = location.element;
    trace.draw = location.draw;
  }
  std::vector<int32_t> y(conv->output_elements());
  if (!kernel->Run(*conv, *input, y, &why)) throw InputError("replay: " + why);

  trace.convention = describe(reference_conv);
  trace.fused_convention = describe(declared_convention(spec));
  trace.implementation = join_implementations(kernel->implementations()) + " (oneDNN " +
                         fused::onednn::LibraryVersion() + ", ISA " + fused::onednn::EffectiveIsa() + ")";
  trace.black_box = true;
  const ConvCase::OutputCoord coord = TraceConvElement(trace, *conv, *input, element);
  ReferenceSide reference(reference_conv, nullptr);
  reference.prepare(*conv);
  const ReferenceSample r = reference(*conv, coord.k, trace.acc_reference, /*with_decimal=*/true);
  if (r.requant) {
    trace.requant_exact = r.requant->exact_value;
    trace.u = r.requant->u;
    trace.f_exact = reference::ExactActivationDecimal(reference_conv, r.requant->u, 30);
  } else {
    trace.f32_intermediate = true;
    // The exact decimal of the float (glibc prints every digit asked for; a binary32 needs far fewer than 160).
    char exact[192];
    std::snprintf(exact, sizeof exact, "%.160g", static_cast<double>(r.v32));
    trace.requant_exact = exact;
    trace.f_exact = reference::ActivationDecimal(reference_conv.activation, exact, 30);
  }
  trace.v = r.point.v;
  trace.t = r.point.t;
  trace.y_reference = r.point.y;
  trace.y_fused = y[element];
  trace.error = int64_t{trace.y_fused} - trace.y_reference;
  trace.regions = ClassifySample(knee_points(spec.convention.activation), spec.convention.intermediate.q.scale, r.point,
                           r.requant ? &*r.requant : nullptr);
  return trace;
}

void AddOneDnnProvenance(Provenance& provenance) {
  provenance.onednn_version = fused::onednn::LibraryVersion();
  provenance.onednn_isa = fused::onednn::EffectiveIsa();
}

#else  // built without oneDNN

CaseResult RunOneDnnCase(CaseResult result, const RunOptions&, TableCache&) {
  result.verdict = Verdict::unsupported;
  result.reason = "fusediff was built without oneDNN (configure with -DFUSEDIFF_WITH_ONEDNN=ON)";
  return result;
}

ReplayTrace ReplayOneDnn(const ReplayKey&) {
  throw InputError("replay.fused: fusediff was built without oneDNN (configure with -DFUSEDIFF_WITH_ONEDNN=ON)");
}

void AddOneDnnProvenance(Provenance&) {}

#endif

}  // namespace fusediff::driver::detail

namespace fusediff::driver {
bool OneDnnBuiltIn() { return FUSEDIFF_HAVE_ONEDNN != 0; }

}  // namespace fusediff::driver
