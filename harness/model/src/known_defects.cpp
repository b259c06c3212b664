#include "fusediff/model/known_defects.h"

#include <algorithm>
#include <cctype>

namespace fusediff {

std::string_view to_string(DefectRule r) {
  switch (r) {
    case DefectRule::jit_deconv_single_block_output_padding: return "jit_deconv_single_block_output_padding";
    case DefectRule::jit_deconv_stride_hole_rows: return "jit_deconv_stride_hole_rows";
  }
  return "?";
}
bool parse_defect_rule(std::string_view text, DefectRule* out) {
  for (DefectRule r : {DefectRule::jit_deconv_single_block_output_padding, DefectRule::jit_deconv_stride_hole_rows}) {
    if (text == to_string(r)) {
      *out = r;
      return true;
    }
  }
  return false;
}

std::string_view to_string(DefectModel m) {
  switch (m) {
    case DefectModel::drop_last_input_column: return "drop_last_input_column";
    case DefectModel::read_past_weights_in_hole_rows: return "read_past_weights_in_hole_rows";
  }
  return "?";
}
bool parse_defect_model(std::string_view text, DefectModel* out) {
  for (DefectModel m : {DefectModel::drop_last_input_column, DefectModel::read_past_weights_in_hole_rows}) {
    if (text == to_string(m)) {
      *out = m;
      return true;
    }
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
    case DefectRule::jit_deconv_stride_hole_rows: {
      if (conv.op() != ConvOp::conv_transpose2d) return false;
      // The source type oneDNN sees, and its zero point there (Formulation::source moves a code by 128).
      const bool drawn_u8 = conv.input_quant().type.scalar == ScalarType::uint8;
      const bool passed_u8 = formulation.source == Formulation::Source::drawn ? drawn_u8
                                                                               : formulation.source == Formulation::Source::u8;
      const int32_t shift = passed_u8 == drawn_u8 ? 0 : passed_u8 ? 128 : -128;
      if (!passed_u8 || !formulation.zero_points_absent || conv.input_quant().zero_point + shift != 0) return false;
      const int32_t kh = conv.kernel_height(), s = conv.stride_height();
      if (s <= kh || conv.dilation_height() != 1) return false;
      // oneDNN's bottom padding: the output padding taken from it, and the extended input's rows added back.
      const int32_t opad = conv.output_padding_height(), pad_b = conv.padding_bottom();
      const int32_t extend = formulation.extended_input && opad > pad_b ? (opad - pad_b + s - 1) / s : 0;
      const int32_t b_pad = pad_b - opad + extend * s, t_pad = conv.padding_top();
      return b_pad >= 0 && std::max(t_pad, b_pad) <= kh - 1;
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
    case DefectModel::read_past_weights_in_hole_rows: break;  // model_conv changes the weights, not the input
  }
  return changed;
}

int8_t weight_tail_byte(uint32_t repetition) { return static_cast<int8_t>(repetition & 0x3f); }

bool model_per_repetition(const KnownDefect& d) { return d.model == DefectModel::read_past_weights_in_hole_rows; }

ConvCase model_conv(const KnownDefect& d, const ConvCase& conv, uint32_t repetition) {
  if (d.model != DefectModel::read_past_weights_in_hole_rows) return conv;
  const int32_t kh = conv.kernel_height(), rows = std::max(kh, conv.stride_height());
  const int32_t kw = conv.kernel_width(), c = conv.input_channels();
  const int32_t tail = weight_tail_byte(repetition);
  // The kernel reads the source in groups of 4 channels: whole groups, then (c > 4, c mod 4 != 0) the last 4
  // channels again as the tail group, or (c < 4) the c channels alone. Against a row of equal weights, channel i
  // counts as often as the groups hold it (1 or 2; measured: docs/onednn.md).
  std::vector<int32_t> times(static_cast<size_t>(c), 0);
  for (int32_t g = 0; g * 4 < c; ++g) {
    const int32_t first = g * 4 + 4 <= c ? g * 4 : std::max(0, c - 4);
    for (int32_t i = first; i < std::min(c, first + 4); ++i) ++times[static_cast<size_t>(i)];
  }
  // OHWI with kernel rows kh..rows-1 of the tail byte (times the channel's count); the bottom padding grows by as
  // many rows, so the output keeps its height ((in - 1) s - pads + (kernel - 1) + output_padding + 1, dilation 1).
  std::vector<int8_t> weights(static_cast<size_t>(conv.output_channels()) * rows * kw * c, 0);
  for (size_t i = 0; i < weights.size(); ++i) {
    weights[i] = static_cast<int8_t>(tail * times[i % static_cast<size_t>(c)]);  // |tail| <= 63: fits
  }
  for (int32_t k = 0; k < conv.output_channels(); ++k) {
    for (int32_t y = 0; y < kh; ++y) {
      for (int32_t x = 0; x < kw; ++x) {
        for (int32_t i = 0; i < c; ++i) {
          weights[((static_cast<size_t>(k) * rows + y) * kw + x) * c + i] =
              conv.weights()[((static_cast<size_t>(k) * kh + y) * kw + x) * c + i];
        }
      }
    }
  }
  ConvCase changed = conv;
  changed.kernel_size(rows, kw).padding(conv.padding_top(), conv.padding_left(), conv.padding_bottom() + rows - kh,
                                        conv.padding_right());
  changed.weights(std::move(weights));
  return changed;
}

}  // namespace fusediff
