#include "fusediff/model/memory_budget.h"

#include <filesystem>

#include "fusediff/model/errors.h"

namespace fusediff {

void CheckFileWithinBudget(const std::string& path, uint64_t max) {
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec || max == 0 || size <= max) return;
  throw InputError(path + ": " + std::to_string(size) + " bytes, over the " + std::to_string(max) +
                   "-byte limit for a file read whole");
}

}  // namespace fusediff
