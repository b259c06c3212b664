// The strict inverse of ToJson: a results file read back into a RunResult, with errors that name the file, the
// field and what was expected.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <charconv>
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <limits>
#include <string>
#include <vector>

#include "fusediff/model/stage_module.h"
#include "fusediff/json/strict_parse.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/memory_budget.h"
#include "fusediff/model/mutants.h"
#include "fusediff/reports/reports.h"
#include "packed_text.h"

namespace fusediff::reports {

using nlohmann::json;

namespace {

// A JSON value together with where it sits ("cases[2].error_lsb"), so every complaint can say so.
class Field {
 public:
  Field(const json& value, std::string path, const std::string& source) : value_(value), path_(std::move(path)), source_(source) {}

  [[noreturn]] void fail(const std::string& expected) const {
    throw InputError(fmt::format("{}: {}: expected {}", source_, path_.empty() ? "(top level)" : path_, expected));
  }
  Field operator[](const char* key) const {
    if (!value_.is_object()) fail("an object");
    auto it = value_.find(key);
    const std::string path = path_.empty() ? key : path_ + "." + key;
    if (it == value_.end()) throw InputError(fmt::format("{}: {}: missing (expected by {})", source_, path, kResultsFormat));
    return Field(*it, path, source_);
  }
  bool has(const char* key) const { return value_.is_object() && value_.contains(key); }
  Field at(size_t i) const { return Field(value_[i], fmt::format("{}[{}]", path_, i), source_); }
  size_t array_size() const {
    if (!value_.is_array()) fail("an array");
    return value_.size();
  }
  const json& raw() const { return value_; }
  Field child(const json& value, const std::string& key) const { return Field(value, path_ + "." + key, source_); }
  const std::string& path() const { return path_; }

  std::string str() const {
    if (!value_.is_string()) fail("a string");
    return value_.get<std::string>();
  }
  bool boolean() const {
    if (!value_.is_boolean()) fail("true or false");
    return value_.get<bool>();
  }
  uint64_t u64() const {
    if (!value_.is_number_unsigned() && !(value_.is_number_integer() && value_.get<int64_t>() >= 0)) {
      fail("a non-negative integer");
    }
    return value_.get<uint64_t>();
  }
  int64_t i64() const {
    if (!value_.is_number_integer()) fail("an integer");
    if (value_.is_number_unsigned() && value_.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)) fail("an integer");
    return value_.get<int64_t>();
  }
  int32_t i32() const {
    const int64_t v = i64();
    if (v < INT32_MIN || v > INT32_MAX) fail("a 32-bit integer");
    return static_cast<int32_t>(v);
  }
  double number() const {
    if (!value_.is_number()) fail("a number");
    return value_.get<double>();
  }
  float float32() const {
    const double d = number();
    const float f = static_cast<float>(d);
    if (static_cast<double>(f) != d) fail("a float32 value (written exactly by fusediff)");
    return f;
  }

 private:
  const json& value_;
  std::string path_;
  const std::string& source_;
};

// Enum parsers throw InputError naming their field; prefix the file.
template <typename F>
auto Parse(const Field& f, F parse) {
  const std::string text = f.str();
  try {
    return parse(text, f.path());
  } catch (const InputError& e) {
    f.fail(std::string("a valid value (") + e.what() + ")");
  }
}

// ErrorBinsToJson's array: bins ascending, each once, count >= 1, max_abs <= sum_abs <= count * max_abs.
ErrorBins ReadErrorBins(const Field& f) {
  ErrorBins bins;
  for (size_t i = 0; i < f.array_size(); ++i) {
    const Field item = f.at(i);
    const int32_t key = item["bin"].i32();
    if (!bins.bins.empty() && bins.bins.rbegin()->first >= key) item["bin"].fail("bins in ascending order, each once");
    ErrorBin b;
    b.count = item["count"].u64();
    b.sum_abs = item["sum_abs"].u64();
    b.max_abs = item["max_abs"].i64();
    if (b.count == 0 || b.max_abs < 0 || static_cast<uint64_t>(b.max_abs) > b.sum_abs ||
        (b.max_abs > 0 && b.sum_abs / static_cast<uint64_t>(b.max_abs) > b.count)) {
      item.fail("count >= 1 and max_abs <= sum_abs <= count * max_abs");
    }
    bins.bins[key] = b;
  }
  return bins;
}

// bound_ratio (model/results.h BoundRatio): counts, and the largest r where samples > 0 ("inf" or a number >= 0).
BoundRatio ReadBoundRatio(const Field& f) {
  const auto non_negative = [](const Field& v) {
    if (v.raw().is_string() && v.str() == "inf") return std::numeric_limits<double>::infinity();
    const double d = v.number();
    if (!(d >= 0)) v.fail("a number >= 0 or \"inf\"");
    return d;
  };
  BoundRatio b;
  b.samples = f["samples"].u64();
  b.unbounded = f["unbounded"].u64();
  b.over = f["over"].u64();
  if (b.over > b.samples) f["over"].fail("over <= samples");
  if (f.has("unbounded_reason")) b.unbounded_reason = f["unbounded_reason"].str();
  if (b.samples > 0) {
    const Field max = f["max"];
    b.max_r = non_negative(max["r"]);
    b.max_sample = max["sample"].u64();
    b.max_delta = non_negative(max["delta"]);
    b.max_bound = max["bound"].number();
    if (!(b.max_bound > 0)) max["bound"].fail("a bound > 0");
  }
  return b;
}

ErrorStats ReadStats(const Field& f) {
  ErrorStats stats;
  const Field histogram = f["histogram"];
  if (!histogram.raw().is_object()) histogram.fail("an object mapping signed error -> count");
  for (auto it = histogram.raw().begin(); it != histogram.raw().end(); ++it) {
    int64_t error = 0;
    try {
      size_t used = 0;
      error = std::stoll(it.key(), &used);
      if (used != it.key().size()) throw std::invalid_argument("trailing characters");
    } catch (const std::exception&) {
      histogram.fail("integer keys (signed errors), got '" + it.key() + "'");
    }
    stats.add(error, histogram.child(it.value(), it.key()).u64());
  }
  if (f["count"].u64() != stats.count()) f["count"].fail(fmt::format("the histogram's total {}", stats.count()));
  return stats;
}

QuantParams ReadQuant(const Field& f) {
  QuantParams q;
  q.type.scalar = Parse(f["type"], parse_scalar_type);
  q.type.narrow = f["narrow"].boolean();
  q.scale = f["scale"].float32();
  q.zero_point = f["zero_point"].i32();
  return q;
}

// A stage object of a /2 file, as its kind's module reads it (json_report.cpp StageFieldToJson).
class StageFields final : public StageFieldReader {
 public:
  explicit StageFields(const Field& f) : f_(f) {}
  bool has(std::string_view key) const override { return f_.has(std::string(key).c_str()); }
  std::string text(std::string_view key) const override { return at(key).str(); }
  int32_t integer(std::string_view key) const override { return at(key).i32(); }
  float float32(std::string_view key) const override { return at(key).float32(); }
  QuantParams quant(std::string_view key) const override { return ReadQuant(at(key)); }
  PoolWindow window(std::string_view key) const override {
    const Field w = at(key);
    return PoolWindow{w["kernel"].i32(), w["stride"].i32(), w["padding"].i32()};
  }

 protected:
  std::string path(std::string_view key) const override { return at(key).path(); }
  [[noreturn]] void invalid(std::string_view key, const std::string& why) const override {
    at(key).fail(std::string("a valid value (") + why + ")");
  }

 private:
  Field at(std::string_view key) const { return f_[std::string(key).c_str()]; }
  const Field& f_;
};

// The pattern object of a /2 file (json_report.cpp PatternToJson).
void ReadPattern(const Field& f, CaseSpec& spec) {
  spec.pattern = Parse(f["name"], parse_pattern_name);
  spec.fusion = Parse(f["fusion"], parse_fusion);
  if (spec.pattern.producer == Producer::fully_connected) spec.pattern.multiplier = Parse(f["multiplier"], parse_multiplier_rule);
  const Field stages = f["stages"];
  if (stages.array_size() != spec.pattern.stages.size()) stages.fail(fmt::format("{} stages", spec.pattern.stages.size()));
  for (size_t i = 0; i < spec.pattern.stages.size(); ++i) {
    Stage& st = spec.pattern.stages[i];
    const Field stage = stages.at(i);
    if (stage["kind"].str() != to_string(st.kind)) stage["kind"].fail(std::string(to_string(st.kind)));
    stage_module(st.kind).read_results_fields(st, StageFields(stage));
  }
}

// The integers of a packed text's records: "a,b,c;a,b,c;" with `width` fields each, every one checked.
std::vector<std::vector<int64_t>> ReadRecords(const Field& f, size_t width, size_t max_bytes) {
  const std::string text = UnpackText(f.str(), max_bytes, f.path().empty() ? "(top level)" : f.path());
  std::vector<std::vector<int64_t>> records;
  size_t begin = 0;
  while (begin < text.size()) {
    const size_t end = text.find(';', begin);
    if (end == std::string::npos) f.fail("records ending in ';'");
    std::vector<int64_t> record;
    for (size_t at = begin; at <= end;) {
      const size_t stop = std::min(text.find(',', at), end);
      int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(text.data() + at, text.data() + stop, v);
      if (ec != std::errc() || ptr != text.data() + stop) f.fail(fmt::format("integers (record {})", records.size()));
      record.push_back(v);
      at = stop + 1;
    }
    if (record.size() != width) f.fail(fmt::format("{} integers per record (record {})", width, records.size()));
    records.push_back(std::move(record));
    begin = end + 1;
  }
  return records;
}

// The covered bitmap's hex digits: 16 per 64 codes, word i bit j = code qmin + 64 i + j.
void ReadBitmap(const Field& field, const std::string& bitmap, CodeErrors& codes) {
  const uint64_t count = codes.code_count();
  if (bitmap.size() != (count + 63) / 64 * 16) field.fail(fmt::format("{} hex digits", (count + 63) / 64 * 16));
  for (size_t word = 0; word * 16 < bitmap.size(); ++word) {
    uint64_t bits = 0;
    for (size_t d = 0; d < 16; ++d) {
      const char ch = bitmap[word * 16 + d];
      const int digit = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
      if (digit < 0) field.fail("lower-case hex digits");
      bits = bits << 4 | static_cast<uint64_t>(digit);
    }
    for (uint32_t bit = 0; bit < 64; ++bit) {
      if (!((bits >> bit) & 1)) continue;
      if (word * 64 + bit >= count) field.fail("no bits past code_count");
      codes.mark_covered(codes.qmin() + static_cast<int32_t>(word * 64 + bit));
    }
  }
}

// One run of codes [first, last] sharing the error range [lo, hi].
void SetRange(const Field& entry, const QuantType& type, int64_t first, int64_t last, int64_t lo, int64_t hi,
              CodeErrors& codes) {
  if (first > last || !type.contains(static_cast<int32_t>(first)) || !type.contains(static_cast<int32_t>(last))) {
    entry.fail("first <= last, both codes of the type");
  }
  if (lo > hi || (lo == 0 && hi == 0)) entry.fail("min <= max and a range other than [0, 0]");
  for (int64_t code = first; code <= last; ++code) {
    const int32_t u = static_cast<int32_t>(code);
    if (!codes.covered(u)) entry.fail(fmt::format("covered codes only (code {} is not covered)", code));
    if (codes.nonzero().count(u)) entry.fail(fmt::format("one range per code (code {} repeats)", code));
    codes.set_range(u, CodeErrors::Range{lo, hi});
  }
}

// per_code: /6 packs both texts (json_report.cpp PerCodeToJson); earlier formats hold the hex digits and an array of
// [first code, last code, min e, max e]. Which one a file holds shows in error_ranges: a text or an array.
CodeErrors ReadPerCode(const Field& f, const QuantType& type) {
  const int32_t qmin = f["qmin"].i32();
  const uint64_t count = f["code_count"].u64();
  if (count == 0) return CodeErrors();  // unsupported case: nothing ran
  if (qmin != type.qmin() || count != type.code_count()) {
    f.fail(fmt::format("qmin {} and code_count {} of the intermediate type", type.qmin(), type.code_count()));
  }
  CodeErrors codes(qmin, static_cast<uint32_t>(count));
  const bool packed = f["error_ranges"].raw().is_string();
  const Field bitmap = f["covered_bitmap"];
  ReadBitmap(bitmap, packed ? UnpackText(bitmap.str(), (count + 63) / 64 * 16, bitmap.path()) : bitmap.str(), codes);
  const Field ranges = f["error_ranges"];
  if (packed) {
    int64_t next = qmin;
    for (const std::vector<int64_t>& r : ReadRecords(ranges, 4, count * 48)) {
      if (r[0] < 0 || r[1] < 1) ranges.fail("runs with gap >= 0 and length >= 1, in code order");
      SetRange(ranges, type, next + r[0], next + r[0] + r[1] - 1, r[2], r[3], codes);
      next += r[0] + r[1];
    }
    return codes;
  }
  for (size_t i = 0; i < ranges.array_size(); ++i) {
    const Field entry = ranges.at(i);
    if (entry.array_size() != 4) entry.fail("[first code, last code, min error, max error]");
    SetRange(entry, type, entry.at(0).i32(), entry.at(1).i32(), entry.at(2).i64(), entry.at(3).i64(), codes);
  }
  return codes;
}

// A conv case's draws (json_report.cpp DrawsToJson): ascending, each with at least one sample, adding up to the
// case's histogram.
DrawTallies ReadDraws(const Field& f, const ErrorStats& overall) {
  if (f["bins"].str() != "e<=-2,e=-1,e=0,e=+1,e>=+2") f["bins"].fail("\"e<=-2,e=-1,e=0,e=+1,e>=+2\"");
  const Field tallies = f["tallies"];
  DrawTallies draws;
  uint64_t next = 0;
  std::array<uint64_t, kDrawBins> bins{};
  int64_t sum = 0;
  for (const std::vector<int64_t>& r : ReadRecords(tallies, 8, f["count"].u64() * 200 + 64)) {
    DrawTally t;
    if (r[0] < 0) tallies.fail("draws in ascending order (gap >= 0)");
    t.draw = next + static_cast<uint64_t>(r[0]);
    for (size_t b = 0; b < kDrawBins; ++b) {
      if (r[1 + b] < 0) tallies.fail("non-negative counts");
      t.bins[b] = static_cast<uint64_t>(r[1 + b]);
      bins[b] += t.bins[b];
    }
    t.sum = r[6];
    t.max_abs = r[7];
    if (t.count() == 0 || t.max_abs < 0) tallies.fail("draws with at least one sample and max_abs >= 0");
    sum += t.sum;
    draws.append(t);
    next = t.draw + 1;
  }
  if (draws.draws().size() != f["count"].u64()) f["count"].fail(fmt::format("the {} draws of tallies", draws.draws().size()));
  std::array<uint64_t, kDrawBins> expected{};
  int64_t expected_sum = 0;
  for (const auto& [error, n] : overall.histogram()) {
    expected[draw_bin(error)] += n;
    expected_sum += error * static_cast<int64_t>(n);
  }
  if (bins != expected || sum != expected_sum) tallies.fail("draws that add up to the case's error_lsb histogram");
  return draws;
}

// [[key, value], ...] with string keys and values, in order.
std::vector<std::pair<std::string, std::string>> ReadPairs(const Field& list) {
  std::vector<std::pair<std::string, std::string>> pairs;
  for (size_t i = 0; i < list.array_size(); ++i) {
    const Field pair = list.at(i);
    if (pair.array_size() != 2) pair.fail("a [key, value] pair");
    pairs.emplace_back(pair.at(0).str(), pair.at(1).str());
  }
  return pairs;
}

// `replays`: the entries carry their replay lines (/7 and earlier; /8 derives them from the case, fill_replays).
void ReadWorst(const Field& worst, bool replays, WorstCases& kept, std::vector<WorstCaseReport>& out) {
  for (size_t i = 0; i < worst.array_size(); ++i) {
    const Field w = worst.at(i);
    WorstCaseReport report;
    if (replays) report.replay = w["replay"].str();
    report.sample.sample = w["sample"].u64();
    report.sample.acc = w["acc"].i64();
    report.sample.u = w["u"].i32();
    report.sample.y_ref = w["y_ref"].i32();
    report.sample.y_fused = w["y_fused"].i32();
    report.sample.error = w["error"].i64();
    const Field region_list = w["regions"];
    for (size_t k = 0; k < region_list.array_size(); ++k) {
      const std::string name = region_list.at(k).str();
      bool known = false;
      for (Region r : kAllRegions) {
        if (name == to_string(r)) {
          known = true;
          if (r != Region::bulk) report.sample.regions |= region_bit(r);
        }
      }
      if (!known) region_list.at(k).fail("knee, saturation, quant_boundary or bulk");
    }
    if (w.has("implementation")) report.sample.implementation = w["implementation"].str();
    if (w.has("formulation")) {
      report.sample.formulation = w["formulation"].str();
      Parse(w["formulation"], parse_formulation);
    }
    if (w.has("repetitions")) {
      const Field reps = w["repetitions"];
      for (size_t k = 0; k < reps.array_size(); ++k) report.sample.repetitions.push_back(reps.at(k).i32());
      if (report.sample.repetitions.size() < 2) reps.fail("at least two outputs");
    }
    kept.offer(report.sample);
    out.push_back(std::move(report));
  }
}

Verdict ParseVerdict(const Field& f) {
  const std::string v = f.str();
  if (v == "pass") return Verdict::pass;
  if (v == "fail") return Verdict::fail;
  if (v == "unsupported") return Verdict::unsupported;
  if (v == "cross_convention") return Verdict::cross_convention;
  if (v == "known_defect") return Verdict::known_defect;
  if (v == "nondeterministic") return Verdict::nondeterministic;
  if (v == "documented_behaviour") return Verdict::documented_behaviour;
  if (v == "crashed") return Verdict::crashed;
  if (v == "timeout") return Verdict::timeout;
  f.fail("pass, fail, unsupported, cross_convention, known_defect, nondeterministic, documented_behaviour, crashed or "
         "timeout");
}

// A case's ledger tallies of one kind, in ascending id order. `version`: the file's; before /5 a tally's status was
// no_longer_reproduces when its draws explained nothing, since /5 when its model's predicted samples were none
// of them explained.
void ReadLedgerTallies(const Field& list, LedgerKind kind, int version, std::vector<KnownDefectTally>& into) {
  const size_t first = into.size();
  for (size_t i = 0; i < list.array_size(); ++i) {
    const Field k = list.at(i);
    KnownDefectTally t;
    t.id = k["id"].str();
    t.kind = kind;
    if (into.size() > first && into.back().id >= t.id) k["id"].fail("ids in ascending order, each once");
    t.draws = k["draws"].u64();
    t.samples = k["samples"].u64();
    t.predicted_samples = k["predicted_samples"].u64();
    if (k.has("withheld_samples")) t.withheld_samples = k["withheld_samples"].u64();
    if (t.withheld_samples > t.samples) k["withheld_samples"].fail("withheld_samples <= samples");
    t.stats.overall = ReadStats(k["explained"]);
    if (t.stats.overall.count() > t.predicted_samples || t.predicted_samples > t.samples) {
      k["predicted_samples"].fail("explained.count <= predicted_samples <= samples");
    }
    // A /7 or older tally's per-region histograms are not read (nothing shows them), and of its worst list (the
    // case's capacity then) the first kLedgerTallyWorst are kept.
    t.stats.worst = WorstCases(kLedgerTallyWorst);
    ReadWorst(k["worst"], version < 8, t.stats.worst, t.worst);
    if (t.worst.size() > kLedgerTallyWorst) t.worst.resize(kLedgerTallyWorst);
    const bool gone = version >= 5 ? t.no_longer_reproduces() : t.draws > 0 && t.stats.overall.count() == 0;
    if (k["status"].str() != (gone ? "no_longer_reproduces" : "reproduces")) {
      k["status"].fail(gone ? "\"no_longer_reproduces\" (nothing explained)" : "\"reproduces\"");
    }
    into.push_back(std::move(t));
  }
}

// /8: the path's facts ([key, value] pairs, model/backend.h ReplayFactKeys) and the case's replay line of sample 0,
// which must be the line the spec read gives: each worst sample's line is derived from that spec (fill_replays).
void ReadCaseReplay(const Field& f, uint64_t seed, CaseSpec& spec) {
  if (f.has("backend_facts")) spec.backend_facts = ReadPairs(f["backend_facts"]);
  if (format_replay(ReplayKey{seed, 0, spec, std::nullopt, std::nullopt, 0}) != f["replay"].str()) {
    f["replay"].fail("the replay line of this case's sample 0 under the run's seed and its fields (file edited?)");
  }
}

CaseResult ReadCase(const Field& f, int version) {
  CaseResult c;
  c.spec.name = f["name"].str();
  c.spec.source = Parse(f["source"], parse_sample_source);
  c.spec.mix = Parse(f["mix"], parse_region_mix);
  const Field activation = f["activation"];
  c.spec.convention.activation.kind = Parse(activation["kind"], parse_activation_kind);
  if (takes_alpha(c.spec.convention.activation.kind)) {
    c.spec.convention.activation.alpha = activation["params"]["alpha"].float32();
  }
  const Field convention = f["convention"];
  c.spec.convention.requant = Parse(convention["requant"], parse_requant_variant);
  c.spec.convention.intermediate.q = ReadQuant(convention["intermediate"]);
  c.spec.convention.intermediate.rounding = Parse(convention["intermediate"]["rounding"], parse_rounding_mode);
  c.spec.convention.output.q = ReadQuant(convention["output"]);
  c.spec.convention.output.rounding = Parse(convention["output"]["rounding"], parse_rounding_mode);
  c.spec.convention.output.zero_point_order = Parse(convention["output"]["zero_point_order"], parse_zero_point_order);
  // The float boundaries and conventions (absent where they hold their defaults; the replay string's rules).
  if (convention["intermediate"].has("stored")) {
    c.spec.convention.intermediate.kind = IntermediateKind::f32;
    c.spec.convention.intermediate.stored = Parse(convention["intermediate"]["stored"], parse_float_boundary);
  }
  if (convention["output"].has("float_value")) {
    c.spec.convention.output.float_value = Parse(convention["output"]["float_value"], parse_float_boundary);
  }
  if (convention.has("post_ops")) {
    const std::string ops = convention["post_ops"].str();
    if (ops != "binary32" && ops != "binary32_libm" && ops != "exact") {
      convention["post_ops"].fail("binary32, binary32_libm or exact");
    }
    c.spec.convention.post_ops = ops == "binary32"        ? PostOpArithmetic::binary32
                                 : ops == "binary32_libm" ? PostOpArithmetic::binary32_libm
                                                          : PostOpArithmetic::exact;
  }
  if (convention.has("float_conv")) {
    c.spec.convention.float_conv = Parse(convention["float_conv"], parse_float_conv);
    c.spec.convention.intermediate.kind = IntermediateKind::f32;
  }
  if (f.has("pattern")) ReadPattern(f["pattern"], c.spec);  // absent in /1 files: conv2d+act, kept whole
  Parse(f["fused"], [&c](std::string_view text, std::string_view) { read_fused_path(text, c.spec); });
  if (f.has("comparison")) c.spec.comparison = Parse(f["comparison"], parse_comparison);
  if (f.has("implementation")) c.implementation = f["implementation"].str();
  if (f.has("unsupported_samples")) {
    c.unsupported_samples = f["unsupported_samples"].u64();
    c.first_unsupported_sample = f["first_unsupported_sample"].u64();
    c.unsupported_sample_reason = f["unsupported_sample_reason"].str();
  }
  if (f.has("withheld_samples")) {
    c.withheld_samples = f["withheld_samples"].u64();
    c.first_withheld_sample = f["first_withheld_sample"].u64();
    c.withheld_reason = f["withheld_reason"].str();
  }
  // Draws the path's process lost (absent: none; files before the fields existed have none).
  for (auto [lost, word] : {std::pair{&c.crashed, "crashed"}, std::pair{&c.timed_out, "timeout"}}) {
    const std::string name = word;
    if (!f.has((name + "_samples").c_str())) continue;
    lost->samples = f[(name + "_samples").c_str()].u64();
    lost->first_sample = f[("first_" + name + "_sample").c_str()].u64();
    lost->reason = f[(name + "_reason").c_str()].str();
    lost->replay = f[(name + "_replay").c_str()].str();
  }
  c.spec.mutant = f["mutant"].raw().is_null() ? Mutant::none : Parse(f["mutant"], parse_mutant);
  if (f.has("table")) {  // an external table: its fingerprint is part of the case's identity
    const Field table = f["table"];
    c.spec.table_fingerprint = table["fingerprint"].str();
    c.spec.table_file = table["file"].str();
    c.spec.table_sha256 = table["sha256"].str();
    if (c.spec.table_fingerprint.size() != 16) table["fingerprint"].fail("16 hex digits");
  }
  try {
    validate(c.spec);
  } catch (const InputError& e) {
    f.fail(std::string("a case the model accepts (") + e.what() + ")");
  }
  // Files from before these fields existed: what the spec implies.
  c.reference_convention = f.has("reference_convention") ? f["reference_convention"].str()
                                                         : describe(reference_convention(c.spec));
  c.fused_convention = f.has("fused_convention") ? f["fused_convention"].str() : describe(declared_convention(c.spec));
  c.spec.samples = f["requested_samples"].u64();
  c.complete = f["complete"].boolean();

  const uint64_t capacity = f["worst_capacity"].u64();
  if (capacity > 100000) f["worst_capacity"].fail("at most 100000");
  c.stats.worst = WorstCases(capacity);
  c.stats.overall = ReadStats(f["error_lsb"]);
  if (f["samples"].u64() != c.stats.overall.count()) f["samples"].fail("error_lsb.count");
  const Field regions = f["regions"];
  for (Region r : kAllRegions) {
    c.stats.by_region[static_cast<size_t>(r)] = ReadStats(regions[std::string(to_string(r)).c_str()]);
  }
  const Field coverage = f["coverage"];
  c.reference_escalations = coverage["reference_escalations"].u64();
  c.per_code = ReadPerCode(f["per_code"], keyed_boundary(c.spec.pattern, reference_convention(c.spec)).type);
  c.intermediate_codes_covered = coverage["intermediate_codes"].u64();
  const Field hard = coverage["hard_codes"];
  for (size_t i = 0; i < hard.array_size(); ++i) c.hard_codes.push_back(hard.at(i).i32());
  c.hard_codes_covered = coverage["hard_codes_covered"].u64();
  if (c.intermediate_codes_covered != c.per_code.covered_count()) {
    coverage["intermediate_codes"].fail(fmt::format("the per_code bitmap's {} covered codes", c.per_code.covered_count()));
  }
  c.stats.nondeterministic_worst = WorstCases(capacity);
  ReadWorst(f["worst"], version < 8, c.stats.worst, c.worst);
  if (f.has("draws")) c.stats.draws = ReadDraws(f["draws"], c.stats.overall);
  if (f.has("table_readback")) {
    const Field t = f["table_readback"];
    TableReadback& r = c.table_readback.emplace();
    r.codes = t["codes"].u64();
    r.mismatches = t["mismatches"].u64();
    if (r.mismatches > r.codes) t["mismatches"].fail("mismatches <= codes");
    if (r.mismatches > 0) {
      const Field first = t["first"];
      r.first_code = first["code"].i32();
      r.first_library = first["library"].i32();
      r.first_declared = first["declared"].i32();
    }
  }
  if (f.has("bound_ratio")) c.bound_ratio = ReadBoundRatio(f["bound_ratio"]);
  if (f.has("batchnorm_error_bins")) {  // format 4
    const Field bins = f["batchnorm_error_bins"];
    c.batchnorm_bins.emplace();
    c.batchnorm_bins->by_u = ReadErrorBins(bins["by_u_magnitude"]);
    c.batchnorm_bins->by_gain = ReadErrorBins(bins["by_gain_log2"]);
  }
  for (const char* key : {"known_defects", "documented_behaviours"}) {
    if (!f.has(key)) continue;
    const LedgerKind kind = std::string_view(key) == "known_defects" ? LedgerKind::known_defect : LedgerKind::documented_behaviour;
    ReadLedgerTallies(f[key], kind, version, c.known_defects);
  }
  std::sort(c.known_defects.begin(), c.known_defects.end(),
            [](const KnownDefectTally& a, const KnownDefectTally& b) { return a.id < b.id; });
  for (size_t i = 1; i < c.known_defects.size(); ++i) {
    if (c.known_defects[i - 1].id == c.known_defects[i].id) f["documented_behaviours"].fail("ids that known_defects does not also list");
  }
  if (f.has("repeat")) {
    const uint64_t repeat = f["repeat"].u64();
    if (repeat < 2 || repeat > 64) f["repeat"].fail("2 to 64 (absent: 1)");
    c.repeat = static_cast<uint32_t>(repeat);
    c.stats.nondeterministic = f["nondeterministic_samples"].u64();
    ReadWorst(f["nondeterministic"], version < 8, c.stats.nondeterministic_worst, c.nondeterministic);
    if (c.nondeterministic.size() > c.stats.nondeterministic) f["nondeterministic"].fail("at most nondeterministic_samples entries");
  }
  for (const char* key : {"by_implementation", "by_formulation"}) {
    if (!f.has(key)) continue;
    const Field by = f[key];
    if (!by.raw().is_object()) by.fail("an object mapping a name to statistics");
    auto& into = std::string_view(key) == "by_implementation" ? c.stats.by_implementation : c.stats.by_formulation;
    for (auto it = by.raw().begin(); it != by.raw().end(); ++it) into[it.key()] = ReadStats(by.child(it.value(), it.key()));
  }
  if (f.has("paired_formulations")) {
    const Field p = f["paired_formulations"];
    PairedFormulations& paired = c.stats.paired;
    paired.dimension = p["dimension"].str();
    if (paired.dimension.empty()) p["dimension"].fail("a dimension name");
    paired.draws = p["draws"].u64();
    paired.both_samples = p["both_samples"].u64();
    paired.differing_samples = p["differing_samples"].u64();
    paired.max_abs_difference = p["max_abs_difference"].i64();
    if (paired.differing_samples > paired.both_samples) p["differing_samples"].fail("at most both_samples");
    const Field values = p["values"];
    for (size_t i = 0; i < values.array_size(); ++i) {
      paired.values.push_back(values.at(i)["value"].str());
      paired.rejected.push_back(values.at(i)["rejected_samples"].u64());
      paired.errors.push_back(ReadStats(values.at(i)["error_lsb"]));
    }
    if (paired.values.size() < 2) values.fail("at least two values");
  }
  const Field tolerance = f["tolerance"];
  c.tolerance.max_abs_lsb = tolerance["max_abs_lsb"].i64();
  if (tolerance.has("min_exact_fraction")) c.tolerance.min_exact_fraction = tolerance["min_exact_fraction"].number();
  if (tolerance.has("max_abs_mean_lsb")) c.tolerance.max_abs_mean_lsb = tolerance["max_abs_mean_lsb"].number();
  if (tolerance.has("documented_behaviour")) {
    if (tolerance["documented_behaviour"].str() != "fails") tolerance["documented_behaviour"].fail("\"fails\" (absent: not failing)");
    c.tolerance.documented_behaviour_fails = true;
  }
  c.verdict = ParseVerdict(f["verdict"]);
  if (f.has("reason")) c.reason = f["reason"].str();
  return c;
}

std::vector<CodeRun> ReadRuns(const Field& f) {
  std::vector<CodeRun> runs;
  for (size_t i = 0; i < f.array_size(); ++i) {
    const Field r = f.at(i);
    runs.push_back(CodeRun{r["u_lo"].i32(), r["u_hi"].i32(), r["codes"].u64(), r["delta"].i64(), r["row_lo"].i32(),
                           r["row_hi"].i32()});
  }
  return runs;
}

CanonicalComparison ReadCanonical(const Field& f) {
  CanonicalComparison k;
  k.mode = f["mode"].str();
  if (k.mode != kGateModeRelative && k.mode != kGateModeAbsolute) f["mode"].fail("relative or absolute");
  k.construction = f["construction"].str();
  k.rows = f["rows"].str();
  k.slack = f["slack"].i64();
  k.slack_source = f["slack_source"].str();
  k.canonical = ReadStats(f["error_lsb"]);
  const Field per_code = f["per_code"];
  const uint64_t count = per_code["code_count"].u64();
  // The canonical table covers every code of the intermediate type: recover the type from its range.
  QuantType type;
  for (ScalarType t : {ScalarType::int8, ScalarType::uint8, ScalarType::int16}) {
    for (bool narrow : {false, true}) {
      const QuantType candidate{t, narrow};
      if (candidate.qmin() == per_code["qmin"].i32() && candidate.code_count() == count) type = candidate;
    }
  }
  k.canonical_per_code = ReadPerCode(per_code, type);
  k.worse_codes = f["worse_codes"].u64();
  k.better_codes = f["better_codes"].u64();
  k.worse = ReadRuns(f["worse"]);
  k.better = ReadRuns(f["better"]);
  if (f.has("worse_rows")) {  // format 6
    const Field rows = f["worse_rows"];
    for (size_t i = 0; i < rows.array_size(); ++i) {
      const Field r = rows.at(i);
      k.worse_rows.push_back(WorseRow{r["index"].i32(), r["value"].str(), r["canonical_value"].str(), r["u_lo"].i32(),
                                      r["u_hi"].i32(), r["worse_codes"].u64(), r["worst_u"].i32(), r["error"].i64(),
                                      r["canonical_error"].i64()});
    }
  }
  return k;
}

// platform.backends (/7): each backend's provenance pairs in order. /6 and earlier kept the one backend that had
// provenance as an object member of platform named after it, {key: string value}: read into /7's shape (its pairs in
// key order, the order those files kept).
std::vector<BackendProvenance> ReadBackendProvenance(const Field& platform) {
  std::vector<BackendProvenance> backends;
  for (const auto& [name, value] : platform.raw().items()) {
    if (name == "backends" || !value.is_object()) continue;
    const Field fields = platform.child(value, name);
    BackendProvenance provenance{name, {}};
    for (const auto& [key, text] : value.items()) provenance.fields.emplace_back(key, fields[key.c_str()].str());
    backends.push_back(std::move(provenance));
  }
  if (!platform.has("backends")) return backends;
  const Field list = platform["backends"];
  for (size_t i = 0; i < list.array_size(); ++i) {
    const Field b = list.at(i);
    backends.push_back(BackendProvenance{b["name"].str(), ReadPairs(b["provenance"])});
  }
  return backends;
}

// "fusediff-results/N", N from 1 to kResultsVersion.
int ResultsVersion(const Field& f) {
  const std::string text = f.str();
  constexpr std::string_view prefix = "fusediff-results/";
  for (int version = 1; version <= kResultsVersion; ++version) {
    if (text == std::string(prefix) + std::to_string(version)) return version;
  }
  f.fail(fmt::format("\"{}\" (or an earlier fusediff-results/N, N from 1)", kResultsFormat));
}

}  // namespace

RunResult FromJson(const json& j, const std::string& source) {
  const Field top(j, "", source);
  if (!j.is_object()) top.fail("a JSON object (fusediff results)");
  const int version = ResultsVersion(top["format"]);
  RunResult run;
  run.provenance.tool_name = top["tool"]["name"].str();
  run.provenance.tool_version = top["tool"]["version"].str();
  run.provenance.git_commit = top["tool"]["git_commit"].str();
  run.provenance.compiler = top["platform"]["compiler"].str();
  run.provenance.libc = top["platform"]["libc"].str();
  run.provenance.isa = top["platform"]["isa"].str();
  run.provenance.backends = ReadBackendProvenance(top["platform"]);
  run.provenance.command_line = top["command_line"].str();
  run.provenance.created = top["created"].str();
  if (top.has("gate")) {
    const Field gate = top["gate"];
    run.gate = GateProvenance{gate["descriptor"].str(), gate["table_file"].str(), gate["table_sha256"].str(),
                              gate["table_kind"].str(), gate["tolerance_source"].str(), std::nullopt, {}};
    if (gate.has("canonical")) run.gate->canonical = ReadCanonical(gate["canonical"]);
    if (gate.has("illegal_fusion")) run.gate->illegal_fusion = gate["illegal_fusion"].str();
  }
  run.seed = top["seed"].u64();
  run.complete = top["complete"].boolean();
  const uint64_t shard_count = top["shard"]["count"].u64();
  const uint64_t shard_index = top["shard"]["index"].u64();
  if (shard_count == 0 || shard_count > UINT32_MAX || shard_index >= shard_count) {
    top["shard"].fail("index I and count N with 0 <= I < N");
  }
  run.shard_index = static_cast<uint32_t>(shard_index);
  run.shard_count = static_cast<uint32_t>(shard_count);
  run.shard_source = "unrecorded";  // files written before the field existed
  if (top["shard"].has("source")) {
    const Field source = top["shard"]["source"];
    run.shard_source = source.str();
    if (std::find(std::begin(kShardSources), std::end(kShardSources), run.shard_source) == std::end(kShardSources)) {
      source.fail(fmt::format("one of {}", fmt::join(kShardSources, ", ")));
    }
  }
  const Field cases = top["cases"];
  for (size_t i = 0; i < cases.array_size(); ++i) {
    CaseResult c = ReadCase(cases.at(i), version);
    c.shard_index = run.shard_index;
    c.shard_count = run.shard_count;
    if (cases.at(i)["sample_set"].str() != CaseSampleSetId(run.seed, c.spec)) {
      cases.at(i)["sample_set"].fail("the identity of this case's seed, definition and sample count (file edited?)");
    }
    if (version >= 8) {
      ReadCaseReplay(cases.at(i), run.seed, c.spec);
      fill_replays(c, run.seed);
    }
    for (const CaseResult& earlier : run.cases) {
      if (earlier.spec.name == c.spec.name) cases.at(i)["name"].fail("a name no other case has");
    }
    run.cases.push_back(std::move(c));
  }
  if (top["sample_set"].str() != SampleSetId(run)) {
    top["sample_set"].fail("the identity of the run's seed and cases (file edited?)");
  }
  return run;
}

RunResult ReadResultsFile(const std::string& path) {
  CheckFileWithinBudget(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream text;
  text << in.rdbuf();
  json j;
  try {
    j = strict_json::Parse(text.str(), path);  // a duplicate key: InputError with its line and path
  } catch (const json::parse_error& e) {
    throw InputError(fmt::format("{}: not valid JSON (byte {}): expected fusediff results ({})", path, e.byte, kResultsFormat));
  } catch (const json::exception& e) {  // e.g. a number beyond double's range
    throw InputError(fmt::format("{}: not valid JSON: {}", path, e.what()));
  }
  return FromJson(j, path);
}

}  // namespace fusediff::reports
