// Reading a descriptor and its table from files.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "fusediff/model/errors.h"
#include "fusediff/tables/tables.h"

namespace fusediff::tables {

std::string ReadFileBytes(const std::string& file) {
  std::error_code ec;
  if (std::filesystem::is_directory(file, ec)) throw InputError(file + ": is a folder (expected a file)");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file + ": cannot open (" + std::strerror(errno) + ")");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) throw InputError(file + ": cannot read");
  return bytes.str();
}

LoadedFusedOp LoadFusedOp(const std::string& descriptor_path) {
  LoadedFusedOp loaded;
  loaded.descriptor_path = descriptor_path;
  loaded.descriptor = ParseDescriptor(ReadFileBytes(descriptor_path), descriptor_path);
  const std::filesystem::path table(loaded.descriptor.table_file);
  loaded.table_path =
      table.is_absolute() ? table.string() : (std::filesystem::path(descriptor_path).parent_path() / table).string();
  loaded.table_bytes = ReadFileBytes(loaded.table_path);
  loaded.table = std::make_shared<const TableData>(
      ParseTable(loaded.table_bytes, loaded.table_path, loaded.descriptor.table_kind, loaded.descriptor.convention));
  return loaded;
}

}  // namespace fusediff::tables
