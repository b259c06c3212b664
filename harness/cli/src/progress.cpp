#include "progress.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

namespace fusediff::cli {

ProgressBar::ProgressBar(uint64_t total_samples)
    : enabled_(::isatty(STDERR_FILENO) == 1), total_(std::max<uint64_t>(total_samples, 1)),
      start_(std::chrono::steady_clock::now()), last_draw_() {}

ProgressBar::~ProgressBar() {
  if (enabled_) std::fputs("\r\033[K", stderr);
}

void ProgressBar::update(uint64_t done) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  done = std::min(done, total_);
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  const double rate = elapsed > 0 ? done / elapsed : 0;
  const double eta = rate > 0 ? (total_ - done) / rate : 0;
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(kWidth * done / total_);
  std::string bar(filled, '#');
  bar.resize(kWidth, '.');
  const std::string line = fmt::format("\r[{}] {}/{} samples  {:.0f}/s  ETA {:.0f}s\033[K", bar, done, total_, rate, eta);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

}  // namespace fusediff::cli
