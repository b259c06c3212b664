// A deconvolution's weights in a buffer fusediff owns, with a known tail (onednn_patterns.h DeconvolutionWeights).
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "fusediff/fused/onednn_defects.h"
#include "onednn_patterns.h"

namespace fusediff::fused::onednn::detail {

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

// The layouts oneDNN 2.6.3's int8 deconvolutions ask for (jit_deconvolution avx512, jit_uni_deconv avx2 / sse41,
// the 1x1 kernels) in which the kernel's rows can be extended by building the same tag with more rows.
constexpr Tag kBlockedTags[] = {Tag::OIhw4i16o4i, Tag::OIhw2i8o4i, Tag::OIhw4o4i, Tag::OIhw16i16o4i};

// The first `align`-aligned byte of a buffer of size + align.
uint8_t* Aligned(std::vector<uint8_t>& storage, size_t align) {
  const auto address = reinterpret_cast<uintptr_t>(storage.data());
  return storage.data() + (align - address % align) % align;
}

// Whether one block of the desc's inner blocking spans all of dims 0 (output channels) and 1 (input channels).
bool OneBlock(const memory::desc& md) {
  const dnnl_memory_desc_t& d = md.data;
  if (d.format_kind != dnnl_blocked) return false;
  int64_t block[2] = {1, 1};
  const dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < b.inner_nblks; ++i) {
    if (b.inner_idxs[i] < 2) block[b.inner_idxs[i]] *= b.inner_blks[i];
  }
  return d.padded_dims[0] == block[0] && d.padded_dims[1] == block[1];
}

// The draw's OHWI weights with `rows` kernel rows: the real ones, then stride_hole_tail_weight.
std::vector<int8_t> ExtendedWeights(const ConvCase& conv, int32_t rows) {
  const int32_t k_count = conv.output_channels(), kh = conv.kernel_height(), kw = conv.kernel_width();
  const int32_t c_count = conv.input_channels();
  std::vector<int8_t> w(static_cast<size_t>(k_count) * rows * kw * c_count);
  for (int32_t k = 0; k < k_count; ++k)
    for (int32_t ky = 0; ky < rows; ++ky)
      for (int32_t kx = 0; kx < kw; ++kx)
        for (int32_t c = 0; c < c_count; ++c) {
          w[((static_cast<size_t>(k) * rows + ky) * kw + kx) * c_count + c] =
              ky < kh ? conv.weights()[conv.weight_index(k, ky, kx, c)] : stride_hole_tail_weight(k, c, ky, kx);
        }
  return w;
}

}  // namespace

ConvPrimitive CreateConvPrimitive(const ConvCase& conv, std::pair<int32_t, int32_t> extension, const memory::desc& src,
                                  const memory::desc& weights_any, const memory::desc& bias, const memory::desc& dst,
                                  const dnnl::primitive_attr& attr, const dnnl::engine& engine) {
  const memory::dims strides = {conv.stride_height(), conv.stride_width()};
  const memory::dims dilates = {conv.dilation_height() - 1, conv.dilation_width() - 1};  // oneDNN counts gaps
  const memory::dims pad_l = {conv.padding_top(), conv.padding_left()};
  const auto made = [](dnnl::primitive primitive, const auto& pd) {
    return ConvPrimitive{std::move(primitive), pd.weights_desc(), pd.scratchpad_desc(), pd.impl_info_str()};
  };
  if (conv.op() == ConvOp::conv2d) {
    const memory::dims pad_r = {conv.padding_bottom(), conv.padding_right()};
    const dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                               src, weights_any, bias, dst, strides, dilates, pad_l, pad_r);
    const dnnl::convolution_forward::primitive_desc pd(desc, attr, engine);
    return made(dnnl::convolution_forward(pd), pd);
  }
  const memory::dims pad_r = {
      conv.padding_bottom() - conv.output_padding_height() + extension.first * conv.stride_height(),
      conv.padding_right() - conv.output_padding_width() + extension.second * conv.stride_width()};
  const dnnl::deconvolution_forward::desc desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::deconvolution_direct,
                                               src, weights_any, bias, dst, strides, dilates, pad_l, pad_r);
  const dnnl::deconvolution_forward::primitive_desc pd(desc, attr, engine);
  return made(dnnl::deconvolution_forward(pd), pd);
}

DeconvolutionWeights OwnDeconvolutionWeights(const ConvCase& conv, const dnnl::memory::desc& weights_md,
                                             const dnnl::engine& engine, dnnl::stream& stream) {
  constexpr size_t kAlign = 64, kSlack = 4096;
  const memory::dim k = conv.output_channels(), c = conv.input_channels(), kw = conv.kernel_width();
  const int32_t kh = conv.kernel_height();
  const int32_t rows = std::max(conv.stride_height(), kh);  // the kernel reads rows kh_lo < stride_height
  const memory::dims dims = {k, c, kh, kw};
  std::optional<Tag> tag;
  for (Tag t : kBlockedTags) {
    if (weights_md == memory::desc(dims, memory::data_type::s8, t)) {
      tag = t;
      break;
    }
  }
  DeconvolutionWeights out;
  out.size = weights_md.get_size();
  if (tag && OneBlock(weights_md)) {
    // The same layout with `rows` kernel rows: with one ic and one oc block, kernel row h starts at h times the
    // row's bytes, so the real rows come first (the first `size` bytes) and rows kh .. rows - 1 follow at the very
    // offsets the kernel reads; the reorder writes 0 at padded-channel places.
    const memory::desc extended_md({k, c, rows, kw}, memory::data_type::s8, *tag);
    out.tail = extended_md.get_size() - out.size + kSlack;
    out.storage.assign(out.size + out.tail + kAlign, 0);
    uint8_t* buffer = Aligned(out.storage, kAlign);
    std::vector<int8_t> extended = ExtendedWeights(conv, rows);
    memory extended_user(memory::desc({k, c, rows, kw}, memory::data_type::s8, Tag::ohwi), engine, extended.data());
    memory extended_mem(extended_md, engine, buffer);
    dnnl::reorder(extended_user, extended_mem).execute(stream, extended_user, extended_mem);
    stream.wait();
    for (size_t t = extended_md.get_size() - out.size; t < out.tail; ++t) {
      buffer[out.size + t] = static_cast<uint8_t>(stride_hole_tail_weight(0, 0, 0, static_cast<int32_t>(t)));
    }
    out.memory = memory(weights_md, engine, buffer);
    out.tail_rows_placed = true;
    return out;
  }
  // Any other layout: the real weights by oneDNN's own reorder, then a tail no model places but that is never 0.
  out.tail = static_cast<size_t>(rows + 1) * static_cast<size_t>(kw) * 256 + kSlack;
  out.storage.assign(out.size + out.tail + kAlign, 0);
  uint8_t* buffer = Aligned(out.storage, kAlign);
  std::vector<int8_t> real = conv.weights();
  memory real_mem(memory::desc(dims, memory::data_type::s8, Tag::ohwi), engine, real.data());
  out.memory = memory(weights_md, engine, buffer);
  dnnl::reorder(real_mem, out.memory).execute(stream, real_mem, out.memory);
  stream.wait();
  for (size_t t = 0; t < out.tail; ++t) {
    buffer[out.size + t] = static_cast<uint8_t>(stride_hole_tail_weight(0, 0, 0, static_cast<int32_t>(t)));
  }
  return out;
}

dnnl::memory WeightsMemory(const ConvCase& conv, bool deconvolution, const dnnl::memory::desc& weights_md,
                           const dnnl::memory& user, const dnnl::engine& engine, dnnl::stream& stream,
                           DeconvolutionWeights* owned) {
  if (deconvolution) {
    *owned = OwnDeconvolutionWeights(conv, weights_md, engine, stream);
    return owned->memory;
  }
  if (weights_md == user.get_desc()) return user;
  memory source = user, reordered(weights_md, engine);  // execute takes non-const handles (shared, not copied)
  dnnl::reorder(source, reordered).execute(stream, source, reordered);
  return reordered;
}

std::vector<uint8_t> SourceBytes(const ConvCase& conv, std::span<const int32_t> input,
                                 std::pair<int32_t, int32_t> extension, bool u8, int32_t shift, int32_t zero_point) {
  const int32_t n = conv.batch(), c = conv.input_channels();
  const int32_t in_h = conv.input_height() + extension.first, in_w = conv.input_width() + extension.second;
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * in_h * in_w * c + kSourceTailBytes);
  size_t i = 0;
  for (int32_t b = 0; b < n; ++b)
    for (int32_t iy = 0; iy < in_h; ++iy)
      for (int32_t ix = 0; ix < in_w; ++ix)
        for (int32_t ch = 0; ch < c; ++ch) {
          const bool inside = iy < conv.input_height() && ix < conv.input_width();
          bytes[i++] = static_cast<uint8_t>(inside ? input[conv.input_index(b, iy, ix, ch)] + shift : zero_point);
        }
  for (size_t t = 0; t < kSourceTailBytes; ++t) bytes[i++] = static_cast<uint8_t>(source_tail_code(t, u8));
  return bytes;
}

}  // namespace fusediff::fused::onednn::detail
