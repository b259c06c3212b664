#include "fusediff/model/case_spec.h"
#include "fusediff/model/mutants.h"

#include <algorithm>
#include <cmath>
#include <cctype>
#include <map>
#include <string>

#include "fusediff/model/backend.h"
#include "fusediff/model/diagnostics.h"
#include "fusediff/model/error_stats.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/stage_module.h"
#include "fusediff/model/table.h"
#include "named_enum.h"

namespace fusediff {

namespace {
constexpr detail::Names<TableKind, 3> kTableKinds{
    {{"lut", TableKind::lut}, {"lut_interp", TableKind::lut_interp}, {"pwl", TableKind::pwl}}};
constexpr detail::Names<Comparison, 2> kComparisons{
    {{"same_convention", Comparison::same_convention}, {"cross_convention", Comparison::cross_convention}}};
constexpr detail::Names<SampleSource, 3> kSampleSources{
    {{"conv", SampleSource::conv}, {"sweep", SampleSource::sweep}, {"thresholds", SampleSource::thresholds}}};
}  // namespace

std::string_view to_string(TableKind k) { return detail::NameOf(k, kTableKinds); }

TableKind parse_table_kind(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "table kind", kTableKinds);
}

std::string fused_path_name(const CaseSpec& spec) {
  const Backend* backend = FindBackend(spec.backend);
  return backend ? backend->PathWord(spec) : spec.backend;
}

namespace {
// The registered backend whose words include `text`; null where none claims it.
const Backend* BackendOfWord(std::string_view text) {
  for (const Backend* backend : RegisteredBackends()) {
    if (backend->ClaimsWord(text)) return backend;
  }
  return nullptr;
}
}  // namespace

void parse_fused_path(std::string_view text, std::string_view field, CaseSpec& spec) {
  const Backend* backend = BackendOfWord(text);
  if (!backend) {
    throw InputError(std::string(field) + ": unknown fused path '" + std::string(text) + "' (expected " +
                     KnownPathWords() + ")");
  }
  spec.table_kind = TableKind::lut;
  backend->SelectPath(text, spec);
}

void read_fused_path(std::string_view text, CaseSpec& spec) {
  // A word with an argument (a plugin's "plugin:PATH.so") names something outside fusediff that may be gone when
  // results are read back: kept as it is, like a word no backend claims.
  if (const Backend* backend = BackendOfWord(text)) {
    const std::vector<std::string> words = backend->words();
    if (std::find(words.begin(), words.end(), text) != words.end()) return parse_fused_path(text, "fused", spec);
  }
  if (text.empty()) throw InputError("fused: expected a fused path's word");
  spec.table_kind = TableKind::lut;
  spec.backend = std::string(text);
}

bool uses_table(const CaseSpec& spec, TableKind kind) {
  return spec.backend == kBuiltInPath && spec.table_kind == kind;
}

std::string_view to_string(Comparison c) { return detail::NameOf(c, kComparisons); }

Comparison parse_comparison(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "comparison", kComparisons);
}

Convention declared_convention(const CaseSpec& spec) {
  const Backend* backend = FindBackend(spec.backend);
  return backend ? backend->DeclaredConvention(spec) : spec.convention;
}

Convention reference_convention(const CaseSpec& spec) {
  return spec.comparison == Comparison::cross_convention ? spec.convention : declared_convention(spec);
}

void validate(const CaseSpec& spec) {
  validate(spec.convention);
  validate(spec.pattern, spec.convention);
  if (const Stage* bn = find_stage(spec.pattern, StageKind::batchnorm); bn && !bn->bn_reads_codes) {
    // (a) is judged, (b) and (c) are measurements (model/batchnorm.h BnReference).
    const bool same = bn->bn_reference == BnReference::declared_fold;
    if (same != (spec.comparison == Comparison::same_convention)) {
      throw InputError("comparison: a BatchNorm fold against reference " + std::string(to_string(bn->bn_reference)) +
                       " is " + (same ? "same_convention" : "cross_convention") + ", not " +
                       std::string(to_string(spec.comparison)));
    }
  }
  if (const Stage* fc = find_stage(spec.pattern, StageKind::fully_connected);
      fc && fc->fc_reference == FcReference::declared_fold &&
      (spec.fusion != Fusion::fold || spec.comparison != Comparison::same_convention)) {
    throw InputError("comparison: an FC fold against its declared fold is a fold case judged same_convention");
  }
  if (spec.fusion == Fusion::norm_other_order && spec.comparison == Comparison::same_convention &&
      fusion_keeps_meaning(spec.pattern, spec.fusion, spec.convention, {}).empty()) {
    throw InputError(
        "comparison: norm_other_order runs another summation order than the declared one; it is judged "
        "(same_convention) only on exact rows (ln_regime exact_rows, f32) of two orders equal there "
        "(model/summation_order.h exact_rows_difference), else cross_convention");
  }
  if (spec.comparison == Comparison::cross_convention && declared_convention(spec) == spec.convention &&
      spec.fusion == Fusion::keep_all) {
    throw InputError(
        "comparison: cross_convention needs a fused path that declares another convention than the "
        "graph's; " +
        std::string(fused_path_name(spec)) + " declares the graph's own");
  }
}

std::string_view to_string(SampleSource s) { return detail::NameOf(s, kSampleSources); }

SampleSource parse_sample_source(std::string_view text, std::string_view field) {
  return detail::ParseNamed(text, field, "sample source", kSampleSources);
}

std::vector<int64_t> split_integers(const std::string& text, const std::string& field) {
  std::vector<int64_t> values;
  if (text.empty()) return values;
  size_t begin = 0;
  for (;;) {
    const size_t colon = text.find(':', begin);
    values.push_back(
        parse_int(std::string_view(text).substr(begin, colon == std::string::npos ? std::string::npos : colon - begin),
                  field + "[" + std::to_string(values.size()) + "]"));
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  return values;
}

namespace {
// A pattern's stages and their parameters. The fusion is part of the sample key only where it changes the draws
// (never: every fused variant of one pattern sees the same draws, so that they can be set side by side).
std::string PatternFields(const Pattern& p, Fusion fusion, bool for_samples) {
  std::string out = ";pattern=" + pattern_name(p);
  if (p.producer == Producer::fully_connected) out += ";mult=" + std::string(to_string(p.multiplier));
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const std::string suffix = stage_field_suffix(p, i);
    for (const auto& [key, value] : stage_module(p.stages[i].kind).replay_fields(p.stages[i], for_samples)) {
      out += ";" + key + suffix + "=" + value;
    }
  }
  if (!for_samples && fusion != Fusion::keep_all) out += ";fusion=" + std::string(to_string(fusion));
  return out;
}

// The fields that fix a case, in a fixed order: shared by canonical_key and the replay string. `for_samples`:
// the sample key, where a backend's paths of one graph coincide (model/backend.h, SampleWord).
std::string CanonicalFields(const CaseSpec& s, bool for_samples = false) {
  const Convention& c = s.convention;
  std::string out;
  out += "source=" + std::string(to_string(s.source));
  out += ";act=" + std::string(to_string(c.activation.kind));
  out += ";alpha=" + format_float32(c.activation.alpha);
  out += ";requant=" + std::string(to_string(c.requant));
  out += ";u=" + format_quant_params(c.intermediate.q);
  out += ";u_round=" + std::string(to_string(c.intermediate.rounding));
  // Absent for an intermediate that is not stored in a narrower float: earlier keys hold.
  if (!(c.intermediate.stored == FloatBoundary{})) out += ";u_store=" + format_float_boundary(c.intermediate.stored);
  out += ";y=" + format_quant_params(c.output.q);
  out += ";y_round=" + std::string(to_string(c.output.rounding));
  out += ";zp_order=" + std::string(to_string(c.output.zero_point_order));
  // Absent for exact post-ops (every case's own convention): only a declared oneDNN convention carries binary32.
  if (c.post_ops != PostOpArithmetic::exact) out += ";post_ops=" + std::string(to_string(c.post_ops));
  // Absent for the integer convolution and a quantized output: earlier keys hold.
  if (c.float_conv.enabled) out += ";conv=" + format_float_conv(c.float_conv);
  if (c.output.float_value) out += ";y_float=" + format_float_boundary(*c.output.float_value);
  const Backend* backend = for_samples ? FindBackend(s.backend) : nullptr;
  out += ";fused=" + (backend ? backend->SampleWord(s) : fused_path_name(s));
  if (s.source == SampleSource::conv) out += ";mix=" + format_region_mix(s.mix);
  if (!for_samples && s.comparison != Comparison::same_convention) {
    out += ";comparison=" + std::string(to_string(s.comparison));  // absent for same_convention: old keys hold
  }
  // Absent for conv2d+act kept whole: the keys (and so the sample streams) of earlier releases hold.
  if (!is_conv_act(s.pattern) || s.fusion != Fusion::keep_all) out += PatternFields(s.pattern, s.fusion, for_samples);
  return out;
}
}  // namespace

std::string format_region_mix(const RegionMix& m) {
  return "knee:" + format_float32(float(m.knee)) + "/saturation:" + format_float32(float(m.saturation)) +
         "/quant_boundary:" + format_float32(float(m.quant_boundary)) + "/bulk:" + format_float32(float(m.bulk));
}

RegionMix parse_region_mix(std::string_view text, std::string_view field) {
  RegionMix mix{0, 0, 0, 0};
  bool any = false;
  size_t begin = 0;
  for (;;) {
    const size_t end = text.find_first_of(",/", begin);
    const std::string_view item =
        text.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin);
    const size_t eq = item.find_first_of("=:");
    if (eq == std::string_view::npos) {
      throw InputError(std::string(field) + ": '" + std::string(item) + "' (expected REGION=WEIGHT, e.g. knee=1)");
    }
    const std::string_view name = item.substr(0, eq);
    const std::string item_field = std::string(field) + "." + std::string(name);
    const float weight = parse_float32(item.substr(eq + 1), item_field);
    if (weight < 0) throw InputError(item_field + ": weight must be >= 0");
    switch (parse_region(name, field)) {
      case Region::knee: mix.knee = weight; break;
      case Region::saturation: mix.saturation = weight; break;
      case Region::quant_boundary: mix.quant_boundary = weight; break;
      case Region::bulk: mix.bulk = weight; break;
    }
    any = any || weight > 0;
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  if (!any) throw InputError(std::string(field) + ": at least one weight must be > 0");
  return mix;
}

namespace {
// The external table's fingerprint: computed from the table where it is loaded, else the one a result kept.
std::string ExternalTableFingerprint(const CaseSpec& spec) {
  return spec.table ? table_fingerprint_hex(*spec.table) : spec.table_fingerprint;
}

// A path inside a replay string: bytes other than [A-Za-z0-9._/,:@+~-] as %XX (';' separates fields, the string is
// printed in single quotes).
std::string PercentEncode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : text) {
    if (std::isalnum(ch) || std::string_view("._/,:@+~-").find(static_cast<char>(ch)) != std::string_view::npos) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}
std::string PercentDecode(std::string_view text, std::string_view field) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '%') {
      out += text[i];
      continue;
    }
    const auto digit = [&](size_t k) {
      const char ch = k < text.size() ? text[k] : '?';
      if (ch >= '0' && ch <= '9') return ch - '0';
      if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
      throw InputError(std::string(field) + ": '%' must be followed by two upper-case hex digits");
    };
    out += static_cast<char>(digit(i + 1) * 16 + digit(i + 2));
    i += 2;
  }
  return out;
}
}  // namespace

void set_external_table(CaseSpec& spec, std::shared_ptr<const TableData> table, std::string file, std::string sha256) {
  spec.table_fingerprint = table ? table_fingerprint_hex(*table) : std::string();
  spec.table = std::move(table);
  spec.table_file = std::move(file);
  spec.table_sha256 = std::move(sha256);
}

std::string canonical_key(const CaseSpec& spec) {
  const std::string fingerprint = ExternalTableFingerprint(spec);
  if (fingerprint.empty()) return CanonicalFields(spec);  // unchanged for built-in tables: existing streams stay put
  return CanonicalFields(spec) + ";table=" + fingerprint;
}

std::string activation_table_key(const Convention& c) {
  CaseSpec keyed;
  keyed.convention = c;
  keyed.convention.requant = RequantVariant::exact;
  keyed.convention.intermediate.rounding = RoundingMode::half_away_from_zero;
  return CanonicalFields(keyed);
}

uint64_t case_stream_id(const CaseSpec& spec) {
  // FNV-1a, 64 bit: stable across platforms and compilers (std::hash is not).
  uint64_t hash = 0xcbf29ce484222325ull;
  const std::string key =
      !ExternalTableFingerprint(spec).empty() ? canonical_key(spec) : CanonicalFields(spec, /*for_samples=*/true);
  for (unsigned char ch : key) {
    hash ^= ch;
    hash *= 0x100000001b3ull;
  }
  return hash;
}

uint64_t effective_samples(const CaseSpec& spec) {
  return spec.source == SampleSource::sweep ? spec.convention.intermediate.q.type.code_count() : spec.samples;
}

namespace {
template <typename T>
std::string JoinCodes(const std::vector<T>& values) {
  std::string out;
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
      for (const T& v : values) out += (out.empty() ? "" : ":") + std::to_string(v);
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
  return out;
}

// One stage's tensors: res= (an elementwise operand), fws=, fw=, fb= (a layer), bng=, bnb=, bnm=, bnv= (BatchNorm);
// each key suffixed as stage_field_suffix says.
std::string EncodeOperands(const StageOperands& o, const std::string& suffix, StageKind kind) {
  std::string out;
  // An elementwise operand's codes: add's residual (res=), mul's second input (mulc=).
  const char* codes_key = kind == StageKind::mul ? ";mulc" : ";res";
  if (!o.codes.empty()) out.append(codes_key).append(suffix).append("=").append(JoinCodes(o.codes));
  if (!o.weights.empty()) {
    std::string fc_scales;
    for (float s : o.weight_scales) fc_scales.append(fc_scales.empty() ? "" : ":").append(format_float32(s));
    out.append(";fws").append(suffix).append("=").append(fc_scales);
    out.append(";fw").append(suffix).append("=").append(
        JoinCodes(std::vector<int32_t>(o.weights.begin(), o.weights.end())));
    out.append(";fb").append(suffix).append("=").append(JoinCodes(o.bias));
  }
  if (!o.bn.gamma.empty()) {
    const std::pair<const char*, const std::vector<float>*> tensors[] = {
        {";bng", &o.bn.gamma}, {";bnb", &o.bn.beta}, {";bnm", &o.bn.mean}, {";bnv", &o.bn.var}};
    for (const auto& [name, values] : tensors) {
      std::string text;
      for (float v : *values) text.append(text.empty() ? "" : ":").append(format_float32(v));
      out.append(name).append(suffix).append("=").append(text);
    }
  }
  if (!o.gamma.empty()) {  // layernorm: lng=, lnb=
    const std::pair<const char*, const std::vector<float>*> tensors[] = {{";lng", &o.gamma}, {";lnb", &o.beta}};
    for (const auto& [name, values] : tensors) {
      std::string text;
      for (float v : *values) text.append(text.empty() ? "" : ":").append(format_float32(v));
      out.append(name).append(suffix).append("=").append(text);
    }
  }
  return out;
}

std::string EncodeExplicit(const ExplicitConv& e, const Pattern& p) {
  const ConvCase& c = e.conv;
  std::string out =
      ";shape=" + JoinCodes(std::vector<int32_t>{
                      c.batch(), c.input_height(), c.input_width(), c.input_channels(), c.output_channels(),
                      c.kernel_height(), c.kernel_width(), c.stride_height(), c.stride_width(), c.dilation_height(),
                      c.dilation_width(), c.padding_top(), c.padding_left(), c.padding_bottom(), c.padding_right()});
  out += ";xq=" + format_quant_params(c.input_quant());
  std::string scales;
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
      for (float s : c.weight_scales()) scales += (scales.empty() ? "" : ":") + format_float32(s);
  FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
  out += ";ws=" + scales;
  out += ";w=" + JoinCodes(std::vector<int32_t>(c.weights().begin(), c.weights().end()));
  out += ";b=" + JoinCodes(c.bias());
  out += ";x=" + JoinCodes(e.input);
  out += ";element=" + std::to_string(e.element);
  for (size_t i = 0; i < e.stages.size() && i < p.stages.size(); ++i) {
    out += EncodeOperands(e.stages[i], stage_field_suffix(p, i), p.stages[i].kind);
  }
  if (c.weight_range() == WeightRange::full) out += ";wrange=full";
  if (c.op() == ConvOp::conv_transpose2d) {
    out += ";op=conv_transpose2d;opad=" + std::to_string(c.output_padding_height()) + ":" +
           std::to_string(c.output_padding_width());
  }
  if (e.formulation) out.append(";form=").append(format_formulation(*e.formulation));
  return out;
}
}  // namespace

namespace {
// ";KEY=VALUE" for each of the path's facts (model/backend.h ReplayFactKeys), the values percent-encoded.
std::string BackendFactFields(const CaseSpec& spec) {
  std::string out;
  for (const auto& [name, value] : spec.backend_facts) out.append(";").append(name).append("=").append(PercentEncode(value));
  return out;
}
}  // namespace

std::string format_replay(const ReplayKey& key) {
  const std::string repeat = key.repeat > 0 ? ";repeat=" + std::to_string(key.repeat) : std::string();
  if (key.explicit_conv) {
    return "fusediff-replay/2;name=" + key.spec.name + ";" + CanonicalFields(key.spec) +
           ";mutant=" + std::string(to_string(key.spec.mutant)) + BackendFactFields(key.spec) +
           EncodeExplicit(*key.explicit_conv, key.spec.pattern) + repeat;
  }
  std::string text = "fusediff-replay/1;seed=" + std::to_string(key.seed) + ";sample=" + std::to_string(key.sample) +
                     ";name=" + key.spec.name + ";" + CanonicalFields(key.spec) +
                     ";mutant=" + std::string(to_string(key.spec.mutant)) + BackendFactFields(key.spec);
  // The table itself cannot travel in a replay string: its fingerprint, file and digest name it.
  if (const std::string fingerprint = ExternalTableFingerprint(key.spec); !fingerprint.empty()) {
    text += ";table=" + fingerprint;
    if (!key.spec.table_file.empty()) text += ";table_file=" + PercentEncode(key.spec.table_file);
    if (!key.spec.table_sha256.empty()) text += ";table_sha256=" + key.spec.table_sha256;
  }
  if (key.formulation) text.append(";form=").append(format_formulation(*key.formulation));
  return text + repeat;
}

namespace {
// The fields of a replay string by name. take() removes the field it returns, so whatever is left once every
// reader has run is a field no reader knows.
class ReplayFields {
 public:
  explicit ReplayFields(std::string_view text) {
    while (!text.empty()) {
      const size_t end = text.find(';');
      const std::string_view item = text.substr(0, end);
      const size_t eq = item.find('=');
      if (eq == std::string_view::npos) throw InputError("replay: field '" + std::string(item) + "' has no '='");
      auto [it, inserted] = fields_.emplace(std::string(item.substr(0, eq)), std::string(item.substr(eq + 1)));
      if (!inserted) throw InputError("replay: field '" + it->first + "' appears twice");
      text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    }
  }
  bool has(std::string_view name) const { return fields_.find(name) != fields_.end(); }
  // The field's text, removed; a missing field is an InputError naming it.
  std::string take(std::string_view name) {
    const auto it = fields_.find(name);
    if (it == fields_.end()) throw InputError("replay: missing field '" + std::string(name) + "'");
    std::string value = std::move(it->second);
    fields_.erase(it);
    return value;
  }
  // The text of a field that is not taken (the table's fingerprint, quoted in an error); null where absent.
  const std::string* peek(std::string_view name) const {
    const auto it = fields_.find(name);
    return it == fields_.end() ? nullptr : &it->second;
  }
  void require_all_taken() const {
    if (!fields_.empty()) throw InputError("replay: unknown field '" + fields_.begin()->first + "'");
  }

 private:
  std::map<std::string, std::string, std::less<>> fields_;
};

// One stage's fields as its module reads them: a later stage of a kind already seen has suffixed keys.
class StageReplayFields final : public ReplayFieldSource {
 public:
  StageReplayFields(ReplayFields& fields, std::string suffix) : fields_(fields), suffix_(std::move(suffix)) {}
  bool has(std::string_view key) const override { return fields_.has(std::string(key) + suffix_); }
  std::string take(std::string_view key) const override { return fields_.take(std::string(key) + suffix_); }

 private:
  ReplayFields& fields_;
  std::string suffix_;
};

// The inverse of PatternFields.
void ParsePatternFields(ReplayFields& fields, CaseSpec& s) {
  s.pattern = parse_pattern_name(fields.take("pattern"), "replay.pattern");
  if (s.pattern.producer == Producer::fully_connected) {
    s.pattern.multiplier = parse_multiplier_rule(fields.take("mult"), "replay.mult");
  }
  for (size_t i = 0; i < s.pattern.stages.size(); ++i) {
    const StageReplayFields stage_fields(fields, stage_field_suffix(s.pattern, i));
    stage_module(s.pattern.stages[i].kind).parse_replay_fields(s.pattern.stages[i], stage_fields);
  }
}

// Floats "a:b:c" (binary32 each, exactly as written).
std::vector<float> SplitFloats(const std::string& text, const std::string& field) {
  std::vector<float> values;
  for (size_t begin = 0; begin <= text.size();) {
    const size_t colon = text.find(':', begin);
    const size_t length = colon == std::string::npos ? std::string::npos : colon - begin;
    values.push_back(
        parse_float32(std::string_view(text).substr(begin, length), field + "[" + std::to_string(values.size()) + "]"));
    if (colon == std::string::npos) break;
    begin = colon + 1;
  }
  return values;
}

// "fusediff-replay/1;" or "/2;" removed from `text`; true for version 2 (an explicit draw).
bool TakeReplayPrefix(std::string_view& text) {
  constexpr std::string_view kPrefixV1 = "fusediff-replay/1;";
  constexpr std::string_view kPrefixV2 = "fusediff-replay/2;";
  const bool v2 = text.starts_with(kPrefixV2);
  if (!v2 && !text.starts_with(kPrefixV1)) {
    throw InputError("replay: '" + std::string(text.substr(0, 40)) + "' does not start with " + std::string(kPrefixV1) +
                     " or " + std::string(kPrefixV2));
  }
  text.remove_prefix(kPrefixV1.size());
  return v2;
}

// The convention's fields, from act= to y_float=.
void ParseConventionFields(ReplayFields& fields, Convention& c) {
  c.activation.kind = parse_activation_kind(fields.take("act"), "replay.act");
  c.activation.alpha = parse_float32(fields.take("alpha"), "replay.alpha");
  c.requant = parse_requant_variant(fields.take("requant"), "replay.requant");
  c.intermediate.q = parse_quant_params(fields.take("u"), "replay.u", QuantParams{});
  c.intermediate.rounding = parse_rounding_mode(fields.take("u_round"), "replay.u_round");
  if (fields.has("u_store")) {
    c.intermediate.kind = IntermediateKind::f32;
    c.intermediate.stored = parse_float_boundary(fields.take("u_store"), "replay.u_store");
  }
  c.output.q = parse_quant_params(fields.take("y"), "replay.y", QuantParams{});
  c.output.rounding = parse_rounding_mode(fields.take("y_round"), "replay.y_round");
  c.output.zero_point_order = parse_zero_point_order(fields.take("zp_order"), "replay.zp_order");
  if (fields.has("conv")) {
    c.float_conv = parse_float_conv(fields.take("conv"), "replay.conv");
    c.intermediate.kind = IntermediateKind::f32;
  }
  if (fields.has("y_float")) c.output.float_value = parse_float_boundary(fields.take("y_float"), "replay.y_float");
}

// The case's fields both versions share: name, source, convention, path, mix, comparison, mutant, pattern, fusion.
void ParseCaseFields(ReplayFields& fields, CaseSpec& s) {
  s.name = fields.take("name");
  s.source = parse_sample_source(fields.take("source"), "replay.source");
  ParseConventionFields(fields, s.convention);
  parse_fused_path(fields.take("fused"), "replay.fused", s);
  if (s.source == SampleSource::conv) s.mix = parse_region_mix(fields.take("mix"), "replay.mix");
  if (fields.has("comparison")) s.comparison = parse_comparison(fields.take("comparison"), "replay.comparison");
  s.mutant = parse_mutant(fields.take("mutant"), "replay.mutant");
  if (fields.has("pattern")) ParsePatternFields(fields, s);
  if (fields.has("fusion")) s.fusion = parse_fusion(fields.take("fusion"), "replay.fusion");
  // What stood behind the path word (a plugin's name, version, options and draw limits): kept for its backend to
  // check (Backend::CheckReplayFacts).
  if (const Backend* backend = FindBackend(s.backend)) {
    for (const std::string& name : backend->ReplayFactKeys()) {
      if (fields.has(name)) s.backend_facts.emplace_back(name, PercentDecode(fields.take(name), "replay." + name));
    }
  }
}

// ";repeat=K", 1 to 64.
uint32_t ParseRepeat(const std::string& text) {
  const int64_t repeat = parse_int(text, "replay.repeat");
  if (repeat < 1 || repeat > 64) throw InputError("replay.repeat: " + std::to_string(repeat) + " (expected 1 to 64)");
  return static_cast<uint32_t>(repeat);
}

// An add stage's residual (res=): one code of the residual's type per element of the tensor it is added to.
StageOperands DecodeResidual(ReplayFields& fields, const Stage& st, const std::string& suffix,
                             const PatternGeometry& g) {
  const std::string key = "res" + suffix;
  StageOperands o;
  if (fields.has(key)) {
    for (int64_t r : split_integers(fields.take(key), "replay." + key)) o.codes.push_back(static_cast<int32_t>(r));
  }
  if (o.codes.size() != g.elements()) {
    throw InputError("replay." + key + ": " + std::to_string(o.codes.size()) + " codes, the pattern needs " +
                     std::to_string(g.elements()));
  }
  for (int32_t r : o.codes) {
    if (!st.residual.type.contains(r)) {
      throw InputError("replay." + key + ": " + std::to_string(r) + " is outside the residual type");
    }
  }
  return o;
}

// mul's second input (mulc=): one code per element of the tensor it reads, or one per channel (per_channel).
StageOperands DecodeMulInput(ReplayFields& fields, const Stage& st, const std::string& suffix, const PatternGeometry& g) {
  const std::string key = "mulc" + suffix;
  StageOperands o;
  if (fields.has(key)) {
    for (int64_t b : split_integers(fields.take(key), "replay." + key)) o.codes.push_back(static_cast<int32_t>(b));
  }
  const size_t needed = st.mul_operand == MulOperand::per_channel ? static_cast<size_t>(g.channels) : g.elements();
  if (o.codes.size() != needed) {
    throw InputError("replay." + key + ": " + std::to_string(o.codes.size()) + " codes, the mul's " +
                     std::string(to_string(st.mul_operand)) + " input needs " + std::to_string(needed));
  }
  for (int32_t b : o.codes) {
    if (!st.mul_input.type.contains(b)) {
      throw InputError("replay." + key + ": " + std::to_string(b) + " is outside the mul input's type");
    }
  }
  return o;
}

// A second layer (fws=, fw=, fb=): its weight scales, int8 weights and int32 bias over a 1x1 input.
StageOperands DecodeSecondLayer(ReplayFields& fields, const Stage& st, const std::string& suffix,
                                const PatternGeometry& g) {
  const auto key = [&suffix](const char* name) { return std::string(name) + suffix; };
  StageOperands o;
  if (fields.has(key("fw"))) {
    o.weight_scales = SplitFloats(fields.take(key("fws")), "replay." + key("fws"));
    for (int64_t w : split_integers(fields.take(key("fw")), "replay." + key("fw"))) {
      if (w < -127 || w > 127) {
        throw InputError("replay." + key("fw") + ": " + std::to_string(w) + " is outside [-127, 127]");
      }
      o.weights.push_back(static_cast<int8_t>(w));
    }
    for (int64_t b : split_integers(fields.take(key("fb")), "replay." + key("fb"))) {
      o.bias.push_back(static_cast<int32_t>(b));
    }
  }
  const size_t outputs = static_cast<size_t>(st.fc_outputs);
  if (g.height != 1 || g.width != 1 || o.weight_scales.size() != outputs || o.bias.size() != outputs ||
      o.weights.size() != outputs * static_cast<size_t>(g.channels)) {
    throw InputError("replay." + key("fw") + ": the second layer's tensors do not fit " + std::to_string(outputs) +
                     " outputs over " + std::to_string(g.channels) + " features of a 1x1 producer output");
  }
  return o;
}

// BatchNorm's parameters (bng=, bnb=, bnm=, bnv=): one binary32 each per output channel of the conv.
StageOperands DecodeBatchNorm(ReplayFields& fields, const Stage& st, const std::string& suffix, size_t channels) {
  const auto key = [&suffix](const char* name) { return std::string(name) + suffix; };
  StageOperands o;
  if (fields.has(key("bng"))) {
    o.bn.gamma = SplitFloats(fields.take(key("bng")), "replay." + key("bng"));
    o.bn.beta = SplitFloats(fields.take(key("bnb")), "replay." + key("bnb"));
    o.bn.mean = SplitFloats(fields.take(key("bnm")), "replay." + key("bnm"));
    o.bn.var = SplitFloats(fields.take(key("bnv")), "replay." + key("bnv"));
  }
  validate(o.bn, channels, st.bn_eps, "replay.bn");
  return o;
}

// LayerNorm's gamma and beta (lng=, lnb=): one finite binary32 each per feature of the row it normalizes.
StageOperands DecodeLayerNorm(ReplayFields& fields, const std::string& suffix, const PatternGeometry& g) {
  const auto key = [&suffix](const char* name) { return std::string(name) + suffix; };
  StageOperands o;
  if (fields.has(key("lng"))) {
    o.gamma = SplitFloats(fields.take(key("lng")), "replay." + key("lng"));
    o.beta = SplitFloats(fields.take(key("lnb")), "replay." + key("lnb"));
  }
  const size_t features = static_cast<size_t>(g.channels);
  if (o.gamma.size() != features || o.beta.size() != features) {
    throw InputError("replay." + key("lng") + ": gamma and beta need " + std::to_string(features) +
                     " values each (one per feature), got " + std::to_string(o.gamma.size()) + " and " +
                     std::to_string(o.beta.size()));
  }
  for (const std::vector<float>* v : {&o.gamma, &o.beta}) {
    for (float x : *v) {
      if (!std::isfinite(x)) throw InputError("replay." + key("lng") + ": gamma and beta must be finite");
    }
  }
  return o;
}

// The inverse of EncodeOperands for each stage of `p`, with the checks that the tensors fit the pattern and the
// conv (a replay string is user input). A stage reads the tensor its predecessors leave (pattern geometry).
void DecodeOperands(const Pattern& p, ReplayFields& fields, ExplicitConv& e) {
  PatternGeometry g{e.conv.batch(), e.conv.output_height(), e.conv.output_width(), e.conv.output_channels()};
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const Stage& st = p.stages[i];
    const std::string suffix = stage_field_suffix(p, i);
    StageOperands o;
    if (st.kind == StageKind::add) {
      o = DecodeResidual(fields, st, suffix, g);
    } else if (st.kind == StageKind::fully_connected) {
      o = DecodeSecondLayer(fields, st, suffix, g);
    } else if (st.kind == StageKind::batchnorm) {
      o = DecodeBatchNorm(fields, st, suffix, static_cast<size_t>(e.conv.output_channels()));
    } else if (st.kind == StageKind::mul) {
      o = DecodeMulInput(fields, st, suffix, g);
    } else if (st.kind == StageKind::layernorm) {
      o = DecodeLayerNorm(fields, suffix, g);
    }
    e.stages.push_back(std::move(o));
    g = stage_module(st.kind).output_geometry(st, g);
  }
  if (fields.has("bng")) throw InputError("replay.bng: BatchNorm parameters for a pattern without a batchnorm stage");
  if (fields.has("res")) throw InputError("replay.res: a residual for a pattern without an add stage");
  if (fields.has("lng")) throw InputError("replay.lng: LayerNorm parameters for a pattern without a layernorm stage");
  if (fields.has("mulc")) throw InputError("replay.mulc: a mul input for a pattern without a mul stage");
  if (fields.has("fw")) throw InputError("replay.fw: a second layer for a pattern without a fully connected stage");
}

// A v2 string's conv: its shape (N/H/W/C/K/KH/KW/SH/SW/DH/DW/PT/PL/PB/PR), input quantization, weight scales,
// weight range, weights and bias.
ConvCase ParseConvFields(ReplayFields& fields) {
  ConvCase conv;
  const std::vector<int64_t> shape = split_integers(fields.take("shape"), "replay.shape");
  if (shape.size() != 15)
    throw InputError("replay.shape: expected 15 integers N/H/W/C/K/KH/KW/SH/SW/DH/DW/PT/PL/PB/PR");
  const auto dim = [&shape](size_t i) { return static_cast<int32_t>(shape[i]); };
  conv.batch(dim(0))
      .input_size(dim(1), dim(2))
      .input_channels(dim(3))
      .output_channels(dim(4))
      .kernel_size(dim(5), dim(6))
      .stride(dim(7), dim(8))
      .dilation(dim(9), dim(10))
      .padding(dim(11), dim(12), dim(13), dim(14));
  conv.input_quant(parse_quant_params(fields.take("xq"), "replay.xq", QuantParams{}));
  conv.weight_scales(SplitFloats(fields.take("ws"), "replay.ws"));
  if (fields.has("wrange")) {
    const std::string range = fields.take("wrange");
    if (range != "full") throw InputError("replay.wrange: '" + range + "' (expected full, or no field for symmetric)");
    conv.weight_range(WeightRange::full);
  }
  std::vector<int8_t> weights;
  for (int64_t w : split_integers(fields.take("w"), "replay.w")) {
    if (w < -128 || w > 127) throw InputError("replay.w: " + std::to_string(w) + " is outside int8");
    weights.push_back(static_cast<int8_t>(w));
  }
  conv.weights(std::move(weights));
  std::vector<int32_t> bias;
  for (int64_t b : split_integers(fields.take("b"), "replay.b")) bias.push_back(static_cast<int32_t>(b));
  conv.bias(std::move(bias));
  return conv;
}

// A v2 string's draw: the conv, its input codes, the element, a transposed conv's op and output padding, then each
// stage's operands, all checked against each other.
ExplicitConv ParseExplicitDraw(ReplayFields& fields, const Pattern& pattern) {
  ExplicitConv e;
  e.conv = ParseConvFields(fields);
  for (int64_t x : split_integers(fields.take("x"), "replay.x")) e.input.push_back(static_cast<int32_t>(x));
  e.element = static_cast<uint64_t>(parse_int(fields.take("element"), "replay.element"));
  if (fields.has("op")) {
    e.conv.op(parse_conv_op(fields.take("op"), "replay.op"));
    const std::vector<int64_t> opad = split_integers(fields.take("opad"), "replay.opad");
    if (opad.size() != 2) throw InputError("replay.opad: expected H:W");
    e.conv.output_padding(static_cast<int32_t>(opad[0]), static_cast<int32_t>(opad[1]));
  }
  e.conv.validate();
  if (e.input.size() != e.conv.input_elements()) {
    throw InputError("replay.x: " + std::to_string(e.input.size()) + " codes, the conv needs " +
                     std::to_string(e.conv.input_elements()));
  }
  for (int32_t x : e.input) {
    if (!e.conv.input_quant().type.contains(x)) {
      throw InputError("replay.x: " + std::to_string(x) + " is outside the input type");
    }
  }
  DecodeOperands(pattern, fields, e);
  if (e.element >= pattern_output_geometry(pattern, e.conv).elements()) {
    throw InputError("replay.element: past the pattern's outputs");
  }
  return e;
}

// An external table's fields (table=, table_file=, table_sha256=): all three or none.
void ParseTableFields(ReplayFields& fields, CaseSpec& s) {
  if (const std::string* fingerprint = fields.peek("table")) {
    if (!fields.has("table_file") || !fields.has("table_sha256")) {
      throw InputError("replay.table: the sample used an external table (fingerprint " + *fingerprint +
                       ") and the string does not name its file (table_file=, table_sha256=); replay it with "
                       "`fusediff gate DESCRIPTOR.json`, which lists its codes");
    }
    s.table_fingerprint = fields.take("table");
    s.table_file = PercentDecode(fields.take("table_file"), "replay.table_file");
    s.table_sha256 = fields.take("table_sha256");
    if (s.table_fingerprint.size() != 16 || s.table_sha256.size() != 64) {
      throw InputError("replay.table: expected a 16-digit fingerprint and a 64-digit SHA-256");
    }
  } else if (fields.has("table_file") || fields.has("table_sha256")) {
    throw InputError("replay.table_file: without table= (the table's fingerprint)");
  }
}
}  // namespace

ReplayKey parse_replay(std::string_view text) {
  const bool v2 = TakeReplayPrefix(text);
  ReplayFields fields(text);
  ReplayKey key;
  if (!v2) {
    key.seed = static_cast<uint64_t>(parse_int(fields.take("seed"), "replay.seed"));
    key.sample = static_cast<uint64_t>(parse_int(fields.take("sample"), "replay.sample"));
  }
  CaseSpec& s = key.spec;
  ParseCaseFields(fields, s);
  std::optional<Formulation> formulation;
  if (fields.has("form")) formulation = parse_formulation(fields.take("form"), "replay.form");
  if (fields.has("repeat")) key.repeat = ParseRepeat(fields.take("repeat"));
  if (v2) {
    key.explicit_conv = ParseExplicitDraw(fields, s.pattern);
    key.explicit_conv->formulation = formulation;
  } else {
    key.formulation = formulation;
  }
  ParseTableFields(fields, s);
  fields.require_all_taken();
  validate(s);
  s.samples = key.sample + 1;
  return key;
}

}  // namespace fusediff
