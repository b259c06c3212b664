#include "fusediff/model/known_defects.h"

#include <algorithm>
#include <cctype>

namespace fusediff {

std::string_view to_string(DefectRule r) {
  switch (r) {
    case DefectRule::jit_deconv_single_block_output_padding: return "jit_deconv_single_block_output_padding";
    case DefectRule::jit_deconv_stride_hole: return "jit_deconv_stride_hole";
  }
  return "?";
}
bool parse_defect_rule(std::string_view text, DefectRule* out) {
  for (DefectRule r : {DefectRule::jit_deconv_single_block_output_padding, DefectRule::jit_deconv_stride_hole}) {
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
    case DefectModel::stride_hole_tail_rows: return "stride_hole_tail_rows";
  }
  return "?";
}
bool parse_defect_model(std::string_view text, DefectModel* out) {
  for (DefectModel m : {DefectModel::drop_last_input_column, DefectModel::stride_hole_tail_rows}) {
    if (text == to_string(m)) {
      *out = m;
      return true;
    }
  }
  return false;
}

int8_t stride_hole_tail_weight(int32_t o, int32_t c, int32_t h, int32_t kx) {
  // A counter-based hash of the position (unsigned arithmetic wraps), then an even magnitude in [2, 62] and a sign.
  uint32_t x = static_cast<uint32_t>(o) * 0x9E3779B1u ^ static_cast<uint32_t>(c) * 0x85EBCA77u ^
               static_cast<uint32_t>(h) * 0xC2B2AE3Du ^ static_cast<uint32_t>(kx) * 0x27D4EB2Fu;
  x ^= x >> 15;
  x *= 0x2C1B3C6Du;
  x ^= x >> 12;
  x *= 0x297A2D39u;
  x ^= x >> 15;
  const int32_t magnitude = 2 * (1 + static_cast<int32_t>(x % 31u));
  return static_cast<int8_t>((x >> 16) & 1u ? -magnitude : magnitude);
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

bool is_stride_hole_row(const ConvCase& conv, int32_t oy) {
  const int32_t s = conv.stride_height();
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int32_t at = oy + conv.padding_top() - ky * conv.dilation_height();
    if (at >= 0 && at % s == 0 && at / s < conv.input_height()) return false;
  }
  return true;
}

bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call) {
  switch (d.rule) {
    case DefectRule::jit_deconv_single_block_output_padding: {
      if (conv.op() != ConvOp::conv_transpose2d || call.extended_input) return false;
      const int32_t s = conv.stride_width();
      const int32_t negative_pad = conv.output_padding_width() - conv.padding_right();  // -r_pad
      if (negative_pad <= 0) return false;
      const int32_t ext = (conv.kernel_width() - 1) * conv.dilation_width();
      if (ext % s + negative_pad < s) return false;
      return jit_deconv_block_width(d.registers, conv) == conv.output_width();
    }
    case DefectRule::jit_deconv_stride_hole: {
      if (conv.op() != ConvOp::conv_transpose2d || call.source_zero_point_attribute) return false;
      // An extended input leaves oneDNN b_pad = kernel_height there, which the jit kernel refuses.
      if (call.extended_input && conv.output_padding_height() > 0) return false;
      if (call.source_type.value_or(conv.input_quant().type.scalar) != ScalarType::uint8) return false;
      const int32_t kh = conv.kernel_height();
      const int32_t t_pad = conv.padding_top();
      const int32_t b_pad = conv.padding_bottom() - conv.output_padding_height();  // oneDNN's (PyTorch's mapping)
      // Where the kernel omits its kh guard: stride_h > kh, no H dilation, both paddings in [0, kh - 1].
      if (conv.stride_height() <= kh || conv.dilation_height() != 1) return false;
      if (t_pad < 0 || b_pad < 0 || kh - 1 < std::max(t_pad, b_pad)) return false;
      if (conv.input_channels() > d.block || conv.output_channels() > d.block) return false;
      for (int32_t oy = 0; oy < conv.output_height(); ++oy) {
        if (is_stride_hole_row(conv, oy)) return true;
      }
      return false;
    }
  }
  return false;
}

DefectCallAttributes call_attributes(const Formulation& formulation, const ConvCase& conv) {
  const SourceAsPassed source = source_as_passed(formulation, conv.input_quant().type.scalar == ScalarType::uint8,
                                                 conv.input_quant().zero_point);
  DefectCallAttributes call;
  call.source_zero_point_attribute = source.zero_point_attribute;
  call.source_type = source.u8 ? ScalarType::uint8 : ScalarType::int8;
  call.extended_input = formulation.extended_input;
  return call;
}

bool draw_meets_rule(const KnownDefect& d, const ConvCase& conv, const Formulation& formulation) {
  return draw_meets_rule(d, conv, call_attributes(formulation, conv));
}

bool explained_by_defect(int32_t y_ref, int32_t y_fused, int32_t y_model, int64_t tolerance) {
  const int64_t off_model = int64_t{y_fused} - y_model;
  return y_model != y_ref && y_fused != y_ref && off_model <= tolerance && -off_model <= tolerance;
}

void apply_defect_model(const KnownDefect& d, ConvCase* conv, std::vector<int32_t>* input) {
  switch (d.model) {
    case DefectModel::drop_last_input_column: {
      const int32_t x = conv->input_width() - 1;
      const int32_t zero_point = conv->input_quant().zero_point;
      for (int32_t n = 0; n < conv->batch(); ++n) {
        for (int32_t y = 0; y < conv->input_height(); ++y) {
          for (int32_t c = 0; c < conv->input_channels(); ++c) (*input)[conv->input_index(n, y, x, c)] = zero_point;
        }
      }
      break;
    }
    case DefectModel::stride_hole_tail_rows: {
      const int32_t kh = conv->kernel_height(), rows = conv->stride_height();
      if (rows <= kh) break;  // no row without a kernel row: nothing to model
      const int32_t k_count = conv->output_channels(), kw = conv->kernel_width(), c_count = conv->input_channels();
      std::vector<int8_t> weights(static_cast<size_t>(k_count) * rows * kw * c_count);  // OHWI, rows kernel rows
      for (int32_t k = 0; k < k_count; ++k)
        for (int32_t ky = 0; ky < rows; ++ky)
          for (int32_t kx = 0; kx < kw; ++kx)
            for (int32_t c = 0; c < c_count; ++c) {
              weights[((static_cast<size_t>(k) * rows + ky) * kw + kx) * c_count + c] =
                  ky < kh ? conv->weights()[conv->weight_index(k, ky, kx, c)] : stride_hole_tail_weight(k, c, ky, kx);
            }
      conv->kernel_size(rows, kw).weights(std::move(weights));
      conv->padding(conv->padding_top(), conv->padding_left(), conv->padding_bottom() + rows - kh, conv->padding_right());
      break;
    }
  }
}

}  // namespace fusediff
