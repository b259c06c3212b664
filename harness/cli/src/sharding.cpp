#include "sharding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <fstream>
#include <optional>
#include <vector>

#include "fusediff/model/errors.h"

namespace fusediff::cli {

namespace {
uint32_t ParseCount(const std::string& text, const std::string& what) {
  if (text.empty() || text.size() > 9 || text.find_first_not_of("0123456789") != std::string::npos) {
    throw InputError(what + ": expected a non-negative integer, got '" + text + "'");
  }
  return static_cast<uint32_t>(std::stoul(text));
}

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// One source's view of the shard. A count alone (FUSEDIFF_SHARD_COUNT or --shard-count without
// JOB_COMPLETION_INDEX) has no index; JOB_COMPLETION_INDEX alone has no count.
struct Candidate {
  std::string source;
  std::string index_name, count_name;  // the flag or variable each value came from, for messages
  std::optional<uint32_t> index, count;
  std::string origin;  // "GTEST_SHARD_INDEX=2, GTEST_TOTAL_SHARDS=3"
};

Candidate Checked(Candidate c) {
  if (c.count && *c.count == 0) {
    throw InputError(fmt::format("{}: expected a shard count of at least 1, got 0 ({})", c.count_name, c.origin));
  }
  if (c.index && c.count && *c.index >= *c.count) {
    throw InputError(fmt::format("{}: expected a shard index I with 0 <= I < N = {}, got I = {} ({})", c.index_name,
                                 *c.count, *c.index, c.origin));
  }
  return c;
}

std::optional<Candidate> FromFlag(const std::string& flag) {
  if (flag.empty()) return std::nullopt;
  const size_t slash = flag.find('/');
  if (slash == std::string::npos) throw InputError("--shard: expected I/N (e.g. 0/4), got '" + flag + "'");
  return Checked({"flag", "--shard", "--shard", ParseCount(flag.substr(0, slash), "--shard"),
                  ParseCount(flag.substr(slash + 1), "--shard"), "--shard " + flag});
}

// Bazel's and GoogleTest's variables come in pairs.
std::optional<Candidate> FromPair(const char* source, const char* index_name, const char* count_name) {
  const char* index = Env(index_name);
  const char* count = Env(count_name);
  if (!index && !count) return std::nullopt;
  if (!index || !count) {
    throw InputError(fmt::format("{}: expected it to be set together with {}", index ? count_name : index_name,
                                 index ? index_name : count_name));
  }
  return Checked({source, index_name, count_name, ParseCount(index, index_name), ParseCount(count, count_name),
                  fmt::format("{}={}, {}={}", index_name, index, count_name, count)});
}

// A Kubernetes Indexed Job exports JOB_COMPLETION_INDEX but not the number of completions.
std::optional<Candidate> FromKubernetes(const std::string& count_flag) {
  const char* index = Env("JOB_COMPLETION_INDEX");
  const char* env_count = Env("FUSEDIFF_SHARD_COUNT");
  if (!index && !env_count && count_flag.empty()) return std::nullopt;
  Candidate c{"kubernetes", "JOB_COMPLETION_INDEX", "", std::nullopt, std::nullopt, ""};
  std::vector<std::string> origin;
  if (index) {
    c.index = ParseCount(index, "JOB_COMPLETION_INDEX");
    origin.push_back(fmt::format("JOB_COMPLETION_INDEX={}", index));
  }
  if (!count_flag.empty()) {
    c.count = ParseCount(count_flag, "--shard-count");
    c.count_name = "--shard-count";
    origin.push_back("--shard-count " + count_flag);
  }
  if (env_count) {
    const uint32_t count = ParseCount(env_count, "FUSEDIFF_SHARD_COUNT");
    if (c.count && *c.count != count) {
      throw InputError(fmt::format("FUSEDIFF_SHARD_COUNT: expected the same count as --shard-count {}, got {}",
                                   *c.count, count));
    }
    if (!c.count) {
      c.count = count;
      c.count_name = "FUSEDIFF_SHARD_COUNT";
      origin.push_back(fmt::format("FUSEDIFF_SHARD_COUNT={}", env_count));
    }
  }
  c.origin = fmt::format("{}", fmt::join(origin, ", "));
  if (c.index && !c.count) c.count_name = "--shard-count or FUSEDIFF_SHARD_COUNT";
  return Checked(std::move(c));
}

// A Slurm job array: task ids MIN, MIN + STEP, ..., COUNT of them.
std::optional<Candidate> FromSlurm() {
  const char* id = Env("SLURM_ARRAY_TASK_ID");
  const char* min = Env("SLURM_ARRAY_TASK_MIN");
  const char* count = Env("SLURM_ARRAY_TASK_COUNT");
  const char* step = Env("SLURM_ARRAY_TASK_STEP");
  if (!id && !min && !count) return std::nullopt;
  for (const auto& [value, name] : {std::pair{id, "SLURM_ARRAY_TASK_ID"}, std::pair{min, "SLURM_ARRAY_TASK_MIN"},
                                    std::pair{count, "SLURM_ARRAY_TASK_COUNT"}}) {
    if (!value) {
      throw InputError(fmt::format("{}: expected it to be set together with the other Slurm array variables "
                                   "(SLURM_ARRAY_TASK_ID, SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_COUNT)",
                                   name));
    }
  }
  const uint32_t task = ParseCount(id, "SLURM_ARRAY_TASK_ID");
  const uint32_t first = ParseCount(min, "SLURM_ARRAY_TASK_MIN");
  const uint32_t stride = step ? ParseCount(step, "SLURM_ARRAY_TASK_STEP") : 1;
  std::string origin = fmt::format("SLURM_ARRAY_TASK_ID={}, SLURM_ARRAY_TASK_MIN={}", id, min);
  if (step) origin += fmt::format(", SLURM_ARRAY_TASK_STEP={}", step);
  origin += fmt::format(", SLURM_ARRAY_TASK_COUNT={}", count);
  if (stride == 0) throw InputError(fmt::format("SLURM_ARRAY_TASK_STEP: expected at least 1, got 0 ({})", origin));
  if (task < first || (task - first) % stride != 0) {
    throw InputError(fmt::format("SLURM_ARRAY_TASK_ID: expected SLURM_ARRAY_TASK_MIN + a multiple of "
                                 "SLURM_ARRAY_TASK_STEP (an array of evenly spaced ids, e.g. --array=0-3), got {} ({})",
                                 task, origin));
  }
  return Checked({"slurm", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", (task - first) / stride,
                  ParseCount(count, "SLURM_ARRAY_TASK_COUNT"), origin});
}
}  // namespace

Shard ResolveShard(const std::string& flag, const std::string& count_flag) {
  if (const char* status_file = Env("TEST_SHARD_STATUS_FILE")) {
    std::ofstream touch(status_file, std::ios::app);
    if (!touch) throw InputError(std::string("TEST_SHARD_STATUS_FILE: cannot create '") + status_file + "'");
  }
  std::vector<Candidate> present;  // in order of precedence
  for (std::optional<Candidate> c :
       {FromFlag(flag), FromPair("bazel", "TEST_SHARD_INDEX", "TEST_TOTAL_SHARDS"),
        FromPair("googletest", "GTEST_SHARD_INDEX", "GTEST_TOTAL_SHARDS"), FromKubernetes(count_flag), FromSlurm()}) {
    if (c) present.push_back(std::move(*c));
  }
  const Candidate* chosen = nullptr;
  for (const Candidate& c : present) {
    if (c.index) {
      chosen = &c;
      break;
    }
  }
  if (!chosen) {
    if (present.empty()) return Shard{};
    // Only a count: which shard is meant cannot be told.
    throw InputError(fmt::format("{}: a shard count without a shard index ({}): expected JOB_COMPLETION_INDEX (a "
                                 "Kubernetes Indexed Job) or --shard I/N",
                                 present.front().count_name, present.front().origin));
  }
  if (!chosen->count) {
    throw InputError(fmt::format("{}: expected the shard count from --shard-count N or FUSEDIFF_SHARD_COUNT "
                                 "(Kubernetes does not export the number of completions), got none ({})",
                                 chosen->index_name, chosen->origin));
  }
  for (const Candidate& other : present) {
    const bool index_differs = other.index && *other.index != *chosen->index;
    const bool count_differs = other.count && *other.count != *chosen->count;
    if (!index_differs && !count_differs) continue;
    const std::string theirs = other.index && other.count ? fmt::format("shard {}/{}", *other.index, *other.count)
                               : other.index                ? fmt::format("index {}", *other.index)
                                                            : fmt::format("count {}", *other.count);
    throw InputError(fmt::format("{}: two shard sources disagree: {} gives shard {}/{}, {} gives {}; expected them to "
                                 "agree (or only one set)",
                                 index_differs ? other.index_name : other.count_name, chosen->origin, *chosen->index,
                                 *chosen->count, other.origin, theirs));
  }
  return Shard{*chosen->index, *chosen->count, chosen->source, chosen->origin};
}

}  // namespace fusediff::cli
