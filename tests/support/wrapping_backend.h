#pragma once
// A test backend whose paths are the built-in kernels behind words of its own (test_backend_test.cpp,
// thread_race_test.cpp): a subclass names its paths and provenance and wraps the built-in path of each draw.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/fused/fused_path.h"
#include "fusediff/model/backend.h"

namespace fusediff::test_support {

class WrappingBackend : public Backend {
 public:
  std::vector<std::string> words() const override { return paths(); }
  void SelectPath(std::string_view word, CaseSpec& spec) const override { spec.backend = std::string(word); }
  std::string PathWord(const CaseSpec& spec) const override { return spec.backend; }
  std::vector<std::string> stage_kinds() const override { return fused::BuiltInBackend().stage_kinds(); }
  std::vector<std::string> patterns() const override { return fused::BuiltInBackend().patterns(); }
  Tolerance DefaultTolerance(const CaseSpec& spec) const override { return fused::BuiltInBackend().DefaultTolerance(spec); }
  std::unique_ptr<FusedPath> CreatePath(const CaseSpec& spec, std::string* why) const override {
    CaseSpec builtin = spec;
    builtin.backend = std::string(kBuiltInPath);
    std::unique_ptr<FusedPath> inner = fused::BuiltInBackend().CreatePath(builtin, why);
    return inner ? Wrap(std::move(inner), spec) : nullptr;
  }

 protected:
  // The path for `spec` (its word in spec.backend) around the built-in one.
  virtual std::unique_ptr<FusedPath> Wrap(std::unique_ptr<FusedPath> inner, const CaseSpec& spec) const = 0;
};

}  // namespace fusediff::test_support
