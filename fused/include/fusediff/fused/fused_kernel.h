#pragma once
// The fused path under test: its own conv (int32 accumulator), requantization by multiplier + shift (or the
// declared float/exact variant), then the activation table. One descriptor: convention (intermediate and
// output types), table kind, mutant.
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "fusediff/model/case_spec.h"
#include "fusediff/model/conv_case.h"
#include "fusediff/model/convention.h"
#include "fusediff/model/table.h"

namespace fusediff::fused {

class FusedKernel {
 public:
  // Builds the table. Returns nullptr and sets *unsupported_reason when `kind` cannot implement `convention`
  // (lut needs an 8-bit intermediate; lut_interp an int16 intermediate and int16 output, both zero points 0).
  // An invalid convention (fusediff::validate) is bad input, not an unsupported one: throws InputError.
  // pwl has no built-in table: without an external one it is unsupported.
  static std::unique_ptr<FusedKernel> Create(const Convention& convention, TableKind kind, Mutant mutant,
                                             std::string* unsupported_reason);
  // The same op with an external table (a table file) instead of a built one. The table must be of `kind`, fit
  // the convention's types (table_kind_mismatch) and be complete (lut: one entry per code; lut_interp: 513
  // int16 knots; pwl: segments sorted, contiguous, covering the intermediate range, shift in [0, 31]) — the
  // table reader guarantees all of it; a violation here throws InputError. Mutants do not apply (InputError).
  static std::unique_ptr<FusedKernel> Create(const Convention& convention, TableKind kind, Mutant mutant,
                                             std::string* unsupported_reason,
                                             std::shared_ptr<const TableData> table);
  ~FusedKernel();

  // The table applied to an intermediate code u (in the intermediate type's range): the sweep path.
  int32_t ApplyTable(int32_t u) const;

  // Whole fused op on one case and input draw. y[output_index] = fused output code. acc and u (optional,
  // empty span to skip) receive the fused path's int32 accumulator and intermediate code.
  void Run(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y, std::span<int32_t> acc = {},
           std::span<int32_t> u = {}) const;

  // acc -> u for output channel k of `conv`, the declared variant's fused implementation (for replay).
  int32_t Requantize(const ConvCase& conv, int32_t k, int32_t acc) const;
  // acc -> y for output channel k: everything after the convolution (requantization, then the table), as Run
  // does it for one element.
  int32_t PostProcess(const ConvCase& conv, int32_t k, int32_t acc) const;

 private:
  void RunTransposed(const ConvCase& conv, std::span<const int32_t> input, std::span<int32_t> y,
                     std::span<int32_t> acc, std::span<int32_t> u) const;
  struct Impl;
  explicit FusedKernel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace fusediff::fused
