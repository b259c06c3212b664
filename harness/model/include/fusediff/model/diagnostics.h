#pragma once
// Local suppression of one known compiler false positive. Wrap the smallest statement that needs it.
//
// GCC 12 at -O2+ in C++20 reports -Wrestrict ("__builtin_memcpy accessing 9223372036854775810 or more bytes ...
// may overlap") inside libstdc++'s operator+(const char*, std::string&&), which inserts the literal at the front
// of the temporary: once inlined, GCC cannot bound the length on a path that never runs (GCC bugs 105329 and
// 105651, fixed in later releases). The code is correct; other GCC versions and clang keep the warning.
#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ == 12
#define FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN \
  _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wrestrict\"")
#define FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END _Pragma("GCC diagnostic pop")
#else
#define FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN
#define FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
#endif
