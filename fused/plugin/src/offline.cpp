// The offline mode (docs/plugins.md, "Offline mode"): the batches written as files, the answers read back.
#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <filesystem>
#include <fstream>
#include <map>
#include <ostream>

#include "fusediff/fused/plugin_subprocess.h"
#include "fusediff/model/errors.h"

namespace fusediff::fused::plugin {

namespace fs = std::filesystem;

namespace {

std::string Fnv16(std::string_view text) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : text) {
    h ^= static_cast<unsigned char>(c);
    h *= 0x100000001b3ull;
  }
  return fmt::format("{:016x}", h);
}

Frame ReadFrameFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path.string() + ": cannot open");
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  try {
    return Frame::Decode(std::as_bytes(std::span<const char>(bytes)));
  } catch (const FrameError& e) {
    throw InputError(path.string() + ": " + e.what());
  }
}

// Written to a temporary name and renamed: a reader never sees half a file.
void WriteFrameFile(const fs::path& path, const Frame& frame) {
  const std::vector<std::byte> bytes = frame.Encode();
  const fs::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    if (!out) throw InputError(temporary.string() + ": cannot write");
  }
  fs::rename(temporary, path);
}

std::string BatchName(const char* kind, size_t n) { return fmt::format("{}-{:06}.fdf", kind, n); }

// What offline claims: DIR/hello.json where it is there (the answerer's hello reply: `export-draws --like`, or written
// by hand), else every feature (the answerer rejects at prepare what it cannot compute), the graph's arithmetic
// and the host's default draw limits. The export and the read-back both use it, so they draw the same draws.
PluginHello OfflineHello(const std::string& dir) {
  const fs::path file = fs::path(dir) / "hello.json";
  if (fs::exists(file)) {
    std::ifstream in(file);
    Frame reply("hello");
    try {
      reply.header = nlohmann::json::parse(in);
      return HelloFromReply(reply);
    } catch (const nlohmann::json::exception& e) {
      throw InputError(file.string() + ": " + e.what());
    } catch (const ProtocolError& e) {
      throw InputError(file.string() + ": " + e.what());
    }
  }
  // Built whole, not assigned field by field: GCC 12's -Wrestrict misfires on assigning a short literal here.
  return PluginHello{std::string("offline"), std::string("1"), FUSEDIFF_PLUGIN_ABI_MAJOR, FUSEDIFF_PLUGIN_ABI_MINOR,
                     {std::string("*")}, PluginDeclaration{}};
}

class OfflineTransport : public Transport {
 public:
  OfflineTransport(std::string dir, bool export_draws) : dir_(std::move(dir)), export_(export_draws) {}
  PluginHello Hello() override { return OfflineHello(dir_); }

  std::string Prepare(const PluginCase& c) override {
    case_dir_ = fs::path(dir_) / CaseDigest(c);
    next_batch_ = 0;
    answers_.clear();
    if (export_) {
      fs::create_directories(case_dir_);
      WriteFrameFile(case_dir_ / "prepare.fdf", PrepareRequest(c));
      return "";
    }
    const std::string where = "offline:" + dir_;
    if (!fs::exists(case_dir_ / "prepare.fdf")) {
      throw InputError(fmt::format("{}: case '{}' was not exported ({} is missing: run fusediff export-draws with the "
                                   "same options)",
                                   where, c.name, (case_dir_ / "prepare.fdf").string()));
    }
    if (!fs::exists(case_dir_ / "prepared.fdf")) {
      throw InputError(fmt::format("{}: case '{}' has no answers ({} is missing)", where, c.name,
                                   (case_dir_ / "prepared.fdf").string()));
    }
    const Frame prepared = ReadFrameFile(case_dir_ / "prepared.fdf");
    if (prepared.type() == "rejected") {
      const auto it = prepared.header.find("reason");
      return it != prepared.header.end() && it->is_string() ? it->get<std::string>() : "rejected (no reason given)";
    }
    try {
      ExpectReply(prepared, "prepared", "prepare");
    } catch (const ProtocolError& e) {
      throw InputError((case_dir_ / "prepared.fdf").string() + ": " + e.what());
    }
    LoadAnswers();
    return "";
  }

  void Run(std::span<const PatternDraw> draws, std::span<const std::span<int32_t>> y,
           std::span<DrawOutcome> outcomes) override {
    if (export_) {
      std::vector<size_t> counts;
      for (const std::span<int32_t>& out : y) counts.push_back(out.size());
      const std::string name = BatchName("run", next_batch_++);
      WriteFrameFile(case_dir_ / name, EncodeRun(draws, counts));
      for (DrawOutcome& o : outcomes) o = DrawOutcome{DrawOutcome::Status::rejected, "exported to " + name, ""};
      return;
    }
    for (size_t i = 0; i < draws.size(); ++i) {
      const auto it = answers_.find(DrawDigest(draws[i]));
      if (it == answers_.end()) {
        throw InputError(fmt::format("offline:{}: {} has no answer for a draw of this run (draw {}): were the draws "
                                     "exported with the same options (seed, samples, shard)?",
                                     dir_, case_dir_.string(), DrawDigest(draws[i])));
      }
      const Answer& a = it->second;
      if (a.outcome.status == DrawOutcome::Status::ok && a.y.size() != y[i].size()) {
        throw InputError(fmt::format("offline:{}: the answer to draw {} has {} outputs, the draw {}", dir_, it->first,
                                     a.y.size(), y[i].size()));
      }
      std::copy(a.y.begin(), a.y.end(), y[i].begin());
      outcomes[i] = a.outcome;
    }
  }
  void Close() override {}

 private:
  struct Answer {
    std::vector<int32_t> y;
    DrawOutcome outcome;
  };
  // Every answered batch of the case, by draw digest.
  void LoadAnswers() {
    for (size_t n = 0; fs::exists(case_dir_ / BatchName("run", n)); ++n) {
      const fs::path result = case_dir_ / BatchName("result", n);
      if (!fs::exists(result)) continue;  // an unanswered batch: its draws report themselves when asked for
      std::vector<size_t> counts;
      const std::vector<PatternDraw> draws = DecodeRun(ReadFrameFile(case_dir_ / BatchName("run", n)), &counts);
      std::vector<Answer> answers(draws.size());
      std::vector<std::span<int32_t>> y;
      std::vector<DrawOutcome> outcomes(draws.size());
      for (size_t i = 0; i < draws.size(); ++i) {
        answers[i].y.assign(counts[i], INT32_MIN);
        y.emplace_back(answers[i].y);
      }
      try {
        DecodeResult(ReadFrameFile(result), y, outcomes);
      } catch (const ProtocolError& e) {
        throw InputError(result.string() + ": " + e.what());
      }
      for (size_t i = 0; i < draws.size(); ++i) {
        answers[i].outcome = outcomes[i];
        if (outcomes[i].status != DrawOutcome::Status::ok) answers[i].y.clear();
        answers_[DrawDigest(draws[i])] = std::move(answers[i]);
      }
    }
  }

  std::string dir_;
  bool export_;
  fs::path case_dir_;
  size_t next_batch_ = 0;
  std::map<std::string, Answer> answers_;
};

}  // namespace

std::string CaseDigest(const PluginCase& c) { return Fnv16(ToJson(c).dump()); }

void WriteOfflineHello(const std::string& dir, const PluginHello& hello) {
  fs::create_directories(dir);
  nlohmann::json j = HelloReply(hello).header;
  const fs::path file = fs::path(dir) / "hello.json";
  std::ofstream out(file.string() + ".tmp");
  out << j.dump(2) << "\n";
  if (!out) throw InputError(file.string() + ": cannot write");
  out.close();
  fs::rename(file.string() + ".tmp", file);
}

std::unique_ptr<Transport> OpenOffline(std::string dir, bool export_draws) {
  return std::make_unique<OfflineTransport>(std::move(dir), export_draws);
}

std::unique_ptr<Transport> OpenOfflineWord(const PluginAddress& a) {
  if (!a.options.empty()) throw InputError("offline:" + a.target + ": takes no options");
  return OpenOffline(a.target, subprocess_settings().export_draws);
}

size_t AnswerOffline(const std::string& dir, Transport& transport, std::ostream& log) {
  if (!fs::is_directory(dir)) throw InputError("--offline " + dir + ": not a folder");
  std::vector<fs::path> cases;
  for (const fs::directory_entry& e : fs::directory_iterator(dir)) {
    if (e.is_directory() && fs::exists(e.path() / "prepare.fdf")) cases.push_back(e.path());
  }
  std::sort(cases.begin(), cases.end());
  const PluginHello hello = transport.Hello();
  size_t answered = 0;
  for (const fs::path& c : cases) {
    const Frame prepare = ReadFrameFile(c / "prepare.fdf");
    const PluginCase pc = PluginCaseFromJson(prepare.header.value("case", nlohmann::json()), (c / "prepare.fdf").string() + ": case");
    // The plugin gets only the cases whose features it claims, as in a run.
    std::string why;
    for (const std::string& f : pc.features) {
      if (std::find(hello.features.begin(), hello.features.end(), f) == hello.features.end()) {
        why = "the plugin does not claim feature " + f;
        break;
      }
    }
    if (why.empty()) why = transport.Prepare(pc);
    Frame prepared(why.empty() ? "prepared" : "rejected");
    if (!why.empty()) prepared.header["reason"] = why;
    WriteFrameFile(c / "prepared.fdf", prepared);
    size_t batches = 0;
    for (size_t n = 0; why.empty() && fs::exists(c / BatchName("run", n)); ++n) {
      std::vector<size_t> counts;
      const std::vector<PatternDraw> draws = DecodeRun(ReadFrameFile(c / BatchName("run", n)), &counts);
      std::vector<std::vector<int32_t>> storage;
      std::vector<std::span<int32_t>> y;
      for (size_t count : counts) storage.emplace_back(count, INT32_MIN);
      for (std::vector<int32_t>& v : storage) y.emplace_back(v);
      std::vector<DrawOutcome> outcomes(draws.size());
      transport.Run(draws, y, outcomes);
      WriteFrameFile(c / BatchName("result", n), EncodeResult(y, outcomes));
      ++batches;
    }
    log << pc.name << ": " << (why.empty() ? std::to_string(batches) + " batches answered" : "rejected: " + why) << "\n";
    answered += batches;
  }
  transport.Close();
  return answered;
}

}  // namespace fusediff::fused::plugin
