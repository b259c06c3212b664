#pragma once
// What every library backend with a fused graph and an unfused one (oneDNN, XNNPACK) says the same way: its name is
// the fused path's, its words are its paths, and the fused, cross-convention and unfused comparisons of one graph
// share the fused path's sample word, so that they see the same draws. A library derives from it and adds the rest.
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/backend.h"

namespace fusediff {

class LibraryBackend : public Backend {
 public:
  // Both views must outlive the backend (string literals of its module).
  LibraryBackend(std::string_view fused, std::string_view unfused) : fused_(fused), unfused_(unfused) {}

  std::string_view name() const override { return fused_; }
  std::vector<std::string> paths() const override { return {std::string(fused_), std::string(unfused_)}; }
  std::vector<std::string> words() const override { return paths(); }
  void SelectPath(std::string_view word, CaseSpec& spec) const override { spec.backend = std::string(word); }
  std::string PathWord(const CaseSpec& spec) const override { return spec.backend; }
  std::string SampleWord(const CaseSpec&) const override { return std::string(fused_); }

 private:
  std::string_view fused_, unfused_;
};

}  // namespace fusediff
