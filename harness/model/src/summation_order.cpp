#include "fusediff/model/summation_order.h"

#include <charconv>
#include <system_error>
#include <vector>
#include <string>

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
using detail::Names;
using detail::NameOf;
using detail::ParseNamed;
using detail::Split;

constexpr Names<SumShape, 3> kShapes{
    {{"sequential", SumShape::sequential}, {"pairwise", SumShape::pairwise}, {"blocked", SumShape::blocked}}};
constexpr Names<LaneFoldStep, 2> kFoldSteps{{{"halve", LaneFoldStep::halve}, {"adjacent", LaneFoldStep::adjacent}}};
constexpr Names<BlockedTail, 3> kTails{{{"tail_after_fold", BlockedTail::after_fold},
                                        {"tail_into_lane0", BlockedTail::into_lane0},
                                        {"tail_after_fold_mul4", BlockedTail::after_fold_mul4}}};
constexpr Names<Contraction, 2> kContractions{{{"nofma", Contraction::none}, {"fma", Contraction::fma}}};
constexpr Names<ProductPrecision, 2> kProducts{
    {{"prod32", ProductPrecision::binary32}, {"prod64", ProductPrecision::binary64}}};
constexpr Names<AccumulatorPrecision, 3> kAccumulators{{{"acc32", AccumulatorPrecision::binary32},
                                                        {"acc64", AccumulatorPrecision::binary64},
                                                        {"accbf16", AccumulatorPrecision::bf16}}};
constexpr Names<NormalizationStats, 4> kStats{{{"two_pass", NormalizationStats::two_pass},
                                               {"mean_in_double", NormalizationStats::mean_in_double},
                                               {"welford", NormalizationStats::welford},
                                               {"one_pass", NormalizationStats::one_pass}}};
constexpr Names<NormalizationOutput, 4> kOutputs{{{"centered_times_inv", NormalizationOutput::centered_times_inv},
                                                  {"scale_times_inv", NormalizationOutput::scale_times_inv},
                                                  {"scale_over_sqrt", NormalizationOutput::scale_over_sqrt},
                                                  {"centered_over_sqrt", NormalizationOutput::centered_over_sqrt}}};

// 'TEXT', appended (not `"'" + std::string`: GCC 12's false -Wrestrict, bug 105329).
std::string Quote(std::string_view text) {
  std::string quoted("'");
  return quoted.append(text).append("'");
}

[[noreturn]] void Fail(std::string_view field, const std::string& what) {
  throw InputError(std::string(field) + ": " + what);
}

int ParsePositive(std::string_view text, std::string_view field, std::string_view what) {
  int value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < 1) {
    Fail(field, "expected a positive integer " + std::string(what) + ", got " + Quote(text));
  }
  return value;
}

bool IsPow2UpTo64(int v) { return v >= 1 && v <= 64 && (v & (v - 1)) == 0; }

int Log2(int v) {
  int k = 0;
  while ((1 << k) < v) ++k;
  return k;
}

// "pairwise(8)" or "blocked(8x8,halve.adjacent.adjacent,tail_after_fold)" or "sequential".
void ParseShape(std::string_view text, std::string_view field, SummationOrder& order) {
  const size_t open = text.find('(');
  order.shape = ParseNamed(text.substr(0, open), field, "summation shape", kShapes);
  const bool wants_args = order.shape != SumShape::sequential;
  if ((open != std::string_view::npos) != wants_args || (wants_args && !text.ends_with(")"))) {
    Fail(field, Quote(text) + ": expected sequential, pairwise(LEAF) or blocked(LANESxUNROLL,FOLD,TAIL)");
  }
  if (!wants_args) return;
  const std::string_view args = text.substr(open + 1, text.size() - open - 2);
  if (order.shape == SumShape::pairwise) {
    order.leaf = ParsePositive(args, field, "leaf size");
    return;
  }
  const std::vector<std::string_view> fields = Split(args, ',');
  const size_t x = fields[0].find('x');
  if (fields.size() != 3 || x == std::string_view::npos) {
    Fail(field, Quote(text) + ": expected blocked(LANESxUNROLL,FOLD,TAIL)");
  }
  order.lanes = ParsePositive(fields[0].substr(0, x), field, "lane count");
  order.unroll = ParsePositive(fields[0].substr(x + 1), field, "unroll");
  order.tail = ParseNamed(fields[2], field, "blocked tail", kTails);
  const std::string_view fold = fields[1];
  if (fold == "sequential") return;
  for (const std::string_view step : Split(fold, '.')) {
    order.lane_fold.push_back(ParseNamed(step, field, "lane fold step", kFoldSteps));
  }
}
}  // namespace

std::string_view to_string(SumShape s) { return NameOf(s, kShapes); }
std::string_view to_string(LaneFoldStep s) { return NameOf(s, kFoldSteps); }
std::string_view to_string(BlockedTail t) { return NameOf(t, kTails); }
std::string_view to_string(Contraction c) { return NameOf(c, kContractions); }
std::string_view to_string(ProductPrecision p) { return NameOf(p, kProducts); }
std::string_view to_string(AccumulatorPrecision a) { return NameOf(a, kAccumulators); }
std::string_view to_string(NormalizationStats s) { return NameOf(s, kStats); }
std::string_view to_string(NormalizationOutput o) { return NameOf(o, kOutputs); }

SumShape parse_sum_shape(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "summation shape", kShapes);
}
LaneFoldStep parse_lane_fold_step(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "lane fold step", kFoldSteps);
}
BlockedTail parse_blocked_tail(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "blocked tail", kTails);
}
Contraction parse_contraction(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "contraction", kContractions);
}
ProductPrecision parse_product_precision(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "product precision", kProducts);
}
AccumulatorPrecision parse_accumulator_precision(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "accumulator precision", kAccumulators);
}
NormalizationStats parse_normalization_stats(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "normalization statistics", kStats);
}
NormalizationOutput parse_normalization_output(std::string_view text, std::string_view field) {
  return ParseNamed(text, field, "normalization output", kOutputs);
}

void validate(const SummationOrder& order, std::string_view field) {
  if (order.shape == SumShape::pairwise && order.leaf < 1) Fail(field, "pairwise leaf size must be >= 1");
  if (order.shape == SumShape::blocked) {
    if (!IsPow2UpTo64(order.lanes)) Fail(field, "blocked lane count must be a power of two in 1..64");
    if (!IsPow2UpTo64(order.unroll)) Fail(field, "blocked unroll must be a power of two in 1..64");
    if (!order.lane_fold.empty() && static_cast<int>(order.lane_fold.size()) != Log2(order.lanes)) {
      Fail(field, "a lane fold of " + std::to_string(order.lanes) + " lanes takes " +
                      std::to_string(Log2(order.lanes)) + " steps, got " + std::to_string(order.lane_fold.size()));
    }
  }
  if (order.contraction == Contraction::fma && order.accumulator != AccumulatorPrecision::binary32) {
    Fail(field, "fma contraction is declared for binary32 accumulators only");
  }
}

std::string format_summation_order(const SummationOrder& order) {
  // Appended piece by piece: GCC 12 warns falsely on `literal + std::string&&` (-Wrestrict, GCC bug 105329).
  std::string text(to_string(order.shape));
  if (order.shape == SumShape::pairwise) text.append("(").append(std::to_string(order.leaf)).append(")");
  if (order.shape == SumShape::blocked) {
    text.append("(").append(std::to_string(order.lanes)).append("x").append(std::to_string(order.unroll)).append(",");
    if (order.lane_fold.empty()) text.append("sequential");
    for (size_t i = 0; i < order.lane_fold.size(); ++i) {
      text.append(i == 0 ? "" : ".").append(to_string(order.lane_fold[i]));
    }
    text.append(",").append(to_string(order.tail)).append(")");
  }
  text.append(":").append(to_string(order.contraction)).append(":").append(to_string(order.product_precision));
  return text.append(":").append(to_string(order.accumulator));
}

SummationOrder parse_summation_order(std::string_view text, std::string_view field) {
  const std::vector<std::string_view> parts = Split(text, ':');
  if (parts.size() != 4) {
    Fail(field, Quote(text) + ": expected SHAPE:fma|nofma:prod32|prod64:acc32|acc64|accbf16");
  }
  SummationOrder order;
  ParseShape(parts[0], std::string(field) + ".shape", order);
  order.contraction = parse_contraction(parts[1], std::string(field) + ".contraction");
  order.product_precision = parse_product_precision(parts[2], std::string(field) + ".product_precision");
  order.accumulator = parse_accumulator_precision(parts[3], std::string(field) + ".accumulator");
  validate(order, field);
  return order;
}

const NormalizationOrder& order_for_length(const NormalizationOrder& order, size_t n) {
  if (order.short_rows.empty() || n >= static_cast<size_t>(order.short_below)) return order;
  return order.short_rows.front();
}

std::string format_normalization_order(const NormalizationOrder& order) {
  std::string text = std::string(to_string(order.stats)) + ";mean=" + format_summation_order(order.mean) +
                     ";var=" + format_summation_order(order.variance) + ";" + std::string(to_string(order.output)) +
                     ":" + std::string(to_string(order.output_contraction));
  if (order.short_rows.empty()) return text;
  return text + "|below" + std::to_string(order.short_below) + "=" + format_normalization_order(order.short_rows.front());
}

namespace {
constexpr int32_t kMaxSelectorLength = 4096;
NormalizationOrder ParseOneNormalizationOrder(std::string_view text, std::string_view field);
}  // namespace

NormalizationOrder parse_normalization_order(std::string_view text, std::string_view field) {
  const size_t bar = text.find('|');
  if (bar == std::string_view::npos) return ParseOneNormalizationOrder(text, field);
  NormalizationOrder order = ParseOneNormalizationOrder(text.substr(0, bar), field);
  const std::string_view selector = text.substr(bar + 1);  // "belowN=ORDER"
  const auto bad = [&] {
    Fail(std::string(field) + ".below", Quote(selector) + ": expected belowN=ORDER with N in 2.." +
                                            std::to_string(kMaxSelectorLength) + " (rows shorter than N run ORDER)");
  };
  const size_t equals = selector.find('=');
  if (!selector.starts_with("below") || equals == std::string_view::npos || equals < 6 || equals > 9) bad();
  int32_t n = 0;
  for (const char ch : selector.substr(5, equals - 5)) {
    if (ch < '0' || ch > '9') bad();
    n = n * 10 + (ch - '0');
  }
  if (n < 2 || n > kMaxSelectorLength) bad();
  const std::string_view rest = selector.substr(equals + 1);
  if (rest.find('|') != std::string_view::npos) Fail(std::string(field) + ".below", "one length selector at most");
  order.short_below = n;
  order.short_rows.push_back(ParseOneNormalizationOrder(rest, std::string(field) + ".below"));
  return order;
}

namespace {
NormalizationOrder ParseOneNormalizationOrder(std::string_view text, std::string_view field) {
  const std::vector<std::string_view> parts = Split(text, ';');
  if (parts.size() != 4 || !parts[1].starts_with("mean=") || !parts[2].starts_with("var=")) {
    Fail(field, Quote(text) + ": expected STATS;mean=ORDER;var=ORDER;OUTPUT:fma|nofma");
  }
  NormalizationOrder order;
  order.stats = parse_normalization_stats(parts[0], std::string(field) + ".stats");
  order.mean = parse_summation_order(parts[1].substr(5), std::string(field) + ".mean");
  order.variance = parse_summation_order(parts[2].substr(4), std::string(field) + ".var");
  const std::vector<std::string_view> out = Split(parts[3], ':');
  if (out.size() != 2) Fail(std::string(field) + ".output", "expected OUTPUT:fma|nofma, got " + Quote(parts[3]));
  order.output = parse_normalization_output(out[0], std::string(field) + ".output");
  order.output_contraction = parse_contraction(out[1], std::string(field) + ".output_contraction");
  return order;
}

#define FUSEDIFF_ORT_LONG_ROWS                                                   \
  "two_pass;mean=blocked(4x1,halve.halve,tail_after_fold):nofma:prod64:acc64;" \
  "var=blocked(8x1,halve.halve.halve,tail_after_fold_mul4):fma:prod32:acc32;centered_times_inv:fma"
#define FUSEDIFF_ORT_SHORT_ROWS \
  "welford;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;centered_over_sqrt:nofma"

constexpr NamedNormalizationOrder kNamedOrders[] = {
    {"onednn_jit",
     "two_pass;mean=blocked(8x8,halve.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32;"
     "var=blocked(8x8,halve.adjacent.adjacent,tail_after_fold):fma:prod32:acc32;centered_times_inv:fma"},
    {"onednn_jit_bf16",
     "two_pass;mean=blocked(16x8,halve.adjacent.adjacent.adjacent,tail_after_fold):nofma:prod32:acc32;"
     "var=blocked(16x8,halve.adjacent.adjacent.adjacent,tail_after_fold):fma:prod32:acc32;centered_times_inv:fma"},
    {"onednn_cpp",
     "two_pass;mean=blocked(4x1,sequential,tail_into_lane0):nofma:prod32:acc32;"
     "var=blocked(4x1,sequential,tail_into_lane0):nofma:prod32:acc32;scale_times_inv:nofma"},
    {"onednn_ref",
     "two_pass;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;scale_over_sqrt:nofma"},
    {"ort", FUSEDIFF_ORT_LONG_ROWS},
    {"ort_short", FUSEDIFF_ORT_SHORT_ROWS},
    {"ort_layernorm", FUSEDIFF_ORT_LONG_ROWS "|below8=" FUSEDIFF_ORT_SHORT_ROWS},
    {"sequential",
     "two_pass;mean=sequential:nofma:prod32:acc32;var=sequential:nofma:prod32:acc32;centered_times_inv:nofma"},
};
#undef FUSEDIFF_ORT_LONG_ROWS
#undef FUSEDIFF_ORT_SHORT_ROWS
}  // namespace

std::span<const NamedNormalizationOrder> named_normalization_orders() { return kNamedOrders; }

NormalizationOrder named_normalization_order(std::string_view name, std::string_view field) {
  std::string known;
  for (const NamedNormalizationOrder& n : kNamedOrders) {
    if (n.name == name) return parse_normalization_order(n.text, field);
    known += (known.empty() ? "" : ", ") + std::string(n.name);
  }
  Fail(field, "unknown normalization order " + Quote(name) + " (expected " + known + ", or an order's text)");
}

std::string format_declared_normalization_order(const NormalizationOrder& order) {
  std::string text = format_normalization_order(order);
  for (const NamedNormalizationOrder& n : kNamedOrders) {
    if (n.text == text) return std::string(n.name);
  }
  for (char& ch : text) ch = ch == ';' ? '/' : ch;
  return text;
}

namespace {
// Why `o` is not a two-pass normalization in binary32 or wider (summation_order.h): what both the exact-rows
// argument and the output bound assume. Empty when it is.
std::string TwoPassExclusion(const NormalizationOrder& o) {
  const std::string name = format_declared_normalization_order(o);
  if (!o.short_rows.empty()) {  // every length's order must be of the class
    std::string why = TwoPassExclusion(o.short_rows.front());
    if (why.empty()) {
      NormalizationOrder long_rows = o;
      long_rows.short_rows.clear();
      long_rows.short_below = 0;
      why = TwoPassExclusion(long_rows);
    }
    return why.empty() ? why : name + " (rows below " + std::to_string(o.short_below) + " or from it): " + why;
  }
  if (o.stats == NormalizationStats::welford) return name + " is welford: its running mean m += d / k rounds at every step";
  if (o.stats == NormalizationStats::one_pass) {
    return name + " is one_pass: it sums x^2, not the centred squares, and forms fl32(E[x^2]) - fl32(mu^2)";
  }
  const bool mean_read = o.stats == NormalizationStats::two_pass;
  if ((mean_read && o.mean.accumulator == AccumulatorPrecision::bf16) ||
      o.variance.accumulator == AccumulatorPrecision::bf16) {
    return name + " sums in a bf16 accumulator: its partial sums round to 8 bits";
  }
  return {};
}
}  // namespace

std::string exact_rows_difference(const NormalizationOrder& a, const NormalizationOrder& b) {
  if (a == b) return {};
  if (std::string why = TwoPassExclusion(a); !why.empty()) return why;
  if (std::string why = TwoPassExclusion(b); !why.empty()) return why;
  for (const NormalizationOrder* o : {&a, &b}) {  // conservative: which lengths run what is not compared
    if (!o->short_rows.empty()) return format_declared_normalization_order(*o) + " selects its order by row length";
  }
  if (a.output != b.output || a.output_contraction != b.output_contraction) {
    return "the outputs are formed differently: " + std::string(to_string(a.output)) + ":" +
           std::string(to_string(a.output_contraction)) + " against " + std::string(to_string(b.output)) + ":" +
           std::string(to_string(b.output_contraction));
  }
  return {};
}

std::string normalization_bound_uncovered(const NormalizationOrder& order) { return TwoPassExclusion(order); }

NormalizationOrder parse_declared_normalization_order(std::string_view text, std::string_view field) {
  if (text.find_first_of("/;") == std::string_view::npos) return named_normalization_order(text, field);
  std::string plain(text);
  for (char& ch : plain) ch = ch == '/' ? ';' : ch;
  return parse_normalization_order(plain, field);
}

}  // namespace fusediff
