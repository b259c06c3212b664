#include <memory>
#include <ostream>
#include <string>

#include "command.h"
#include "fusediff/cli/cli.h"
#include "fusediff/driver/driver.h"
#include "fusediff/reports/reports.h"

namespace fusediff::cli {

Command AddReplayCommand(CLI::App& app) {
  auto replay_string = std::make_shared<std::string>();
  CLI::App* replay = app.add_subcommand("replay", "Re-run one sample from its replay string, showing every stage");
  replay->add_option("replay", *replay_string, "The replay string printed with a failing sample")->required();
  return Command{replay, [replay_string](const CommandContext& ctx) {
                   ctx.out << reports::RenderReplay(driver::Replay(parse_replay(*replay_string)));
                   return kExitPass;
                 }};
}

}  // namespace fusediff::cli
