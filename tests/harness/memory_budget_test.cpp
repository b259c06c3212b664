// Files read whole into memory are refused beyond the memory budget, naming the file and its size (issue 25): a
// sparse file of 5 GiB takes no disk space.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "fusediff/model/errors.h"
#include "fusediff/model/memory_budget.h"
#include "fusediff/reports/reports.h"
#include "fusediff/tables/tables.h"

namespace fusediff {
namespace {

TEST(MemoryBudget, FilesBeyondItAreRefusedBeforeTheyAreRead) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "fusediff_memory_budget";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::filesystem::path huge = dir / "huge.json";
  std::ofstream(huge).put('{');
  std::filesystem::resize_file(huge, uint64_t{5} << 30);
  const std::string expected = huge.string() + ": 5368709120 bytes, over the 4294967296-byte limit for a file read whole";
  for (const auto& read : std::vector<std::function<void()>>{[&] { tables::ReadFileBytes(huge.string()); },
                                                             [&] { reports::ReadResultsFile(huge.string()); }}) {
    try {
      read();
      ADD_FAILURE() << "read a file over the budget";
    } catch (const InputError& e) {
      EXPECT_EQ(std::string(e.what()), expected);
    }
  }
  EXPECT_THROW(CheckFileWithinBudget(huge.string(), uint64_t{1} << 20), InputError);
  EXPECT_NO_THROW(CheckFileWithinBudget(huge.string(), 0));  // 0: no limit
  EXPECT_NO_THROW(CheckFileWithinBudget((dir / "missing").string()));  // left to the reader to report
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace fusediff
