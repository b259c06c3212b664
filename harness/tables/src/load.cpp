// Reading a descriptor and its table from files.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/model/memory_budget.h"
#include "fusediff/tables/tables.h"

namespace fusediff::tables {

std::string ReadFileBytes(const std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw InputError(file + ": is a folder (expected a file)");
  CheckFileWithinBudget(file);
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw InputError(file + ": cannot read");
  return bytes.str();
}

namespace {

namespace fs = std::filesystem;

// Refuses a table path that is absolute or resolves outside `folder` once normalized and with every existing
// symlink followed (weakly_canonical; a missing file is left to ReadFileBytes to report).
void RequireInsideFolder(const std::string& descriptor_path, const fs::path& folder, const std::string& table_file) {
  const std::string field = descriptor_path + ": table.file: '" + table_file + "'";
  const std::string rule =
      " (a table must lie inside the descriptor's folder; --allow-table-outside lifts this for trusted descriptors)";
  if (fs::path(table_file).is_absolute()) throw InputError(field + " is an absolute path" + rule);
  std::error_code ec;
  const fs::path real_folder = fs::canonical(folder, ec);
  if (ec) {
    throw InputError(descriptor_path + ": cannot resolve its folder '" + folder.string() + "' (" + ec.message() + ")");
  }
  const fs::path real_table = fs::weakly_canonical(folder / table_file, ec);
  if (ec) throw InputError(field + ": cannot resolve (" + ec.message() + ")");
  const fs::path inside = real_table.lexically_relative(real_folder);
  if (inside.empty() || *inside.begin() == "..") {
    throw InputError(field + " resolves to '" + real_table.string() + "', outside the descriptor's folder '" +
                     real_folder.string() + "'" + rule);
  }
}

}  // namespace

LoadedFusedOp LoadFusedOp(const std::string& descriptor_path, TablePlacement placement) {
  LoadedFusedOp loaded;
  loaded.descriptor_path = descriptor_path;
  loaded.descriptor = ParseDescriptor(ReadFileBytes(descriptor_path), descriptor_path);
  const fs::path table(loaded.descriptor.table_file);
  const fs::path parent = fs::path(descriptor_path).parent_path();
  const fs::path folder = parent.empty() ? fs::path(".") : parent;
  if (placement == TablePlacement::inside_descriptor_folder) {
    RequireInsideFolder(descriptor_path, folder, loaded.descriptor.table_file);
  }
  loaded.table_path = table.is_absolute() ? table.string() : (parent / table).string();
  loaded.table_bytes = ReadFileBytes(loaded.table_path);
  loaded.table = std::make_shared<const TableData>(
      ParseTable(loaded.table_bytes, loaded.table_path, loaded.descriptor.table_kind, loaded.descriptor.convention));
  return loaded;
}

}  // namespace fusediff::tables
