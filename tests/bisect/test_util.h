#pragma once
// What the bisect tests share: a fresh scratch folder, writing a file, the one runtime of the test process, and
// options for a quick bisect (one set per family, few timed runs).
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include "fusediff/bisect/bisect.h"

namespace fusediff::bisect::test {

inline std::filesystem::path Scratch(const std::string& name) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / ("fusediff_bisect_" + name);
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

inline std::string Write(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
  return path.string();
}

inline fused::ort::Runtime& Runtime() {
  static const std::unique_ptr<fused::ort::Runtime> runtime = fused::ort::StartRuntime();
  return *runtime;
}

// One set per family; optimized models in dir/work, reproductions in dir/repro.
inline BisectOptions Quick(const std::filesystem::path& dir, int warmup = 1, int repeats = 3) {
  BisectOptions o;
  o.generate = 1;
  o.warmup = warmup;
  o.repeats = repeats;
  o.work_dir = (dir / "work").string();
  o.repro_dir = (dir / "repro").string();
  return o;
}

}  // namespace fusediff::bisect::test
