#pragma once
// Activation tables as data (what a table file holds) and the fused-op descriptor that names one. The files are
// read and validated by harness/tables; the fused path evaluates a table (fused/lut.h), the reference never sees
// one. std only.
#include <cstdint>
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/pattern.h"

namespace fusediff {

inline constexpr int32_t kLutInterpKnotCount = 513;  // TFLite's int16 table: 512 steps + the end knot
inline constexpr int32_t kPwlMaxShift = 31;

// One piecewise-linear segment over the intermediate codes [u_lo, u_hi]:
//   y = sat_y(RoundingDivideByPOT64(slope * (u - u_lo), shift) + offset)
// slope and offset int32 (offset is an output code, zero point included), shift in [0, 31], the product in int64,
// the division rounding half away from zero.
struct PwlSegment {
  int32_t u_lo = 0;
  int32_t u_hi = 0;
  int32_t slope = 0;
  int32_t offset = 0;
  int32_t shift = 0;
  friend bool operator==(const PwlSegment&, const PwlSegment&) = default;
};

struct TableData {
  TableKind kind = TableKind::lut;
  std::vector<int32_t> lut;            // lut: lut[u - qmin] = output code, one per intermediate code
  std::vector<int32_t> knots;          // lut_interp: kLutInterpKnotCount int16 knots, index 0..512
  std::vector<PwlSegment> segments;    // pwl: sorted, contiguous, covering the intermediate range
  friend bool operator==(const TableData&, const TableData&) = default;
};

// 64-bit FNV-1a over the kind and every value (stable across platforms): names a table in case keys.
uint64_t table_fingerprint(const TableData& table);
std::string table_fingerprint_hex(const TableData& table);  // 16 lowercase hex digits

// Empty when a table of `kind` can implement `convention`'s types; otherwise why not:
//   lut:        8-bit intermediate (int8/uint8, narrow allowed), any output type
//   lut_interp: int16 intermediate and int16 output, both zero points 0 (TFLite)
//   pwl:        8- or 16-bit intermediate, any output type
std::string table_kind_mismatch(TableKind kind, const Convention& convention);

// The fused node's contract: which table, which activation, the types on either side of the removed intermediate
// tensor, and (format /2) the fusion pattern around it with what the graph says about its legality. Format /1
// files (conv2d+act, every boundary kept) are still read.
inline constexpr const char* kFusedOpFormat = "fusediff-fused-op/2";
inline constexpr const char* kFusedOpFormatV1 = "fusediff-fused-op/1";

struct FusedOpDescriptor {
  ConvOp op = ConvOp::conv2d;  // the producer (model/conv_case.h); a fully connected producer is pattern.producer
  int64_t group = 1;
  Pattern pattern;                  // conv2d+act (or fc+act for op fully_connected) unless the descriptor says
  Fusion fusion = Fusion::keep_all;
  FusionFacts facts;                // group, consumers, residual shape, FC input: what legality reads
  Convention convention;
  TableKind table_kind = TableKind::lut;
  std::string table_file;  // as written in the descriptor: relative to the descriptor's folder
};

}  // namespace fusediff
