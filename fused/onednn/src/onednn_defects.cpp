#include "fusediff/fused/onednn_defects.h"

#include <algorithm>

#include "fusediff/fused/onednn_kernel.h"
#include "fusediff/model/formulation.h"

namespace fusediff::fused::onednn {

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

int32_t source_tail_code(size_t position, bool u8) {
  const int32_t byte = static_cast<int32_t>((37 + 11 * position) % 256);  // every byte value in turn
  return u8 ? byte : byte - 128;
}

namespace {
// jit_uni_deconv's unrolled width ur_w and tail for a row of ow columns (init_conf), or 0 where it finds none.
struct UniBlocking {
  int32_t ur_w = 0, tail = 0;
};
UniBlocking JitUniDeconvBlocking(const ConvCase& conv, int32_t registers, int32_t block) {
  const int32_t s = conv.stride_width(), ext = (conv.kernel_width() - 1) * conv.dilation_width();
  const int32_t l_pad = conv.padding_left(), r_pad = conv.padding_right() - conv.output_padding_width();
  const int32_t ow = conv.output_width(), nb_oc = (conv.output_channels() + block - 1) / block;
  int32_t blocking = std::min(4, nb_oc);
  for (; blocking > 1; --blocking) {
    if (nb_oc % blocking == 0 && l_pad <= registers / (blocking + 1)) break;
  }
  UniBlocking b{registers / (blocking + 1), 0};
  if (ow < b.ur_w) return {ow, 0};
  const int32_t l_overflow = std::max(0, (ext - l_pad) / s);
  for (; b.ur_w >= 1; --b.ur_w) {
    b.tail = ow % b.ur_w;
    const int32_t r_overflow_no_tail = std::max(0, (ext - std::max(0, r_pad) - b.tail) / s);
    if (b.ur_w % s == 0 && b.ur_w >= l_overflow * s && b.ur_w >= r_overflow_no_tail * s) return b;
  }
  return {};
}
}  // namespace

std::vector<int32_t> jit_uni_deconv_column_reads(const ConvCase& conv, int32_t registers, int32_t block,
                                                 bool signed_or_zero_point) {
  const UniBlocking blocking = JitUniDeconvBlocking(conv, registers, block);
  if (blocking.ur_w == 0) return {};
  const int32_t s = conv.stride_width(), d = conv.dilation_width(), kw = conv.kernel_width();
  const int32_t ext = (kw - 1) * d, l_pad = conv.padding_left();
  const int32_t r_pad = conv.padding_right() - conv.output_padding_width(), ow = conv.output_width();
  const int32_t ur_w = blocking.ur_w, tail = blocking.tail;
  // generate(): the register blocks along the row, each with its l_overflow and r_overflow.
  const int32_t l_overflow = std::max(0, (ext - l_pad) / s);
  const int32_t r_overflow = std::max(0, (ext - std::max(0, r_pad)) / s);
  const int32_t r_overflow1 = std::max(0, (ext - std::max(0, r_pad) - tail) / s);
  int32_t nur_w = ow / ur_w - (r_overflow1 > 0 ? 1 : 0);
  struct Block { int32_t width, l_overflow, r_overflow; };
  std::vector<Block> blocks;
  if (ur_w == ow) {
    blocks = {{ur_w, l_overflow, r_overflow}};
  } else if (nur_w == 0) {
    blocks = {{ur_w, l_overflow, r_overflow1}};
    if (tail != 0) blocks.push_back({tail, 0, r_overflow});
  } else {
    int32_t done = 0;
    if (l_overflow > 0) blocks.push_back({ur_w, l_overflow, 0}), ++done;
    if ((l_overflow <= 0 && nur_w > 0) || (l_overflow > 0 && nur_w > 1)) {
      do blocks.push_back({ur_w, 0, 0}); while (++done < nur_w);  // the kernel's do-while loop
    }
    if (r_overflow1 > 0) blocks.push_back({ur_w, 0, r_overflow1});
    if (tail != 0) blocks.push_back({tail, 0, r_overflow});
  }
  // compute_ker(): tap ki of block column jj is computed when get_ow_start <= jj < get_ow_end and
  // (jj + l_pad - ki) % s == 0 (the kernel's test, ki undilated); without a signed source or a zero point the loop
  // steps by s from get_ow_start. Block origins are multiples of s, so jj's residues are ox's.
  // The kernel's `while (res < 0) res += stride`: raised into [0, s) when negative, left as it is otherwise.
  const auto raised = [s](int32_t v) { return v >= 0 ? v : v + (-v + s - 1) / s * s; };
  std::vector<int32_t> reads(static_cast<size_t>(ow) * kw, -1);
  int32_t origin = 0;
  for (const Block& b : blocks) {
    const int32_t width = b.width == ow || b.width == tail ? b.width + std::min(0, r_pad) : b.width;
    for (int32_t ki = 0; ki < kw; ++ki) {
      const int32_t start = raised((ow - 1 + r_pad) % s + b.l_overflow * s - (kw - 1 - ki) * d);
      const int32_t end = width - raised((width - 1 + l_pad) % s + b.r_overflow * s - ki * d);
      for (int32_t jj = start; jj < end && origin + jj < ow; ++jj) {
        if ((jj + l_pad - ki) % s != 0 || (!signed_or_zero_point && (jj - start) % s != 0)) continue;
        const int32_t ox = origin + jj;
        reads[static_cast<size_t>(ox) * kw + ki] = (ox + l_pad - ki * d) / s;
      }
    }
    origin += b.width;
  }
  return reads;
}

bool is_stride_hole_row(const ConvCase& conv, int32_t oy) {
  const int32_t s = conv.stride_height();
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int32_t at = oy + conv.padding_top() - ky * conv.dilation_height();
    if (at >= 0 && at % s == 0 && at / s < conv.input_height()) return false;
  }
  return true;
}

bool is_empty_kernel_range_row(const ConvCase& conv, int32_t oy) {
  for (int32_t ky = 0; ky < conv.kernel_height(); ++ky) {
    const int64_t iy = int64_t{oy} * conv.stride_height() - conv.padding_top() + int64_t{ky} * conv.dilation_height();
    if (iy >= 0 && iy < conv.input_height()) return false;
  }
  return true;
}

namespace {
bool SingleBlockOutputPadding(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call) {
  if (conv.op() != ConvOp::conv_transpose2d || call.extended_input) return false;
  const int32_t s = conv.stride_width();
  const int32_t negative_pad = conv.output_padding_width() - conv.padding_right();  // -r_pad
  if (negative_pad <= 0) return false;
  const int32_t ext = (conv.kernel_width() - 1) * conv.dilation_width();
  if (ext % s + negative_pad < s) return false;
  return jit_deconv_block_width(d.registers, conv) == conv.output_width();
}

bool StrideHole(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call) {
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

bool UniDeconvColumnsDiffer(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes& call) {
  if (conv.op() != ConvOp::conv_transpose2d) return false;
  ConvCase passed = conv;
  extend_for_output_padding(&passed, nullptr, output_padding_extension(conv, call.extended_input));
  const bool signed_or_zero_point = call.source_zero_point_attribute ||
                                    call.source_type.value_or(conv.input_quant().type.scalar) == ScalarType::int8;
  const std::vector<int32_t> reads = jit_uni_deconv_column_reads(passed, d.registers, d.block, signed_or_zero_point);
  for (int32_t ox = 0; ox < passed.output_width() && !reads.empty(); ++ox) {
    for (int32_t kx = 0; kx < passed.kernel_width(); ++kx) {
      if (reads[static_cast<size_t>(ox) * passed.kernel_width() + kx] != passed.source_column(ox, kx)) return true;
    }
  }
  return false;
}

bool EmptyKernelRange(const KnownDefect&, const ConvCase& conv, const DefectCallAttributes&) {
  if (conv.op() != ConvOp::conv2d) return false;
  for (int32_t oy = 0; oy < conv.output_height(); ++oy) {
    if (is_empty_kernel_range_row(conv, oy)) return true;
  }
  return false;
}

// The strided int8 1x1 convolution that copies its source into per-thread workspaces (oneDNN v2.6.3
// jit_uni_1x1_conv_utils.hpp rtus_prepare, lines 57-69: 1x1, a stride, no padding, every output dimension times its
// stride the input's) with a channel count the copy's `block` bytes do not divide: its unmasked tail store writes past
// each thread's workspace (docs/onednn.md, "The strided int8 1x1 convolution races below AVX-512"). Only where
// oneDNN runs on two or more threads: one thread has no next workspace to write into.
bool RtusInt8Tail(const KnownDefect& d, const ConvCase& conv, const DefectCallAttributes&) {
  if (OneDnnMaxThreads() < 2) return false;
  if (conv.op() != ConvOp::conv2d || conv.kernel_height() != 1 || conv.kernel_width() != 1) return false;
  if (conv.stride_height() == 1 && conv.stride_width() == 1) return false;
  if (conv.padding_top() != 0 || conv.padding_left() != 0 || conv.padding_bottom() != 0 || conv.padding_right() != 0) {
    return false;
  }
  if (conv.output_height() * conv.stride_height() != conv.input_height() ||
      conv.output_width() * conv.stride_width() != conv.input_width()) {
    return false;
  }
  return conv.input_channels() % d.block != 0;
}

// The draw as the library saw it (extended input, the source tail it reads past the input), then the kernel's column
// schedule.
void UniDeconvColumns(const KnownDefect& d, ConvCase* conv, std::vector<int32_t>* input, const DefectCallAttributes& call) {
  extend_for_output_padding(conv, input, output_padding_extension(*conv, call.extended_input));
  const bool drawn_u8 = conv->input_quant().type.scalar == ScalarType::uint8;
  const bool passed_u8 = call.source_type.value_or(conv->input_quant().type.scalar) == ScalarType::uint8;
  const bool signed_or_zero_point = call.source_zero_point_attribute || !passed_u8;
  const int32_t shift = passed_u8 == drawn_u8 ? 0 : (passed_u8 ? 128 : -128);  // passed = drawn + shift
  for (size_t i = 0; i < kSourceTailBytes; ++i) input->push_back(source_tail_code(i, passed_u8) - shift);
  conv->column_reads(jit_uni_deconv_column_reads(*conv, d.registers, d.block, signed_or_zero_point));
}

void StrideHoleTailRows(const KnownDefect&, ConvCase* conv, std::vector<int32_t>*, const DefectCallAttributes&) {
  const int32_t kh = conv->kernel_height(), rows = conv->stride_height();
  if (rows <= kh) return;  // no row without a kernel row: nothing to model
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
}
}  // namespace

std::vector<DefectRuleKind> DefectRules() {
  return {{"jit_deconv_single_block_output_padding", {"registers"}, false, SingleBlockOutputPadding},
          {"jit_deconv_stride_hole", {"block"}, false, StrideHole},
          {"jit_uni_deconv_columns", {"registers", "block"}, false, UniDeconvColumnsDiffer},
          {"brgconv_empty_kernel_range", {}, true, EmptyKernelRange},
          {"rtus_int8_tail", {"block"}, false, RtusInt8Tail}};
}

std::vector<DefectModelKind> DefectModels() {
  return {{"stride_hole_tail_rows", StrideHoleTailRows}, {"jit_uni_deconv_columns", UniDeconvColumns}};
}

}  // namespace fusediff::fused::onednn
