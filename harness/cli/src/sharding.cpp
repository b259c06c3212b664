#include "sharding.h"

#include <cstdlib>
#include <fstream>

#include "fusediff/model/errors.h"

namespace fusediff::cli {

namespace {
uint32_t ParseCount(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw InputError(what + ": expected a non-negative integer, got '" + text + "'");
  }
  return static_cast<uint32_t>(std::stoul(text));
}

Shard Checked(uint32_t index, uint32_t count, const std::string& what) {
  if (count == 0 || index >= count) {
    throw InputError(what + ": expected shard index I and count N with 0 <= I < N, got " + std::to_string(index) + "/" +
                     std::to_string(count));
  }
  return Shard{index, count};
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
}  // namespace

Shard ResolveShard(const std::string& flag) {
  if (const char* status_file = Env("TEST_SHARD_STATUS_FILE")) {
    std::ofstream touch(status_file, std::ios::app);
    if (!touch) throw InputError(std::string("TEST_SHARD_STATUS_FILE: cannot create '") + status_file + "'");
  }
  if (!flag.empty()) {
    const size_t slash = flag.find('/');
    if (slash == std::string::npos) throw InputError("--shard: expected I/N (e.g. 0/4), got '" + flag + "'");
    return Checked(ParseCount(flag.substr(0, slash), "--shard"), ParseCount(flag.substr(slash + 1), "--shard"), "--shard");
  }
  for (const auto& [total_name, index_name] : {std::pair{"TEST_TOTAL_SHARDS", "TEST_SHARD_INDEX"},
                                               std::pair{"GTEST_TOTAL_SHARDS", "GTEST_SHARD_INDEX"}}) {
    const char* total = Env(total_name);
    const char* index = Env(index_name);
    if (!total && !index) continue;
    if (!total || !index) {
      throw InputError(std::string(total ? index_name : total_name) + ": expected it to be set together with " +
                       (total ? total_name : index_name));
    }
    const std::string what = std::string(index_name) + "/" + total_name;
    return Checked(ParseCount(index, index_name), ParseCount(total, total_name), what);
  }
  return Shard{};
}

}  // namespace fusediff::cli
