#pragma once
// A one-line progress bar on standard error (samples done, rate, ETA), drawn only when stderr is a terminal.
#include <chrono>
#include <cstdint>

namespace fusediff::cli {

class ProgressBar {
 public:
  explicit ProgressBar(uint64_t total_samples);
  ~ProgressBar();  // clears the line
  // `done` counts every sample compared so far in the whole run. Redraws at most ten times a second.
  void update(uint64_t done);

 private:
  bool enabled_;
  uint64_t total_;
  std::chrono::steady_clock::time_point start_, last_draw_;
};

}  // namespace fusediff::cli
