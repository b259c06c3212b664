#pragma once
// Tables as files: the fused-op descriptor (JSON, nlohmann-json), its table (CSV, Fast C++ CSV Parser) and the
// tolerance spec (JSON), read and validated as strictly as a compiler validates IR. Every failure is one
// InputError line naming the file, the field (line and column for CSV) and what was expected. The parsers take
// the bytes (so the fuzzer and tests need no files); Load* read the files.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/table.h"
#include "fusediff/model/tolerance.h"

namespace fusediff::tables {

// "fusediff-fused-op/1" descriptor. Unknown fields are errors; `activation.alpha`, `*.narrow` and
// `output.zero_point_order` are optional; `intermediate` and `table` come together or not at all.
FusedOpDescriptor ParseDescriptor(std::string_view json_text, const std::string& file);
std::string FormatDescriptor(const FusedOpDescriptor& descriptor);  // JSON text, trailing newline

// A table file of `kind` for `convention` (the descriptor's; it must already satisfy table_kind_mismatch):
//   lut         header u,y                              one row per intermediate code, any order
//   lut_interp  header index,value                      index 0..512 each once, value int16
//   pwl         header u_lo,u_hi,slope,offset,shift     sorted, contiguous, covering the intermediate range
// The file must end with a newline (a file cut short is reported as truncated).
TableData ParseTable(std::string_view csv_text, const std::string& file, TableKind kind, const Convention& convention);
std::string FormatTable(const TableData& table, const Convention& convention);  // CSV text, header first

// Tolerance spec (JSON):
//   {"format": "fusediff-tolerance/1",
//    "tolerances": [{"activation": "gelu_erf" | "*", "table": "lut" | "lut_interp" | "pwl",
//                    "segments": N (pwl only, optional), "max_abs_lsb": K,
//                    "min_exact_fraction": F (optional), "max_abs_mean_lsb": B (optional)}, ...]}
struct ToleranceEntry {
  std::optional<ActivationKind> activation;  // nullopt: "*"
  TableKind table = TableKind::lut;
  std::optional<size_t> segments;
  Tolerance tolerance;
};
struct ToleranceSpec {
  std::vector<ToleranceEntry> entries;
};
ToleranceSpec ParseToleranceSpec(std::string_view json_text, const std::string& file);
// The most specific entry: exact activation before "*", exact segment count before none; nullopt when none fits.
std::optional<Tolerance> FindTolerance(const ToleranceSpec& spec, ActivationKind activation, TableKind table,
                                       size_t segments);

// Whole file contents; InputError naming `file` when it cannot be read.
std::string ReadFileBytes(const std::string& file);

struct LoadedFusedOp {
  FusedOpDescriptor descriptor;
  std::string descriptor_path;
  std::string table_path;   // resolved against the descriptor's folder
  std::string table_bytes;  // exactly what was read (for its SHA-256)
  std::shared_ptr<const TableData> table;
};
// Where `table.file` may lead. The gate reads descriptors from pull requests, so by default the table must be a
// relative path that resolves (normalized, every symlink followed) inside the descriptor's folder: a descriptor
// cannot make the gate read /etc/passwd or ../../secrets and publish its SHA-256.
enum class TablePlacement { inside_descriptor_folder, anywhere };
// Reads and validates a descriptor and its table (the table file is only read). A table outside the allowed
// placement is an InputError naming `table.file` and the rule.
LoadedFusedOp LoadFusedOp(const std::string& descriptor_path,
                          TablePlacement placement = TablePlacement::inside_descriptor_folder);

}  // namespace fusediff::tables
