#pragma once
// JSON input read strictly: nlohmann-json's parser, plus a refusal of duplicate keys. RFC 8259 leaves a
// repeated name's meaning open and nlohmann keeps the last one silently, so a file that says a field twice
// could pass review with one value and be read with the other. Every file fusediff reads as input goes
// through strict_json::Parse.
#include <cstddef>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fusediff/model/errors.h"

namespace fusediff::strict_json {

namespace detail {

// Walks the text for nlohmann's parser and counts the newlines it has consumed, so a parser callback knows
// its line: nlohmann reads each character exactly once and calls back for a key right after its closing quote.
class LineCountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  LineCountingIterator(const char* at, size_t* newlines) : at_(at), newlines_(newlines) {}
  reference operator*() const { return *at_; }
  LineCountingIterator& operator++() {
    if (*at_ == '\n') ++*newlines_;
    ++at_;
    return *this;
  }
  LineCountingIterator operator++(int) {
    LineCountingIterator before = *this;
    ++*this;
    return before;
  }
  friend bool operator==(const LineCountingIterator& a, const LineCountingIterator& b) { return a.at_ == b.at_; }
  friend bool operator!=(const LineCountingIterator& a, const LineCountingIterator& b) { return a.at_ != b.at_; }

 private:
  const char* at_;
  size_t* newlines_;
};

// Where the parser is: one frame per open object or array.
class DuplicateKeyCheck {
 public:
  DuplicateKeyCheck(const std::string& file, const size_t* newlines) : file_(file), newlines_(newlines) {}

  bool operator()(int /*depth*/, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
    using Event = nlohmann::json::parse_event_t;
    switch (event) {
      case Event::object_start: frames_.push_back(Frame{false, 0, {}, {}}); break;
      case Event::array_start: frames_.push_back(Frame{true, 0, {}, {}}); break;
      case Event::key: Key(parsed.get_ref<const std::string&>()); break;
      case Event::object_end:
      case Event::array_end:
        frames_.pop_back();
        ValueDone();
        break;
      case Event::value: ValueDone(); break;
    }
    return true;  // keep everything: the check only refuses, it never filters
  }

 private:
  struct Frame {
    bool array;
    size_t index;                              // array: elements completed so far
    std::string key;                           // object: the key being read
    std::map<std::string, size_t> first_line;  // object: each key's line
  };

  void Key(const std::string& key) {
    Frame& object = frames_.back();
    const size_t line = *newlines_ + 1;
    if (const auto it = object.first_line.find(key); it != object.first_line.end()) {
      throw InputError(file_ + " line " + std::to_string(line) + ": " + Path(key) + ": duplicate key (first on line " +
                       std::to_string(it->second) + "; each key may appear once per object)");
    }
    object.first_line.emplace(key, line);
    object.key = key;
  }
  void ValueDone() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }
  // "tolerances[1].table": the enclosing keys and indices, then `key`.
  std::string Path(const std::string& key) const {
    std::string path;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      const Frame& f = frames_[i];
      if (f.array) {
        path += '[';
        path += std::to_string(f.index);
        path += ']';
      } else {
        if (!path.empty()) path += '.';
        path += f.key;
      }
    }
    if (!path.empty()) path += '.';
    return path += key;
  }

  const std::string& file_;
  const size_t* newlines_;
  std::vector<Frame> frames_;
};

}  // namespace detail

// nlohmann::json::parse of `text`, except that a key repeated within one object throws
// InputError("FILE line L: PATH: duplicate key (first on line K; ...)"), PATH as in "tolerances[1].table".
// Syntax errors still throw nlohmann::json::parse_error (each caller words its own message).
inline nlohmann::json Parse(std::string_view text, const std::string& file) {
  size_t newlines = 0;
  const detail::LineCountingIterator first(text.data(), &newlines);
  const detail::LineCountingIterator last(text.data() + text.size(), &newlines);
  return nlohmann::json::parse(first, last, detail::DuplicateKeyCheck(file, &newlines));
}

}  // namespace fusediff::strict_json
