// libFuzzer target: descriptor + table + tolerance-spec parsing. One input is a descriptor (JSON), a line
// "----", then a table (CSV). Bad input must end in InputError, never anything else; whatever parses must
// survive format -> parse unchanged.
#include <cstdint>
#include <cstdlib>
#include <cstdio>
#include <string>
#include <string_view>

#include "fusediff/model/errors.h"
#include "fusediff/tables/tables.h"

namespace {

using namespace fusediff;

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "table_fuzzer: %s\n", what);
  std::abort();
}

Convention Fixed(ScalarType u, ScalarType y) {
  Convention c;
  c.intermediate.q = QuantParams{QuantType{u, false}, 0.05f, 0};
  c.output.q = QuantParams{QuantType{y, false}, 0.03f, 0};
  c.activation = make_activation(ActivationKind::gelu_erf);
  return c;
}

void CheckTable(std::string_view csv, TableKind kind, const Convention& c) {
  TableData table;
  try {
    table = tables::ParseTable(csv, "fuzz.csv", kind, c);
  } catch (const InputError&) {
    return;
  }
  const std::string again = tables::FormatTable(table, c);
  if (!(tables::ParseTable(again, "fuzz.csv", kind, c) == table)) Fail("table changed through format -> parse");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  constexpr std::string_view kSeparator = "\n----\n";
  const size_t separator = input.find(kSeparator);
  const std::string_view descriptor_text = input.substr(0, separator);
  const std::string_view table_text =
      separator == std::string_view::npos ? input : input.substr(separator + kSeparator.size());

  // One table parse per input: the CSV reader allocates a 48 MiB buffer per file, which dominates the cost under
  // ASan. A valid descriptor picks the table's kind and convention; otherwise the input's size picks a fixed one.
  bool table_checked = false;
  try {
    const FusedOpDescriptor d = tables::ParseDescriptor(descriptor_text, "fuzz.json");
    const FusedOpDescriptor again = tables::ParseDescriptor(tables::FormatDescriptor(d), "fuzz.json");
    if (!(again.convention == d.convention) || again.table_kind != d.table_kind || again.table_file != d.table_file ||
        again.op != d.op || again.group != d.group) {
      Fail("descriptor changed through format -> parse");
    }
    table_checked = true;
    CheckTable(table_text, d.table_kind, d.convention);
  } catch (const InputError&) {
  }
  try {
    tables::ParseToleranceSpec(descriptor_text, "fuzz-tolerance.json");
  } catch (const InputError&) {
  }
    if (!table_checked) {
    switch (size % 3) {
      case 0: CheckTable(table_text, TableKind::lut, Fixed(ScalarType::int8, ScalarType::int8)); break;
      case 1: CheckTable(table_text, TableKind::lut_interp, Fixed(ScalarType::int16, ScalarType::int16)); break;
      default: CheckTable(table_text, TableKind::pwl, Fixed(ScalarType::uint8, ScalarType::int16)); break;
    }
  }
  return 0;
}
