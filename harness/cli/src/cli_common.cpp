#include <algorithm>
#include <charconv>
#include <filesystem>
#include <thread>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/model/errors.h"

namespace fusediff::cli {

namespace {
std::string ShellQuote(const std::string& arg) {
  if (!arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-./:=,+@") ==
                          std::string::npos) {
    return arg;
  }
  std::string out = "'";
  for (char ch : arg) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
  return out + "'";
}

}  // namespace

std::string JoinCommandLine(const std::vector<std::string>& args) {
  std::string out;
  for (const std::string& a : args) out += (out.empty() ? "" : " ") + ShellQuote(a);
  return out;
}

void CheckOutputPath(const std::string& path, const char* option) {
  const std::filesystem::path p(path);
  const std::filesystem::path dir = p.has_parent_path() ? p.parent_path() : std::filesystem::path(".");
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    throw InputError(std::string(option) + ": folder '" + dir.string() + "' does not exist");
  }
  if (std::filesystem::is_directory(p, ec)) throw InputError(std::string(option) + ": '" + path + "' is a folder");
}

unsigned ResolveThreads(const std::string& text, const char* option) {
  if (text.empty()) return std::max(1u, std::thread::hardware_concurrency());  // 0 when unknown
  long long n = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > 1024) {
    throw InputError(std::string(option) + ": '" + text + "' is not a thread count (an integer from 1 to 1024)");
  }
  return static_cast<unsigned>(n);
}

}  // namespace fusediff::cli
