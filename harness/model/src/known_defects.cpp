#include "fusediff/model/known_defects.h"

#include <algorithm>
#include <cctype>

namespace fusediff {

std::string_view to_string(DefectRule r) {
  switch (r) {
    case DefectRule::jit_deconv_single_block_output_padding: return "jit_deconv_single_block_output_padding";
  }
  return "?";
}
bool parse_defect_rule(std::string_view text, DefectRule* out) {
  if (text == to_string(DefectRule::jit_deconv_single_block_output_padding)) {
    *out = DefectRule::jit_deconv_single_block_output_padding;
    return true;
  }
  return false;
}

std::string_view to_string(DefectModel m) {
  switch (m) {
    case DefectModel::drop_last_input_column: return "drop_last_input_column";
  }
  return "?";
}
bool parse_defect_model(std::string_view text, DefectModel* out) {
  if (text == to_string(DefectModel::drop_last_input_column)) {
    *out = DefectModel::drop_last_input_column;
    return true;
  }
  return false;
}

bool glob_match(std::string_view pattern, std::string_view text) {
  // Iterative wildcard match with one backtrack point (the last '*').
  size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

namespace {
// The leading dotted numbers of a version string; empty when it does not start with a digit.
std::vector<uint64_t> VersionNumbers(std::string_view v) {
  std::vector<uint64_t> numbers;
  size_t i = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) {
    uint64_t n = 0;
    while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i])) && n < (uint64_t{1} << 40)) {
      n = n * 10 + static_cast<uint64_t>(v[i++] - '0');
    }
    numbers.push_back(n);
    if (i + 1 < v.size() && v[i] == '.' && std::isdigit(static_cast<unsigned char>(v[i + 1]))) ++i;
    else break;
  }
  return numbers;
}
// Lexicographic with missing components as 0 (2.6 == 2.6.0).
int CompareVersions(std::vector<uint64_t> a, std::vector<uint64_t> b) {
  const size_t n = std::max(a.size(), b.size());
  a.resize(n, 0);
  b.resize(n, 0);
  return a < b ? -1 : (a == b ? 0 : 1);
}
}  // namespace

bool version_in_range(std::string_view version, std::string_view min, std::string_view max) {
  const std::vector<uint64_t> v = VersionNumbers(version);
  if (v.empty()) return false;
  return CompareVersions(v, VersionNumbers(min)) >= 0 && CompareVersions(v, VersionNumbers(max)) <= 0;
}

bool defect_applies(const KnownDefect& d, std::string_view library, std::string_view version,
                    std::string_view implementation) {
  if (library != d.library || !version_in_range(version, d.version_min, d.version_max)) return false;
  return std::any_of(d.implementations.begin(), d.implementations.end(),
                     [&](const std::string& pattern) { return glob_match(pattern, implementation); });
}

int32_t jit_deconv_block_width(int32_t registers, const ConvCase& conv) {
  // init_conf of jit_avx512_core_x8s8s32x_deconv_fwd_kernel (oneDNN 2.6.3), for ngroups == 1: output channels in
  // blocks of 16, up to 4 blocks unrolled when they divide the count and the left padding fits; the unrolled width
  // ur_w = registers / (blocks + 1), or the output width when narrower; else the widest ur_w <= that which is a
  // multiple of the stride and covers both boundary overflows in one call.
  const int32_t s = conv.stride_width();
  const int32_t ext = (conv.kernel_width() - 1) * conv.dilation_width();  // (kw - 1) * (dilate_w + 1)
  const int32_t l_pad = conv.padding_left();
  const int32_t r_pad = conv.padding_right() - conv.output_padding_width();
  const int32_t ow = conv.output_width();
  const int32_t nb_oc = (conv.output_channels() + 15) / 16;
  int32_t blocking = std::min(4, nb_oc);
  for (; blocking > 1; --blocking) {
    if (nb_oc % blocking == 0 && l_pad <= registers / (blocking + 1)) break;
  }
  int32_t ur_w = registers / (blocking + 1);
  const int32_t l_overflow = std::max(0, (ext - l_pad) / s);
  if (ow < ur_w) return ow;
  for (; ur_w >= 1; --ur_w) {
    const int32_t tail = ow % ur_w;
    const int32_t r_overflow_no_tail = std::max(0, (ext - std::max(0, r_pad) - tail) / s);
    if (ur_w % s == 0 && ur_w >= l_overflow * s && ur_w >= r_overflow_no_tail * s) return ur_w;
  }
  return 0;
}

bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const Formulation& formulation) {
  switch (d.rule) {
    case DefectRule::jit_deconv_single_block_output_padding: {
      if (conv.op() != ConvOp::conv_transpose2d || formulation.extended_input) return false;
      const int32_t s = conv.stride_width();
      const int32_t negative_pad = conv.output_padding_width() - conv.padding_right();  // -r_pad
      if (negative_pad <= 0) return false;
      const int32_t ext = (conv.kernel_width() - 1) * conv.dilation_width();
      if (ext % s + negative_pad < s) return false;
      return jit_deconv_block_width(d.registers, conv) == conv.output_width();
    }
  }
  return false;
}

bool explained_by_defect(int32_t y_ref, int32_t y_fused, int32_t y_model, int64_t tolerance) {
  const int64_t off_model = int64_t{y_fused} - y_model;
  return y_model != y_ref && y_fused != y_ref && off_model <= tolerance && -off_model <= tolerance;
}

std::vector<int32_t> apply_defect_model(const KnownDefect& d, const ConvCase& conv, const std::vector<int32_t>& input) {
  std::vector<int32_t> changed = input;
  switch (d.model) {
    case DefectModel::drop_last_input_column: {
      const int32_t x = conv.input_width() - 1;
      const int32_t zero_point = conv.input_quant().zero_point;
      for (int32_t n = 0; n < conv.batch(); ++n) {
        for (int32_t y = 0; y < conv.input_height(); ++y) {
          for (int32_t c = 0; c < conv.input_channels(); ++c) changed[conv.input_index(n, y, x, c)] = zero_point;
        }
      }
      break;
    }
  }
  return changed;
}

}  // namespace fusediff
