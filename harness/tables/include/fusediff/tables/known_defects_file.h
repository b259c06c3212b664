#pragma once
// The known-defect ledger file (format "fusediff-known-defects/1"; model/known_defects.h says what an entry
// means), read strictly: unknown or missing fields, a wrong type, an unknown rule or model, a bad version range, a
// replay string that does not parse, a repeated id are InputErrors naming the file and the field (exit 2).
#include <string>
#include <string_view>

#include "fusediff/model/known_defects.h"

namespace fusediff::tables {

KnownDefectLedger ParseKnownDefects(std::string_view json_text, const std::string& file);
// ParseKnownDefects of the file's bytes.
KnownDefectLedger ReadKnownDefects(const std::string& file);

}  // namespace fusediff::tables
