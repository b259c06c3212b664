// `fusediff patterns --list`: the fusion patterns, their stages and the fused variants the built-in path offers.
#include <ostream>

#include "command.h"
#include "fusediff/model/pattern.h"

namespace fusediff::cli {

Command AddPatternsCommand(CLI::App& app) {
  CLI::App* patterns = app.add_subcommand("patterns", "The fusion patterns fusediff knows (--list)");
  auto list = std::make_shared<bool>(false);
  patterns->add_flag("--list", *list, "List every pattern with its stages and fusions (the default)");
  return Command{patterns, [](const CommandContext& context) {
                   for (const PatternInfo& info : known_patterns()) {
                     std::string fusions;
                     for (Fusion f : info.fusions) fusions += (fusions.empty() ? "" : ", ") + std::string(to_string(f));
                     context.out << info.name << "\n  " << info.description << "\n  fusions: " << fusions << "\n";
                   }
                   return 0;
                 }};
}

}  // namespace fusediff::cli
