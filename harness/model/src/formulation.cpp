#include "fusediff/model/formulation.h"

#include "fusediff/model/errors.h"
#include "named_enum.h"

namespace fusediff {

namespace {
constexpr detail::Names<Formulation::Source, 3> kSources{
    {{"drawn", Formulation::Source::drawn}, {"u8", Formulation::Source::u8}, {"s8", Formulation::Source::s8}}};
}  // namespace

std::string format_formulation(const Formulation& f, bool with_output_padding) {
  std::string out = std::string("zp:") + (f.zero_points_absent ? "absent" : "present");
  out += std::string("/scales:") + (f.common_scales ? "common" : "per_channel");
  if (with_output_padding) out += std::string("/opad:") + (f.extended_input ? "extended_input" : "negative_pad");
  out += "/src:" + std::string(detail::NameOf(f.source, kSources));
  out += std::string("/wei:") + (f.seven_bit_weights ? "7bit" : "full");
  out += std::string("/bias:") + (f.f32_bias ? "f32" : "s32");
  return out;
}

std::vector<std::string> formulation_items(std::string_view formatted) {
  std::vector<std::string> items;
  for (size_t begin = 0; begin < formatted.size();) {
    const size_t end = formatted.find('/', begin);
    items.emplace_back(formatted.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
    if (end == std::string_view::npos) break;
    begin = end + 1;
  }
  return items;
}

Formulation parse_formulation(std::string_view text, std::string_view field) {
  Formulation f;
  const auto bad = [&](const std::string& item, const char* expected) {
    return InputError(std::string(field) + ": '" + item + "' (expected " + expected + ")");
  };
  std::vector<std::string> seen;
  for (const std::string& item : formulation_items(text)) {
    const size_t colon = item.find(':');
    if (colon == std::string::npos) throw bad(item, "DIMENSION:VALUE, e.g. zp:absent");
    const std::string dim = item.substr(0, colon), value = item.substr(colon + 1);
    for (const std::string& s : seen) {
      if (s == dim) throw InputError(std::string(field) + ": dimension '" + dim + "' appears twice");
    }
    seen.push_back(dim);
    if (dim == "zp") {
      if (value != "absent" && value != "present") throw bad(item, "zp:absent or zp:present");
      f.zero_points_absent = value == "absent";
    } else if (dim == "scales") {
      if (value != "common" && value != "per_channel") throw bad(item, "scales:common or scales:per_channel");
      f.common_scales = value == "common";
    } else if (dim == "opad") {
      if (value != "extended_input" && value != "negative_pad")
        throw bad(item, "opad:extended_input or opad:negative_pad");
      f.extended_input = value == "extended_input";
    } else if (dim == "src") {
      f.source = detail::ParseNamed(value, std::string(field) + ".src", "source", kSources);
    } else if (dim == "wei") {
      if (value != "7bit" && value != "full") throw bad(item, "wei:7bit or wei:full");
      f.seven_bit_weights = value == "7bit";
    } else if (dim == "bias") {
      if (value != "f32" && value != "s32") throw bad(item, "bias:f32 or bias:s32");
      f.f32_bias = value == "f32";
    } else {
      throw bad(item, "a dimension zp, scales, opad, src, wei or bias");
    }
  }
  return f;
}

SourceAsPassed source_as_passed(const Formulation& f, bool drawn_u8, int32_t drawn_zero_point) {
  SourceAsPassed out;
  out.u8 = f.source == Formulation::Source::drawn ? drawn_u8 : f.source == Formulation::Source::u8;
  out.shift = out.u8 == drawn_u8 ? 0 : out.u8 ? 128 : -128;
  out.zero_point_attribute = !(f.zero_points_absent && drawn_zero_point + out.shift == 0);
  return out;
}

std::pair<int32_t, int32_t> output_padding_extension(const ConvCase& conv, bool extended_input) {
  const auto extension = [&](int32_t opad, int32_t pad_end, int32_t stride) {
    if (conv.op() != ConvOp::conv_transpose2d || !extended_input || opad <= pad_end) return 0;
    return (opad - pad_end + stride - 1) / stride;
  };
  return {extension(conv.output_padding_height(), conv.padding_bottom(), conv.stride_height()),
          extension(conv.output_padding_width(), conv.padding_right(), conv.stride_width())};
}

void extend_for_output_padding(ConvCase* conv, std::vector<int32_t>* input, std::pair<int32_t, int32_t> extension) {
  const auto [eh, ew] = extension;
  if (eh == 0 && ew == 0) return;
  const int32_t h = conv->input_height(), w = conv->input_width(), c = conv->input_channels();
  if (input) {
    std::vector<int32_t> extended(static_cast<size_t>(conv->batch()) * (h + eh) * (w + ew) * c,
                                  conv->input_quant().zero_point);
    for (int32_t n = 0; n < conv->batch(); ++n)
      for (int32_t y = 0; y < h; ++y)
        for (int32_t x = 0; x < w; ++x)
          for (int32_t ch = 0; ch < c; ++ch) {
            extended[((static_cast<size_t>(n) * (h + eh) + y) * (w + ew) + x) * c + ch] =
                (*input)[conv->input_index(n, y, x, ch)];
          }
    *input = std::move(extended);
  }
  const int32_t bottom = eh == 0 ? conv->padding_bottom()
                                 : conv->padding_bottom() - conv->output_padding_height() + eh * conv->stride_height();
  const int32_t right = ew == 0 ? conv->padding_right()
                                : conv->padding_right() - conv->output_padding_width() + ew * conv->stride_width();
  conv->input_size(h + eh, w + ew)
      .padding(conv->padding_top(), conv->padding_left(), bottom, right)
      .output_padding(eh == 0 ? conv->output_padding_height() : 0, ew == 0 ? conv->output_padding_width() : 0);
}

}  // namespace fusediff
