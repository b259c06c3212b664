#include "fusediff/fused/plugin_transport.h"

#include <algorithm>
#include <cstdio>

#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

std::string_view to_string(Threading t) {
  switch (t) {
    case Threading::serial: return "serial";
    case Threading::instance_per_thread: return "instance_per_thread";
    case Threading::shared: return "shared";
  }
  return "?";
}

namespace {
std::string_view WeightsName(WeightRange r) { return r == WeightRange::full ? "full" : "symmetric"; }
}  // namespace

std::string describe(const PluginDeclaration& d) {
  const auto field = [](const auto& v) { return v ? std::string(to_string(*v)) : std::string("graph"); };
  return "requant=" + field(d.requant) + " intermediate=" + field(d.intermediate_kind) + " post_ops=" +
         field(d.post_ops) + " weights=" + std::string(WeightsName(d.limits.weights)) + " threading=" +
         std::string(to_string(d.threading));
}

std::string format_draw_limits(const DrawLimits& l) {
  return "batch:" + std::to_string(l.max_batch) + "/spatial:" + std::to_string(l.max_spatial) + "/channels:" +
         std::to_string(l.max_channels) + "/kernel:" + std::to_string(l.max_kernel) + "/stride:" +
         std::to_string(l.max_stride) + "/dilation:" + std::to_string(l.max_dilation) + "/transposed:" +
         (l.transposed ? "1" : "0") + "/weights:" + std::string(WeightsName(l.weights));
}

Convention DeclaredConvention(const PluginDeclaration& d, const Convention& graph) {
  Convention c = graph;
  if (d.requant) {
    c.requant = *d.requant;
    if (const std::optional<RoundingMode> fixed = fixed_rounding(*d.requant)) c.intermediate.rounding = *fixed;
  }
  if (d.intermediate_kind) c.intermediate.kind = *d.intermediate_kind;
  if (d.post_ops) {
    c.post_ops = *d.post_ops;
    if (*d.post_ops != PostOpArithmetic::exact) c.output.rounding = RoundingMode::half_to_even;
    if (*d.post_ops == PostOpArithmetic::binary32) c.output.zero_point_order = ZeroPointOrder::before_rounding;
    if (*d.post_ops == PostOpArithmetic::binary32_libm) c.output.zero_point_order = ZeroPointOrder::after_rounding;
  }
  return c;
}

PluginAddress ParseAddress(std::string_view path, std::string_view arg, std::string_view field) {
  const std::string where(field);
  if (arg.find_first_of(";'\"") != std::string_view::npos) {
    throw InputError(where + ": '" + std::string(arg) + "' holds ';' or a quote (a replay line cannot carry it)");
  }
  PluginAddress a;
  a.path = std::string(path);
  const size_t comma = arg.find(',');
  a.target = std::string(arg.substr(0, comma));
  if (a.target.empty()) {
    throw InputError(where + ": expected " + a.path + ":TARGET[,key=value...] (e.g. plugin:./libmine.so), got '" +
                     std::string(path) + ":" + std::string(arg) + "'");
  }
  for (size_t begin = comma; begin != std::string_view::npos;) {
    const size_t end = arg.find(',', begin + 1);
    const std::string_view item = arg.substr(begin + 1, end == std::string_view::npos ? end : end - begin - 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw InputError(where + ": option '" + std::string(item) + "' (expected key=value)");
    }
    std::string key(item.substr(0, eq));
    for (const auto& [k, v] : a.options) {
      if (k == key) throw InputError(where + ": option '" + key + "' given twice");
    }
    a.options.emplace_back(std::move(key), std::string(item.substr(eq + 1)));
    begin = end;
  }
  return a;
}

std::string OptionsDigest(const PluginAddress& a) {
  std::vector<std::pair<std::string, std::string>> sorted = a.options;
  std::sort(sorted.begin(), sorted.end());
  uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a 64
  for (const auto& [key, value] : sorted) {
    for (unsigned char ch : key + "=" + value + "\n") {
      hash ^= ch;
      hash *= 0x100000001b3ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

}  // namespace fusediff::fused::plugin
