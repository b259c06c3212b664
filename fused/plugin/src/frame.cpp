#include "fusediff/fused/plugin_frame.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>

namespace fusediff::fused::plugin {

namespace {

constexpr std::array<std::pair<Dtype, std::string_view>, 8> kDtypes{{{Dtype::i8, "|i1"},
                                                                     {Dtype::u8, "|u1"},
                                                                     {Dtype::i16, "<i2"},
                                                                     {Dtype::u16, "<u2"},
                                                                     {Dtype::i32, "<i4"},
                                                                     {Dtype::i64, "<i8"},
                                                                     {Dtype::f32, "<f4"},
                                                                     {Dtype::f64, "<f8"}}};

size_t AlignUp(size_t n) { return (n + 7) / 8 * 8; }

Dtype ParseDtype(const std::string& text, const std::string& where) {
  for (const auto& [d, name] : kDtypes) {
    if (text == name) return d;
  }
  throw FrameError(fmt::format("frame: {}.dtype: '{}' is not one of |i1 |u1 <i2 <u2 <i4 <i8 <f4 <f8", where, text));
}

// A non-negative integer field of the header, or FrameError naming it.
uint64_t Count(const nlohmann::json& j, const char* key, const std::string& where) {
  const auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned()) {
    throw FrameError(fmt::format("frame: {}{}: expected a non-negative integer", where, key));
  }
  return it->get<uint64_t>();
}

}  // namespace

std::string_view numpy_name(Dtype d) {
  for (const auto& [dtype, name] : kDtypes) {
    if (dtype == d) return name;
  }
  return "?";
}

size_t element_bytes(Dtype d) {
  switch (d) {
    case Dtype::i8:
    case Dtype::u8: return 1;
    case Dtype::i16:
    case Dtype::u16: return 2;
    case Dtype::i32:
    case Dtype::f32: return 4;
    case Dtype::i64:
    case Dtype::f64: return 8;
  }
  return 1;
}

std::string Frame::type() const {
  const auto it = header.find("type");
  return it != header.end() && it->is_string() ? it->get<std::string>() : std::string();
}

void Frame::add_bytes(std::string name, Dtype dtype, std::span<const std::byte> data, std::vector<int64_t> shape) {
  uint64_t count = 1;
  for (int64_t d : shape) count *= d < 0 ? 0 : static_cast<uint64_t>(d);
  if (count * element_bytes(dtype) != data.size()) {
    throw std::logic_error("frame: array '" + name + "': its shape does not match its data");
  }
  FrameArray a{std::move(name), dtype, std::move(shape), AlignUp(payload_.size()), data.size()};
  payload_.resize(a.offset + a.bytes);
  if (!data.empty()) std::memcpy(payload_.data() + a.offset, data.data(), data.size());
  index_.emplace(a.name, arrays_.size());
  arrays_.push_back(std::move(a));
}

const FrameArray* Frame::find(std::string_view name) const {
  const auto it = index_.find(std::string(name));
  return it == index_.end() ? nullptr : &arrays_[it->second];
}

const FrameArray& Frame::array(std::string_view name, Dtype dtype) const {
  const FrameArray* a = find(name);
  if (!a) throw FrameError(fmt::format("frame: message '{}' has no array '{}'", type(), name));
  if (a->dtype != dtype) {
    throw FrameError(fmt::format("frame: message '{}': array '{}' is {}, expected {}", type(), name,
                                 numpy_name(a->dtype), numpy_name(dtype)));
  }
  return *a;
}

std::vector<std::byte> Frame::Encode() const {
  nlohmann::json h = header;
  nlohmann::json list = nlohmann::json::array();
  for (const FrameArray& a : arrays_) {
    list.push_back({{"name", a.name},
                    {"dtype", std::string(numpy_name(a.dtype))},
                    {"shape", a.shape},
                    {"offset", a.offset},
                    {"bytes", a.bytes}});
  }
  h["arrays"] = std::move(list);
  h["payload_bytes"] = payload_.size();
  std::string text = h.dump();
  text.resize(AlignUp(kFramePrefixBytes + text.size()) - kFramePrefixBytes, ' ');  // the payload starts aligned
  if (text.size() > kMaxFrameHeaderBytes) throw std::logic_error("frame: header past its limit");
  std::vector<std::byte> out(kFramePrefixBytes + text.size() + payload_.size());
  std::memcpy(out.data(), kFrameMagic, 4);
  const uint32_t length = static_cast<uint32_t>(text.size());
  std::memcpy(out.data() + 4, &length, 4);  // little-endian host (static_assert in the header)
  std::memcpy(out.data() + kFramePrefixBytes, text.data(), text.size());
  if (!payload_.empty()) std::memcpy(out.data() + kFramePrefixBytes + text.size(), payload_.data(), payload_.size());
  return out;
}

size_t frame_header_bytes(std::span<const std::byte, kFramePrefixBytes> prefix) {
  if (std::memcmp(prefix.data(), kFrameMagic, 4) != 0) {
    char shown[4];
    for (size_t i = 0; i < 4; ++i) {
      const auto c = static_cast<unsigned char>(prefix[i]);
      shown[i] = c >= 0x20 && c < 0x7f ? static_cast<char>(c) : '.';
    }
    throw FrameError(fmt::format("frame: bad magic '{}' (expected 'FDF1': is the other side speaking the fusediff "
                                 "plugin protocol, and writing nothing else on its stdout?)",
                                 std::string_view(shown, 4)));
  }
  uint32_t length = 0;
  std::memcpy(&length, prefix.data() + 4, 4);
  if (length > kMaxFrameHeaderBytes) {
    throw FrameError(fmt::format("frame: header length {} past the limit of {} bytes", length, kMaxFrameHeaderBytes));
  }
  return length;
}

Frame Frame::FromHeader(std::span<const std::byte> text, size_t* payload_bytes) {
  nlohmann::json h;
  try {
    h = nlohmann::json::parse(reinterpret_cast<const char*>(text.data()),
                              reinterpret_cast<const char*>(text.data() + text.size()));
  } catch (const nlohmann::json::exception& e) {
    throw FrameError(std::string("frame: header is not JSON: ") + e.what());
  }
  if (!h.is_object()) throw FrameError("frame: header: expected a JSON object");
  Frame frame;
  const uint64_t payload = Count(h, "payload_bytes", "");
  if (payload > kMaxFramePayloadBytes) {
    throw FrameError(fmt::format("frame: payload_bytes {} past the limit of {} bytes", payload, kMaxFramePayloadBytes));
  }
  *payload_bytes = static_cast<size_t>(payload);
  const auto list = h.find("arrays");
  if (list == h.end() || !list->is_array()) throw FrameError("frame: arrays: expected a list");
  for (size_t i = 0; i < list->size(); ++i) {
    const nlohmann::json& a = (*list)[i];
    const std::string where = fmt::format("arrays[{}].", i);
    if (!a.is_object() || !a.contains("name") || !a["name"].is_string()) {
      throw FrameError("frame: " + where + "name: expected a string");
    }
    if (!a.contains("dtype") || !a["dtype"].is_string()) throw FrameError("frame: " + where + "dtype: expected a string");
    FrameArray array;
    array.name = a["name"].get<std::string>();
    array.dtype = ParseDtype(a["dtype"].get<std::string>(), where.substr(0, where.size() - 1));
    array.offset = Count(a, "offset", where);
    array.bytes = Count(a, "bytes", where);
    if (!a.contains("shape") || !a["shape"].is_array()) throw FrameError("frame: " + where + "shape: expected a list");
    uint64_t elements = 1;
    for (const nlohmann::json& d : a["shape"]) {
      if (!d.is_number_unsigned()) throw FrameError("frame: " + where + "shape: expected non-negative integers");
      const uint64_t n = d.get<uint64_t>();
      if (n != 0 && elements > payload / n) elements = payload + 1;  // no overflow: past the payload either way
      else elements *= n;
      array.shape.push_back(static_cast<int64_t>(n));
    }
    if (elements > payload || elements * element_bytes(array.dtype) != array.bytes) {
      throw FrameError(fmt::format("frame: {}bytes: {} is not the shape's {} elements of {}", where, array.bytes,
                                   elements, numpy_name(array.dtype)));
    }
    if (array.offset % 8 != 0 || array.offset > payload || array.bytes > payload - array.offset) {
      throw FrameError(fmt::format("frame: array '{}' at offset {} ({} bytes) lies outside the {}-byte payload or is "
                                   "not 8-byte aligned",
                                   array.name, array.offset, array.bytes, payload));
    }
    frame.index_.emplace(array.name, frame.arrays_.size());
    frame.arrays_.push_back(std::move(array));
  }
  h.erase("arrays");
  h.erase("payload_bytes");
  frame.header = std::move(h);
  return frame;
}

Frame Frame::Decode(std::span<const std::byte> bytes) {
  if (bytes.size() < kFramePrefixBytes) {
    throw FrameError(fmt::format("frame: truncated: {} bytes, the prefix alone is 8", bytes.size()));
  }
  const size_t header = frame_header_bytes(bytes.first<kFramePrefixBytes>());
  if (bytes.size() - kFramePrefixBytes < header) {
    throw FrameError(fmt::format("frame: truncated: the header needs {} bytes, {} there", header,
                                 bytes.size() - kFramePrefixBytes));
  }
  size_t payload = 0;
  Frame frame = FromHeader(bytes.subspan(kFramePrefixBytes, header), &payload);
  const size_t rest = bytes.size() - kFramePrefixBytes - header;
  if (rest != payload) {
    throw FrameError(fmt::format("frame: {}: the payload is {} bytes, {} there", rest < payload ? "truncated" : "trailing bytes",
                                 payload, rest));
  }
  const auto begin = bytes.begin() + static_cast<std::ptrdiff_t>(kFramePrefixBytes + header);
  frame.payload_.assign(begin, bytes.end());
  return frame;
}

bool Frame::Read(const ReadSome& read, Frame* frame) {
  // Fills `out` whole; false when the stream ends before its first byte and `clean_end` allows it.
  const auto fill = [&](std::byte* out, size_t n, const char* what, bool clean_end) {
    size_t got = 0;
    while (got < n) {
      const size_t r = read(out + got, n - got);
      if (r == 0) {
        if (got == 0 && clean_end) return false;
        throw FrameError(fmt::format("frame: truncated: the stream ended after {} of the {}'s {} bytes", got, what, n));
      }
      got += r;
    }
    return true;
  };
  std::array<std::byte, kFramePrefixBytes> prefix;
  if (!fill(prefix.data(), prefix.size(), "prefix", true)) return false;
  std::vector<std::byte> header(frame_header_bytes(prefix));
  fill(header.data(), header.size(), "header", false);
  size_t payload = 0;
  *frame = FromHeader(header, &payload);
  frame->payload_.resize(payload);
  fill(frame->payload_.data(), payload, "payload", false);
  return true;
}

}  // namespace fusediff::fused::plugin
