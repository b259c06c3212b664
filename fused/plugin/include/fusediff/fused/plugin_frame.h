#pragma once
// The subprocess protocol's frame (docs/plugins.md, "Subprocess protocol"): one message on a byte stream.
//
//   offset 0   4 bytes  magic "FDF1"
//   offset 4   4 bytes  H, the JSON header's length in bytes, uint32 little-endian (H + 8 is a multiple of 8)
//   offset 8   H bytes  the header: one UTF-8 JSON object, padded with spaces; "type" names the message, and
//                       "arrays": [{"name", "dtype", "shape", "offset", "bytes"}...], "payload_bytes": P
//   offset 8+H P bytes  the payload: each array's raw little-endian elements at its offset (a multiple of 8)
//
// dtype is numpy's spelling ("<i4", "|u1", "<f4", ...), so numpy.frombuffer(payload, dtype, count, offset) reads an
// array where it lies, without a copy. Decoding checks every length against the bytes there are and the limits
// below; a bad frame is a FrameError naming what is wrong, never a crash or an unbounded allocation.
#include <bit>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fusediff::fused::plugin {

static_assert(std::endian::native == std::endian::little, "the protocol's arrays are little-endian, as the host's");

inline constexpr char kFrameMagic[4] = {'F', 'D', 'F', '1'};
inline constexpr size_t kFramePrefixBytes = 8;
inline constexpr size_t kMaxFrameHeaderBytes = size_t{16} << 20;   // 16 MiB of JSON
inline constexpr size_t kMaxFramePayloadBytes = size_t{256} << 20;  // 256 MiB of arrays

// A frame that cannot be decoded (bad magic, a length past a limit, a truncated stream, an array outside the
// payload, a dtype that is not one of Dtype's): what, where.
class FrameError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The element types a frame carries, by numpy's name.
enum class Dtype { i8, u8, i16, u16, i32, i64, f32, f64 };
std::string_view numpy_name(Dtype d);  // "|i1", "|u1", "<i2", "<u2", "<i4", "<i8", "<f4", "<f8"
size_t element_bytes(Dtype d);
template <typename T>
constexpr Dtype dtype_of();
template <> constexpr Dtype dtype_of<int8_t>() { return Dtype::i8; }
template <> constexpr Dtype dtype_of<uint8_t>() { return Dtype::u8; }
template <> constexpr Dtype dtype_of<int16_t>() { return Dtype::i16; }
template <> constexpr Dtype dtype_of<uint16_t>() { return Dtype::u16; }
template <> constexpr Dtype dtype_of<int32_t>() { return Dtype::i32; }
template <> constexpr Dtype dtype_of<int64_t>() { return Dtype::i64; }
template <> constexpr Dtype dtype_of<float>() { return Dtype::f32; }
template <> constexpr Dtype dtype_of<double>() { return Dtype::f64; }

struct FrameArray {
  std::string name;
  Dtype dtype = Dtype::i32;
  std::vector<int64_t> shape;
  size_t offset = 0;  // within the payload
  size_t bytes = 0;
};

// One message: its JSON fields (without "arrays" and "payload_bytes", which encoding writes) and its arrays.
class Frame {
 public:
  Frame() = default;
  explicit Frame(std::string type) { header["type"] = std::move(type); }
  std::string type() const;  // header["type"], or "" when absent or not a string

  // Appends an array (copied into the payload, aligned to 8 bytes). shape's product must equal data.size().
  template <typename T>
  void add(std::string name, std::span<const T> data, std::vector<int64_t> shape) {
    add_bytes(std::move(name), dtype_of<T>(), std::as_bytes(data), std::move(shape));
  }
  template <typename T>
  void add(std::string name, const std::vector<T>& data) {
    add<T>(std::move(name), std::span<const T>(data), {static_cast<int64_t>(data.size())});
  }
  // The array `name` as T: throws FrameError when absent or of another dtype.
  template <typename T>
  std::span<const T> get(std::string_view name) const {
    const FrameArray& a = array(name, dtype_of<T>());
    return {reinterpret_cast<const T*>(payload_.data() + a.offset), a.bytes / sizeof(T)};
  }
  const FrameArray* find(std::string_view name) const;
  const std::vector<FrameArray>& arrays() const { return arrays_; }
  const std::vector<std::byte>& payload() const { return payload_; }

  nlohmann::json header = nlohmann::json::object();

  // The whole frame's bytes (prefix, padded header, payload).
  std::vector<std::byte> Encode() const;
  // Decodes one whole frame; FrameError when `bytes` is not exactly one valid frame.
  static Frame Decode(std::span<const std::byte> bytes);
  // Reads one frame through `read(buffer, n)`, which fills up to n bytes and returns how many (0: end of stream;
  // it throws for a timeout). Returns false on a clean end of stream before the frame's first byte; FrameError on
  // an end of stream inside a frame or a bad frame.
  using ReadSome = std::function<size_t(std::byte*, size_t)>;
  static bool Read(const ReadSome& read, Frame* frame);

 private:
  void add_bytes(std::string name, Dtype dtype, std::span<const std::byte> data, std::vector<int64_t> shape);
  const FrameArray& array(std::string_view name, Dtype dtype) const;
  // Parses the prefix and header; the payload's size comes back in *payload_bytes.
  static Frame FromHeader(std::span<const std::byte> header, size_t* payload_bytes);
  void CheckArrays() const;

  std::vector<FrameArray> arrays_;
  std::unordered_map<std::string, size_t> index_;  // name -> arrays_ index: a batch has thousands of arrays
  std::vector<std::byte> payload_;
};

// The header length in a frame's 8-byte prefix; FrameError for a bad magic or a length past the limit.
size_t frame_header_bytes(std::span<const std::byte, kFramePrefixBytes> prefix);

}  // namespace fusediff::fused::plugin
