#pragma once
// What the bisect tests share: a fresh scratch folder, writing a file, the one runtime of the test process, and
// options for a quick bisect (one set per family, few timed runs).
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "fusediff/bisect/bisect.h"
#include "fusediff/cli/cli.h"

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

// `fusediff ARGS...` through the CLI in this process: its exit status, what it printed and its errors.
inline int Cli(const std::vector<std::string>& args, std::string& out, std::string& err) {
  std::ostringstream o, e;
  std::vector<std::string> full = {"fusediff"};
  full.insert(full.end(), args.begin(), args.end());
  const int rc = cli::Main(full, o, e);
  out = o.str();
  err = e.str();
  return rc;
}

}  // namespace fusediff::bisect::test
