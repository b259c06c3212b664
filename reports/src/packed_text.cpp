#include "packed_text.h"

#include <openssl/evp.h>
#include <zlib.h>

#include <stdexcept>
#include <vector>

#include "fusediff/model/errors.h"

namespace fusediff::reports {

std::string PackText(std::string_view text) {
  uLongf size = compressBound(static_cast<uLong>(text.size()));
  std::vector<unsigned char> deflated(size);
  if (compress2(deflated.data(), &size, reinterpret_cast<const Bytef*>(text.data()), static_cast<uLong>(text.size()), 9) !=
      Z_OK) {
    throw std::runtime_error("zlib compress2 failed");
  }
  std::string out(4 * ((size + 2) / 3), '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), deflated.data(), static_cast<int>(size));
  out.resize(static_cast<size_t>(written));
  return out;
}

std::string UnpackText(std::string_view packed, size_t max_bytes, const std::string& field) {
  const auto bad = [&](const char* why) {
    return InputError(field + ": expected zlib-compressed base64 text (" + why + ")");
  };
  if (packed.size() % 4 != 0) throw bad("length not a multiple of 4");
  std::vector<unsigned char> deflated(packed.size() / 4 * 3 + 1);
  const int decoded = EVP_DecodeBlock(deflated.data(), reinterpret_cast<const unsigned char*>(packed.data()),
                                      static_cast<int>(packed.size()));
  if (decoded < 0) throw bad("not base64");
  size_t length = static_cast<size_t>(decoded);
  // EVP_DecodeBlock counts the padding as zero bytes.
  for (size_t i = packed.size(); i > 0 && packed[i - 1] == '='; --i) --length;
  std::string text(max_bytes, '\0');
  uLongf size = static_cast<uLongf>(max_bytes);
  const int rc = uncompress(reinterpret_cast<Bytef*>(text.data()), &size, deflated.data(), static_cast<uLong>(length));
  if (rc == Z_BUF_ERROR) throw bad("larger than the field can hold");
  if (rc != Z_OK) throw bad("not a zlib stream");
  text.resize(size);
  return text;
}

}  // namespace fusediff::reports
