// Table files (CSV) through the Fast C++ CSV Parser: parse strictly, format canonically.
#include <libfccp/csv.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <limits>
#include <map>
#include <utility>
#include <string>
#include <vector>

#include "fusediff/model/diagnostics.h"
#include "fusediff/model/errors.h"
#include "fusediff/tables/tables.h"

namespace fusediff::tables {

namespace {

std::string Shown(std::string_view text) {
  return text.size() > 40 ? std::string(text.substr(0, 40)) + "..." : std::string(text);
}

template <size_t N>
std::string HeaderText(const std::array<const char*, N>& names) {
  std::string out;
  for (const char* n : names) out += (out.empty() ? "" : ",") + std::string(n);
  return out;
}

// One CSV table with a fixed, ordered header. Cells are read as text by the CSV library (which splits lines
// and columns, trims blanks and reports too many / too few columns with the line) and converted here, so
// every message can name the line, the column number and the column name.
template <size_t N>
class StrictCsv {
 public:
  StrictCsv(std::string_view text, const std::string& file, const std::array<const char*, N>& header)
      : file_(file), header_(header), text_(text),
        reader_(file.c_str(), text_.data(), text_.data() + text_.size()) {
    if (text.find('\0') != std::string_view::npos) throw InputError(file_ + ": contains a NUL byte (expected CSV text)");
    if (text.empty()) throw InputError(file_ + ": empty file (expected the header " + HeaderText(header_) + " and rows)");
    if (text.back() != '\n') {
      const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
      throw InputError(file_ + " line " + std::to_string(lines) +
                       ": the last line does not end with a newline (file truncated?)");
    }
    SetHeader(std::make_index_sequence<N>{});
    std::array<char*, N> cells{};
    if (!Next(cells)) throw InputError(file_ + ": empty file (expected the header " + HeaderText(header_) + ")");
    std::string found;
    bool matches = true;
    for (size_t i = 0; i < N; ++i) {
      FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_BEGIN  // "literal" + std::string&& (fusediff/model/diagnostics.h)
      found += (i ? "," : "") + std::string(cells[i]);
      FUSEDIFF_GCC12_WRESTRICT_FALSE_POSITIVE_END
      matches = matches && std::string_view(cells[i]) == header_[i];
    }
    if (!matches) {
      throw InputError(file_ + " line 1: missing header: found '" + Shown(found) + "', expected '" +
                       HeaderText(header_) + "'");
    }
  }

  // The next data row's cells, or false at the end.
  bool Next(std::array<char*, N>& cells) {
    try {
      return Read(cells, std::make_index_sequence<N>{});
    } catch (const io::error::too_many_columns&) {
      throw InputError(file_ + " line " + std::to_string(reader_.get_file_line()) + ": too many columns (expected " +
                       std::to_string(N) + ": " + HeaderText(header_) + ")");
    } catch (const io::error::too_few_columns&) {
      throw InputError(file_ + " line " + std::to_string(reader_.get_file_line()) + ": too few columns (expected " +
                       std::to_string(N) + ": " + HeaderText(header_) + ")");
    } catch (const io::error::base& e) {
      throw InputError(file_ + " line " + std::to_string(reader_.get_file_line()) + ": " + e.what());
    }
  }

  unsigned line() const { return reader_.get_file_line(); }

  [[noreturn]] void Fail(size_t column, const std::string& what) const {
    throw InputError(Where(column) + ": " + what);
  }
  std::string Where(size_t column) const {
    return file_ + " line " + std::to_string(line()) + ", column " + std::to_string(column + 1) + " (" +
           header_[column] + ")";
  }

  // An integer cell within [lo, hi]; `expected` says what the value is.
  int64_t Integer(const std::array<char*, N>& cells, size_t column, int64_t lo, int64_t hi,
                  const std::string& expected) const {
    const std::string_view text(cells[column]);
    int64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
      Fail(column, "'" + Shown(text) + "' is not an integer (expected " + expected + ")");
    }
    if (value < lo || value > hi) Fail(column, std::to_string(value) + " is out of range (expected " + expected + ")");
    return value;
  }

 private:
  template <size_t... I>
  void SetHeader(std::index_sequence<I...>) {
    reader_.set_header(header_[I]...);
  }
  template <size_t... I>
  bool Read(std::array<char*, N>& cells, std::index_sequence<I...>) {
    return reader_.read_row(cells[I]...);
  }

  const std::string& file_;
  std::array<const char*, N> header_;
  std::string_view text_;
  io::CSVReader<N, io::trim_chars<' ', '\t'>, io::no_quote_escape<','>> reader_;
};

std::string TypeRange(const QuantType& t) {
  return to_string(t) + " [" + std::to_string(t.qmin()) + ", " + std::to_string(t.qmax()) + "]";
}

// "17, 18, 19 and 4 more"
std::string ListCodes(const std::vector<int64_t>& codes) {
  std::string out;
  const size_t shown = std::min<size_t>(codes.size(), 10);
  for (size_t i = 0; i < shown; ++i) out += (i ? ", " : "") + std::to_string(codes[i]);
  if (codes.size() > shown) out += " and " + std::to_string(codes.size() - shown) + " more";
  return out;
}

// Rows keyed by an index in [lo, hi], each exactly once: returns value per index.
template <size_t N>
std::vector<int32_t> ReadKeyed(StrictCsv<N>& csv, const std::string& file, int64_t lo, int64_t hi,
                               const std::string& key_expected, int64_t value_lo, int64_t value_hi,
                               const std::string& value_expected, const char* what) {
  std::vector<int32_t> values(static_cast<size_t>(hi - lo + 1), 0);
  std::vector<unsigned> seen_on(values.size(), 0);
  std::array<char*, N> cells{};
  while (csv.Next(cells)) {
    const int64_t key = csv.Integer(cells, 0, lo, hi, key_expected);
    const int64_t value = csv.Integer(cells, 1, value_lo, value_hi, value_expected);
    const size_t slot = static_cast<size_t>(key - lo);
    if (seen_on[slot] != 0) {
      csv.Fail(0, std::string(what) + " " + std::to_string(key) + " appears twice (first on line " +
                      std::to_string(seen_on[slot]) + "; expected each exactly once)");
    }
    seen_on[slot] = csv.line();
    values[slot] = static_cast<int32_t>(value);
  }
  std::vector<int64_t> missing;
  for (size_t i = 0; i < values.size(); ++i) {
    if (seen_on[i] == 0) missing.push_back(lo + static_cast<int64_t>(i));
  }
  if (!missing.empty()) {
    throw InputError(file + ": missing rows: " + std::to_string(missing.size()) + " of " +
                     std::to_string(values.size()) + " " + what + "s have no row: " + ListCodes(missing) +
                     " (expected every " + what + " in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                     "] exactly once)");
  }
  return values;
}

}  // namespace

TableData ParseTable(std::string_view csv_text, const std::string& file, TableKind kind, const Convention& c) {
  const QuantType& u_type = c.intermediate.q.type;
  const QuantType& y_type = c.output.q.type;
  TableData table;
  table.kind = kind;
  switch (kind) {
    case TableKind::lut: {
      StrictCsv<2> csv(csv_text, file, {"u", "y"});
      table.lut = ReadKeyed(csv, file, u_type.qmin(), u_type.qmax(), "an intermediate code in " + TypeRange(u_type),
                            y_type.qmin(), y_type.qmax(), "an output code in " + TypeRange(y_type), "code");
      break;
    }
    case TableKind::lut_interp: {
      StrictCsv<2> csv(csv_text, file, {"index", "value"});
      table.knots = ReadKeyed(csv, file, 0, kLutInterpKnotCount - 1, "a knot index in [0, 512]", INT16_MIN, INT16_MAX,
                              "an int16 knot value in [-32768, 32767]", "index");
      break;
    }
    case TableKind::pwl: {
      StrictCsv<5> csv(csv_text, file, {"u_lo", "u_hi", "slope", "offset", "shift"});
      const std::string u_expected = "an intermediate code in " + TypeRange(u_type);
      const std::string int32_expected = "an int32";
      std::array<char*, 5> cells{};
      int64_t next = u_type.qmin();  // the first code the next segment must start at
      while (csv.Next(cells)) {
        PwlSegment s;
        s.u_lo = static_cast<int32_t>(csv.Integer(cells, 0, u_type.qmin(), u_type.qmax(), u_expected));
        s.u_hi = static_cast<int32_t>(csv.Integer(cells, 1, u_type.qmin(), u_type.qmax(), u_expected));
        s.slope = static_cast<int32_t>(csv.Integer(cells, 2, INT32_MIN, INT32_MAX, int32_expected));
        s.offset = static_cast<int32_t>(csv.Integer(cells, 3, INT32_MIN, INT32_MAX, "an int32 output code"));
        s.shift = static_cast<int32_t>(csv.Integer(cells, 4, 0, kPwlMaxShift, "a shift in [0, 31]"));
        if (s.u_hi < s.u_lo) {
          csv.Fail(1, std::to_string(s.u_hi) + " is below u_lo " + std::to_string(s.u_lo) + " (expected u_lo <= u_hi)");
        }
        if (!table.segments.empty() && s.u_lo <= table.segments.back().u_lo) {
          csv.Fail(0, std::to_string(s.u_lo) + " does not follow the previous segment's u_lo " +
                          std::to_string(table.segments.back().u_lo) + " (segments must be sorted by u_lo)");
        }
        if (s.u_lo > next) {
          csv.Fail(0, "gap: codes " + std::to_string(next) + ".." + std::to_string(s.u_lo - 1) +
                          " are in no segment (expected u_lo " + std::to_string(next) + ")");
        }
        if (s.u_lo < next) {
          csv.Fail(0, "overlap: codes " + std::to_string(s.u_lo) + ".." + std::to_string(next - 1) +
                          " are already in the previous segment (expected u_lo " + std::to_string(next) + ")");
        }
        next = int64_t{s.u_hi} + 1;
        table.segments.push_back(s);
      }
      if (table.segments.empty()) {
        throw InputError(file + ": no segments (expected segments covering " + TypeRange(u_type) + ")");
      }
      if (next != int64_t{u_type.qmax()} + 1) {
        throw InputError(file + ": missing rows: codes " + std::to_string(next) + ".." + std::to_string(u_type.qmax()) +
                         " are in no segment (expected the last segment to end at " + std::to_string(u_type.qmax()) +
                         ")");
      }
      break;
    }
  }
  return table;
}

std::string FormatTable(const TableData& table, const Convention& c) {
  std::string out;
  switch (table.kind) {
    case TableKind::lut:
      out = "u,y\n";
      for (size_t i = 0; i < table.lut.size(); ++i) {
        out += std::to_string(c.intermediate.q.type.qmin() + static_cast<int32_t>(i)) + "," +
               std::to_string(table.lut[i]) + "\n";
      }
      break;
    case TableKind::lut_interp:
      out = "index,value\n";
      for (size_t i = 0; i < table.knots.size(); ++i) out += std::to_string(i) + "," + std::to_string(table.knots[i]) + "\n";
      break;
    case TableKind::pwl:
      out = "u_lo,u_hi,slope,offset,shift\n";
      for (const PwlSegment& s : table.segments) {
        out += std::to_string(s.u_lo) + "," + std::to_string(s.u_hi) + "," + std::to_string(s.slope) + "," +
               std::to_string(s.offset) + "," + std::to_string(s.shift) + "\n";
      }
      break;
  }
  return out;
}

}  // namespace fusediff::tables
