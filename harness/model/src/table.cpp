#include "fusediff/model/table.h"

#include <cstdio>
#include <string>

namespace fusediff {

namespace {
struct Fnv1a {
  uint64_t hash = 0xcbf29ce484222325ull;
  void add(uint32_t word) {
    for (int i = 0; i < 4; ++i) {  // little-endian byte order, fixed: the fingerprint must not depend on the host
      hash ^= (word >> (8 * i)) & 0xffu;
      hash *= 0x100000001b3ull;
    }
  }
  void add_all(const std::vector<int32_t>& values) {
    add(static_cast<uint32_t>(values.size()));
    for (int32_t v : values) add(static_cast<uint32_t>(v));
  }
};
}  // namespace

uint64_t table_fingerprint(const TableData& table) {
  Fnv1a h;
  h.add(static_cast<uint32_t>(table.kind));
  h.add_all(table.lut);
  h.add_all(table.knots);
  h.add(static_cast<uint32_t>(table.segments.size()));
  for (const PwlSegment& s : table.segments) {
    for (int32_t v : {s.u_lo, s.u_hi, s.slope, s.offset, s.shift}) h.add(static_cast<uint32_t>(v));
  }
  return h.hash;
}

std::string table_fingerprint_hex(const TableData& table) {
  char buffer[17];
  std::snprintf(buffer, sizeof buffer, "%016llx", static_cast<unsigned long long>(table_fingerprint(table)));
  return buffer;
}

std::string table_kind_mismatch(TableKind kind, const Convention& c) {
  const QuantParams& u = c.intermediate.q;
  const QuantParams& y = c.output.q;
  switch (kind) {
    case TableKind::lut:
      if (u.type.bits() != 8) return "table kind lut needs an 8-bit intermediate (int8 or uint8), got " + to_string(u.type);
      return {};
    case TableKind::lut_interp:
      if (u.type.scalar != ScalarType::int16) {
        return "table kind lut_interp needs an int16 intermediate, got " + to_string(u.type);
      }
      if (y.type.scalar != ScalarType::int16) return "table kind lut_interp needs an int16 output, got " + to_string(y.type);
      if (u.zero_point != 0) {
        return "table kind lut_interp needs intermediate zero point 0, got " + std::to_string(u.zero_point);
      }
      if (y.zero_point != 0) return "table kind lut_interp needs output zero point 0, got " + std::to_string(y.zero_point);
      return {};
    case TableKind::pwl:
      return {};  // every intermediate type is 8- or 16-bit
  }
  return "unknown table kind";
}


}  // namespace fusediff
