// The protocol's frame codec: a frame round-trips byte for byte, and every malformed stream is a FrameError that
// says what is wrong, never a crash, a hang or an unbounded allocation.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "fusediff/fused/plugin_frame.h"

namespace fusediff::fused::plugin {
namespace {

Frame Sample() {
  Frame f("run");
  f.header["batch"] = 2;
  f.add<int32_t>("input", std::vector<int32_t>{-3, 7, 2147483647});
  f.add<int8_t>("weights", std::vector<int8_t>{-128, 0, 127, 5, 9});
  const std::vector<float> scales{0.5f, 0.25f};
  f.add<float>("scales", std::span<const float>(scales), {1, 2});
  return f;
}

std::string ErrorOf(const std::vector<std::byte>& bytes) {
  try {
    Frame::Decode(bytes);
  } catch (const FrameError& e) {
    return e.what();
  }
  return "(accepted)";
}

std::vector<std::byte> Bytes(std::string_view s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

TEST(Frame, RoundTripsHeaderAndArrays) {
  const std::vector<std::byte> bytes = Sample().Encode();
  ASSERT_EQ(std::memcmp(bytes.data(), "FDF1", 4), 0);
  uint32_t header = 0;
  std::memcpy(&header, bytes.data() + 4, 4);
  EXPECT_EQ((header + 8) % 8, 0u);  // the payload starts 8-byte aligned
  const Frame back = Frame::Decode(bytes);
  EXPECT_EQ(back.type(), "run");
  EXPECT_EQ(back.header["batch"], 2);
  EXPECT_FALSE(back.header.contains("arrays"));
  const std::span<const int32_t> input = back.get<int32_t>("input");
  EXPECT_EQ(std::vector<int32_t>(input.begin(), input.end()), (std::vector<int32_t>{-3, 7, 2147483647}));
  const std::span<const int8_t> w = back.get<int8_t>("weights");
  EXPECT_EQ(std::vector<int8_t>(w.begin(), w.end()), (std::vector<int8_t>{-128, 0, 127, 5, 9}));
  EXPECT_EQ(back.find("scales")->shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(back.get<float>("scales")[1], 0.25f);
  for (const FrameArray& a : back.arrays()) EXPECT_EQ(a.offset % 8, 0u) << a.name;
  EXPECT_EQ(back.Encode(), bytes);  // byte for byte
}

TEST(Frame, GetChecksNameAndDtype) {
  const Frame back = Frame::Decode(Sample().Encode());
  EXPECT_THROW(back.get<int32_t>("missing"), FrameError);
  try {
    back.get<int32_t>("weights");
    FAIL();
  } catch (const FrameError& e) {
    EXPECT_STREQ(e.what(), "frame: message 'run': array 'weights' is |i1, expected <i4");
  }
}

TEST(Frame, TruncatedAnywhereIsAnError) {
  const std::vector<std::byte> bytes = Sample().Encode();
  for (size_t n = 0; n < bytes.size(); ++n) {
    const std::string error = ErrorOf(std::vector<std::byte>(bytes.begin(), bytes.begin() + static_cast<long>(n)));
    EXPECT_NE(error.find("truncated"), std::string::npos) << n << ": " << error;
  }
  std::vector<std::byte> longer = bytes;
  longer.push_back(std::byte{0});
  EXPECT_NE(ErrorOf(longer).find("trailing bytes"), std::string::npos);
}

TEST(Frame, BadMagicSaysWhatCame) {
  EXPECT_EQ(ErrorOf(Bytes("hello world\n")).substr(0, 23), "frame: bad magic 'hell'");
}

TEST(Frame, OversizedLengthsAreRefusedBeforeAllocating) {
  std::vector<std::byte> bytes = Bytes("FDF1\xff\xff\xff\x7f{}");
  EXPECT_NE(ErrorOf(bytes).find("header length 2147483647 past the limit"), std::string::npos) << ErrorOf(bytes);
  const std::string header = R"({"type":"x","arrays":[],"payload_bytes":99999999999})";
  std::string text = "FDF1    " + header;
  const uint32_t n = static_cast<uint32_t>(header.size());
  std::memcpy(text.data() + 4, &n, 4);
  EXPECT_NE(ErrorOf(Bytes(text)).find("payload_bytes 99999999999 past the limit"), std::string::npos);
}

TEST(Frame, ArraysMustLieInsideThePayload) {
  const auto frame_with = [](const std::string& arrays, size_t payload) {
    const std::string header = R"({"type":"x","arrays":)" + arrays + R"(,"payload_bytes":)" + std::to_string(payload) + "}";
    std::string text = "FDF1    " + header + std::string(payload, '\0');
    const uint32_t n = static_cast<uint32_t>(header.size());
    std::memcpy(text.data() + 4, &n, 4);
    return ErrorOf(Bytes(text));
  };
  EXPECT_NE(frame_with(R"([{"name":"a","dtype":"<i4","shape":[4],"offset":8,"bytes":16}])", 16).find("outside"),
            std::string::npos);
  EXPECT_NE(frame_with(R"([{"name":"a","dtype":"<i4","shape":[3],"offset":0,"bytes":16}])", 16)
                .find("not the shape's 3 elements"),
            std::string::npos);
  EXPECT_NE(frame_with(R"([{"name":"a","dtype":">i4","shape":[4],"offset":0,"bytes":16}])", 16).find("'>i4' is not"),
            std::string::npos);
  EXPECT_NE(frame_with(R"([{"name":"a","dtype":"<i4","shape":[4294967296,4294967296],"offset":0,"bytes":16}])", 16)
                .find("not the shape's"),
            std::string::npos);
  EXPECT_NE(frame_with(R"({"a":1})", 0).find("arrays: expected a list"), std::string::npos);
  EXPECT_EQ(frame_with(R"([{"name":"a","dtype":"<i4","shape":[4],"offset":0,"bytes":16}])", 16), "(accepted)");
}

TEST(Frame, HeaderMustBeAJsonObject) {
  std::string text = "FDF1    [1,2]   ";
  const uint32_t n = 8;
  std::memcpy(text.data() + 4, &n, 4);
  EXPECT_NE(ErrorOf(Bytes(text)).find("expected a JSON object"), std::string::npos);
  text = "FDF1    {nope   ";
  std::memcpy(text.data() + 4, &n, 4);
  EXPECT_NE(ErrorOf(Bytes(text)).find("header is not JSON"), std::string::npos);
}

TEST(Frame, ReadsConsecutiveFramesFromAStreamAndStopsCleanly) {
  std::vector<std::byte> stream = Sample().Encode();
  Frame bye("bye");
  const std::vector<std::byte> second = bye.Encode();
  stream.insert(stream.end(), second.begin(), second.end());
  size_t at = 0;
  const auto read = [&](std::byte* out, size_t n) {
    n = std::min<size_t>({n, 3, stream.size() - at});  // a few bytes at a time, as a pipe may give them
    std::memcpy(out, stream.data() + at, n);
    at += n;
    return n;
  };
  Frame f;
  ASSERT_TRUE(Frame::Read(read, &f));
  EXPECT_EQ(f.get<int32_t>("input")[1], 7);
  ASSERT_TRUE(Frame::Read(read, &f));
  EXPECT_EQ(f.type(), "bye");
  EXPECT_FALSE(Frame::Read(read, &f));  // a clean end between frames
  stream.resize(stream.size() - 1);
  at = 0;
  ASSERT_TRUE(Frame::Read(read, &f));
  EXPECT_THROW(Frame::Read(read, &f), FrameError);  // an end inside one
}

}  // namespace
}  // namespace fusediff::fused::plugin
