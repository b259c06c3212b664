#pragma once
// Errors that cross layers. InputError is bad user input (exit code 2); UndecidableError is an exact
// decision the reference could not make at its precision cap (reported, never guessed).
#include <stdexcept>
#include <string>

namespace fusediff {

// Bad input: a value, field or file that does not meet its contract. The message names the value, the
// field (and file/line where known) and what was expected, on one line.
class InputError : public std::runtime_error {
 public:
  explicit InputError(const std::string& message) : std::runtime_error(message) {}
};

// An exact rounding decision that could not be made (e.g. a value that stays within the margin of a
// rounding tie at the precision cap and no exact argument settles it).
class UndecidableError : public std::runtime_error {
 public:
  explicit UndecidableError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace fusediff
