#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/model/backend.h"
#include "fusediff/model/errors.h"
#include "fusediff/model/table.h"
#include "fusediff/reports/reports.h"
#include "fusediff/reports/sha256.h"
#include "fusediff/tables/tables.h"

namespace fusediff::cli {

namespace {
// A gate sample names its table by file and SHA-256 (model/case_spec.h): read the file back, and run only on the
// very bytes the sample ran on.
void LoadReplayTable(ReplayKey& key) {
  CaseSpec& s = key.spec;
  if (s.table_fingerprint.empty() || s.table) return;
  std::string bytes;
  try {
    bytes = tables::ReadFileBytes(s.table_file);
  } catch (const InputError& e) {
    throw InputError(std::string("replay.table_file: ") + e.what() + " (a relative path is read from the folder the gate "
                     "ran in)");
  }
  const std::string sha256 = reports::Sha256Hex(bytes);
  if (sha256 != s.table_sha256) {
    throw InputError("replay.table_file: " + s.table_file + " has SHA-256 " + sha256 + ", the sample ran on " +
                     s.table_sha256 + " (the file changed since: gate it again)");
  }
  auto table = std::make_shared<const TableData>(tables::ParseTable(bytes, s.table_file, s.table_kind, s.convention));
  if (table_fingerprint_hex(*table) != s.table_fingerprint) {
    throw InputError("replay.table: " + s.table_file + " reads as table " + table_fingerprint_hex(*table) +
                     ", the sample ran on " + s.table_fingerprint);
  }
  s.table = std::move(table);
}
}  // namespace

Command AddReplayCommand(CLI::App& app) {
  auto replay_string = std::make_shared<std::string>();
  CLI::App* replay = app.add_subcommand("replay", "Re-run one sample from its replay string, showing every stage");
  replay->add_option("replay", *replay_string, "The replay string printed with a failing sample")->required();
  return Command{replay, [replay_string](const CommandContext& ctx) {
                   ReplayKey key = parse_replay(*replay_string);
                   LoadReplayTable(key);
                   // What stood behind the path word then and now (a plugin's version, its draw limits).
                   std::vector<std::string> warnings;
                   BackendOf(key.spec, "replay.fused").CheckReplayFacts(key.spec, &warnings);
                   for (const std::string& w : warnings) ctx.err << "fusediff: warning: " << w << "\n";
                   ctx.out << reports::RenderReplay(driver::Replay(key));
                   return kExitPass;
                 }};
}

}  // namespace fusediff::cli
