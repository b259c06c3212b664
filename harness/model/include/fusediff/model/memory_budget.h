#pragma once
// The memory a command may spend on what a user gives it: a model's inputs, outputs and what is kept of them
// (fusediff bisect --max-bytes), and any file read whole into memory (tables, results, tensors). Something beyond
// it is refused as bad input (exit 2) naming it and its size, before it is allocated.
#include <cstdint>
#include <string>

namespace fusediff {

inline constexpr uint64_t kDefaultMaxBytes = uint64_t{4} << 30;  // 4 GiB

// A file about to be read whole: InputError "PATH: N bytes, over the M-byte limit for a file read whole" when it is
// larger than `max` (0: no limit). A file that cannot be stat'ed is left to the reader to report.
void CheckFileWithinBudget(const std::string& path, uint64_t max = kDefaultMaxBytes);

}  // namespace fusediff
