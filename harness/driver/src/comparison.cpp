#include "comparison.h"

#include <climits>

#include "fusediff/generators/targets.h"
#include "fusediff/model/errors.h"

namespace fusediff::driver::detail {

std::unique_ptr<FusedPath> CreateFusedPath(const CaseSpec& spec, std::string* why) {
  const Backend& backend = BackendOf(spec);
  if (!BackendImplements(backend, spec.pattern, why)) return nullptr;
  return backend.CreatePath(spec, why);
}

std::unique_ptr<DrawComparison> DrawComparison::Create(const CaseSpec& spec, TableCache* tables, std::string* why,
                                                       const FusedPathFactory* factory) {
  validate(spec);
  std::unique_ptr<DrawComparison> c(new DrawComparison());
  c->spec_ = spec;
  c->backend_ = &BackendOf(spec);
  c->path_ = factory && *factory ? (*factory)(spec, why) : CreateFusedPath(spec, why);
  if (!c->path_) return nullptr;
  c->reference_convention_ = reference_convention(spec);
  c->f32_ = c->reference_convention_.intermediate.kind == IntermediateKind::f32;
  const reference::ActivationTable* table = nullptr;
  if (!c->f32_ && has_stage(spec.pattern, StageKind::activation)) {
    const Convention act = activation_convention(spec.pattern, c->reference_convention_);
    if (tables) {
      table = &tables->get(act);
    } else {
      c->owned_table_.emplace(act);
      table = &*c->owned_table_;
    }
  }
  c->table_ = table;
  // The knee half-width is the graph's activation input LSB, whatever the reference's intermediate.
  const double knee_scale = activation_convention(spec.pattern, spec.convention).intermediate.q.scale;
  c->reference_ = std::make_unique<reference::GraphReference>(spec.pattern, c->reference_convention_, table, knee_scale);
  const Convention declared = declared_convention(spec);
  if (spec.comparison == Comparison::cross_convention && declared.intermediate.kind == IntermediateKind::f32) {
    c->declared_ = std::make_unique<reference::GraphReference>(spec.pattern, declared, nullptr, knee_scale);
  }
  generators::ConvShapeLimits base;
  const DrawLimits path_limits = c->path_->draw_limits();
  base.full_range_weights = path_limits.weights == WeightRange::full;
  base.max_batch = path_limits.max_batch;
  base.max_spatial = path_limits.max_spatial;
  base.max_channels = path_limits.max_channels;
  base.max_kernel = path_limits.max_kernel;
  base.max_stride = path_limits.max_stride;
  base.max_dilation = path_limits.max_dilation;
  if (!path_limits.transposed) base.transposed_share = 0;
  base.draw_formulations = c->path_->draws_formulations();
  c->limits_ = generators::PatternDrawLimits(spec.pattern, base);
  for (const auto& [key, value] : c->backend_->provenance()) {
    if (key == "library") c->library_ = value;
    if (key == "version") c->library_version_ = value;
    if (key == "isa") c->library_isa_ = value;
  }
  return c;
}

std::optional<TableReadback> DrawComparison::ReadBackTable() {
  std::optional<std::vector<int32_t>> library = path_->ReadTable();
  if (!library) return std::nullopt;
  const Convention declared = activation_convention(spec_.pattern, declared_convention(spec_));
  if (declared.intermediate.kind != IntermediateKind::quantized) {
    throw std::logic_error("DrawComparison: a path read back a table, but its declared activation input is f32");
  }
  // The reference's own table where it runs the declared convention at the activation, else one built for it.
  std::optional<reference::ActivationTable> own;
  const reference::ActivationTable* table = table_;
  if (!table || activation_table_key(declared) !=
                    activation_table_key(activation_convention(spec_.pattern, reference_convention_))) {
    table = &own.emplace(declared);
  }
  const QuantType type = declared.intermediate.q.type;
  if (library->size() != type.code_count()) {
    throw std::logic_error("DrawComparison: the path read back " + std::to_string(library->size()) +
                           " table entries for " + std::to_string(type.code_count()) + " input codes");
  }
  TableReadback r;
  r.codes = library->size();
  for (int32_t u = type.qmin(); u <= type.qmax(); ++u) {
    const int32_t got = (*library)[static_cast<size_t>(u - type.qmin())];
    const int32_t want = table->at(u).y;
    if (got == want) continue;
    if (r.mismatches++ == 0) {
      r.first_code = u;
      r.first_library = got;
      r.first_declared = want;
    }
  }
  return r;
}

PatternDraw DrawComparison::Draw(uint64_t seed, uint64_t stream, uint32_t draw,
                                 const std::optional<Formulation>& formulation) const {
  if (!formulation) return generators::GeneratePatternDraw(seed, stream, draw, spec_.pattern, spec_.convention, spec_.mix, limits_);
  generators::ConvShapeLimits limits = limits_;
  limits.formulation = formulation;
  return generators::GeneratePatternDraw(seed, stream, draw, spec_.pattern, spec_.convention, spec_.mix, limits);
}

uint32_t DrawComparison::repetitions(std::optional<uint32_t> requested) const {
  if (!path_->repeatable()) return 1;
  return requested.value_or(2);
}

std::optional<QuantType> DrawComparison::key_type() const {
  if (f32_) return std::nullopt;
  return keyed_boundary(spec_.pattern, reference_convention_).type;
}

std::vector<BatchedRun> DrawComparison::RunBatch(std::span<const PatternDraw> draws) {
  // Every output starts as a code no type holds, so that an element the path never wrote cannot pass as an answer.
  constexpr int32_t kPoison = INT32_MIN;
  std::vector<BatchedRun> runs(draws.size());
  std::vector<std::span<int32_t>> y(draws.size());
  std::vector<DrawOutcome> outcomes(draws.size());
  for (size_t i = 0; i < draws.size(); ++i) {
    runs[i].y.assign(pattern_output_geometry(spec_.pattern, draws[i].conv).elements(), kPoison);
    y[i] = runs[i].y;
  }
  path_->set_repetition(0);
  path_->RunBatch(draws, y, outcomes);
  for (size_t i = 0; i < draws.size(); ++i) runs[i].outcome = std::move(outcomes[i]);
  return runs;
}

bool DrawComparison::Compare(const PatternDraw& draw, std::vector<ComparedSample>& out, std::string* rejected,
                             uint32_t repeat, const BatchedRun* batched) {
  if (repeat == 0) throw InputError("repeat: expected at least 1");
  const size_t n = pattern_output_geometry(spec_.pattern, draw.conv).elements();
  std::vector<int32_t> y_fused;
  bool ran = false;
  if (batched) {
    ran = batched->outcome.status == DrawOutcome::Status::ok;
    if (ran) y_fused = batched->y;
    else if (rejected) *rejected = batched->outcome.reason;
  } else {
    y_fused.assign(n, 0);
    path_->set_repetition(0);
    ran = path_->Run(draw, y_fused, rejected);
  }
  paired_ = PairedOutcome{};
  RunInfo info = batched ? RunInfo{} : path_->last_run();
  if (!info.paired_dimension.empty()) {
    paired_.dimension = std::move(info.paired_dimension);
    paired_.values = std::move(info.paired_values);
    paired_.runs = std::move(info.paired);
  }
  if (!ran && paired_.dimension.empty()) return false;
  const std::vector<reference::GraphElement> ref = (*reference_)(draw);
  if (ref.size() != n) throw std::logic_error("DrawComparison: reference and fused tensors differ in size");
  if (!paired_.dimension.empty()) {
    paired_.y_ref.resize(n);
    for (size_t j = 0; j < n; ++j) paired_.y_ref[j] = ref[j].y;
  }
  if (!ran) return false;
  // Later repetitions, each over a fresh poison pattern; an element that differs in any keeps every output.
  std::vector<std::vector<int32_t>> again;
  for (uint32_t r = 1; r < repeat; ++r) {
    std::vector<int32_t> y(n, 0);
    path_->set_repetition(r);
    std::string why;
    if (!path_->Run(draw, y, &why)) {
      throw InputError("the fused path ran a draw and then rejected it on repetition " + std::to_string(r) + ": " + why);
    }
    again.push_back(std::move(y));
  }
  path_->set_repetition(0);
  out.resize(n);
  for (size_t j = 0; j < n; ++j) {
    out[j] = ComparedSample{ref[j].acc, ref[j].key_code, ref[j].y, y_fused[j], ref[j].regions, ref[j].bound, {}};
    bool differs = false;
    for (const std::vector<int32_t>& y : again) differs = differs || y[j] != y_fused[j];
    if (differs) {
      out[j].repetitions.push_back(y_fused[j]);
      for (const std::vector<int32_t>& y : again) out[j].repetitions.push_back(y[j]);
    }
  }
  return true;
}

std::vector<int32_t> DrawComparison::DeclaredOutputs(const PatternDraw& draw) {
  const std::vector<reference::GraphElement> ref = declared_ ? (*declared_)(draw) : (*reference_)(draw);
  std::vector<int32_t> y(ref.size());
  for (size_t j = 0; j < ref.size(); ++j) y[j] = ref[j].y;
  return y;
}

uint64_t DrawSamples(const Pattern& pattern, uint64_t seed, uint64_t stream, uint32_t draw,
                     const generators::ConvShapeLimits& limits) {
  return pattern_output_geometry(pattern, generators::GenerateConvShape(seed, stream, draw, limits)).elements();
}

}  // namespace fusediff::driver::detail
