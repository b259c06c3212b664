// JUnit XML in the shape Jenkins, GitLab and GitHub test-report consumers read: <testsuites><testsuite> with one
// <testcase> per case.
#include <fmt/format.h>

#include <string>

#include "fusediff/reports/reports.h"

namespace fusediff::reports {

std::string ToJUnit(const RunResult& run) {
  size_t failures = 0, skipped = 0;
  for (const CaseResult& c : run.cases) {
    failures += fails_run(c.verdict);
    skipped += c.verdict == Verdict::unsupported || c.verdict == Verdict::cross_convention;
  }
  std::string out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  out += fmt::format("<testsuites name=\"fusediff\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
                     run.cases.size(), failures, skipped);
  out += fmt::format("  <testsuite name=\"fusediff\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" timestamp=\"{}\">\n",
                     run.cases.size(), failures, skipped, XmlEscape(run.provenance.created));
  out += fmt::format("    <properties>\n      <property name=\"seed\" value=\"{}\"/>\n"
                     "      <property name=\"sample_set\" value=\"{}\"/>\n      <property name=\"shard\" value=\"{}/{}\"/>\n"
                     "      <property name=\"complete\" value=\"{}\"/>\n      <property name=\"tool\" value=\"{} {}\"/>\n"
                     "    </properties>\n",
                     run.seed, SampleSetId(run), run.shard_index, run.shard_count, run.complete ? "true" : "false",
                     XmlEscape(run.provenance.tool_version), XmlEscape(run.provenance.git_commit));
  for (const CaseResult& c : run.cases) {
    out += fmt::format("    <testcase classname=\"fusediff\" name=\"{}\" time=\"{:.3f}\"", XmlEscape(c.spec.name), c.seconds);
    const ErrorStats& s = c.stats.overall;
    if (c.verdict == Verdict::pass && c.known_defects.empty()) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    if (!c.known_defects.empty()) {
      // Not a failure and not skipped: the ledger's tallies as properties, with their first replays as output.
      out += "      <properties>\n";
      std::string text;
      for (const KnownDefectTally& t : c.known_defects) {
        out += fmt::format("        <property name=\"{}.{}\" value=\"{}\"/>\n", to_string(t.kind), XmlEscape(t.id),
                           XmlEscape(t.no_longer_reproduces()
                                   ? fmt::format("no longer reproduces ({} draws met its conditions)", t.draws)
                                   : t.withheld_samples > 0
                                   ? fmt::format("{} samples not executed (the library crashes on their draws), in {} draws",
                                                 t.withheld_samples, t.draws)
                                   : fmt::format("{} samples explained, max |e| = {} LSB, in {} draws", t.stats.overall.count(),
                                                 t.stats.overall.max_abs(), t.draws)));
        if (!t.worst.empty()) {
          text += fmt::format("{} {}: e={:+d} sample {}\n  fusediff replay '{}'\n", to_string(t.kind), t.id,
                              t.worst.front().sample.error, t.worst.front().sample.sample, t.worst.front().replay);
        }
      }
      out += "      </properties>\n";
      if (!text.empty()) out += fmt::format("      <system-out>{}</system-out>\n", XmlEscape(text));
    }
    if (c.verdict == Verdict::pass || c.verdict == Verdict::known_defect || c.verdict == Verdict::documented_behaviour) {
      // nothing more: the case passed, or its only differences are the ledger's
    } else if (c.verdict == Verdict::unsupported) {
      out += fmt::format("      <skipped message=\"{}\"/>\n", XmlEscape("unsupported: " + c.reason));
    } else if (c.verdict == Verdict::cross_convention) {
      // Measured, never judged: a skipped test case that carries the measurement.
      out += fmt::format("      <skipped message=\"{}\"/>\n",
                         XmlEscape(fmt::format("{}; exact {:.3f} %, max |e| = {} LSB", c.reason, 100.0 * s.exact_fraction(),
                                         s.max_abs())));
    } else if (c.verdict == Verdict::crashed || c.verdict == Verdict::timeout) {
      // The path's process lost draws: the first one's replay line, and every kind of loss in the body.
      const LostSamples& first = c.verdict == Verdict::crashed ? c.crashed : c.timed_out;
      std::string body;
      for (const LostSamples* lost : {&c.crashed, &c.timed_out}) {
        if (lost->samples == 0) continue;
        body += fmt::format("{} samples {} (first: sample {}): {}\n  fusediff replay '{}'\n", lost->samples,
                            lost == &c.crashed ? "crashed" : "timed out", lost->first_sample, lost->reason, lost->replay);
      }
      out += fmt::format("      <failure message=\"{}\" type=\"{}\">{}</failure>\n",
                         XmlEscape(fmt::format("{}; replay: fusediff replay '{}'", c.reason, first.replay)),
                         to_string(c.verdict), XmlEscape(body));
    } else {
      std::string message = fmt::format("{}; max |e| = {} LSB (tolerance {})", c.reason, s.max_abs(), c.tolerance.max_abs_lsb);
      std::string body = c.reference_convention + "\n";
      if (!c.worst.empty()) {
        const WorstCaseReport& w = c.worst.front();
        message += fmt::format("; worst e={:+d} at sample {}; replay: fusediff replay '{}'", w.sample.error, w.sample.sample, w.replay);
      }
      for (const WorstCaseReport& w : c.worst) {
        body += fmt::format("e={:+d} sample {} u={} y_ref={} y_fused={}\n  fusediff replay '{}'\n", w.sample.error,
                            w.sample.sample, w.sample.u, w.sample.y_ref, w.sample.y_fused, w.replay);
      }
      out += fmt::format("      <failure message=\"{}\" type=\"tolerance\">{}</failure>\n", XmlEscape(message), XmlEscape(body));
    }
    out += "    </testcase>\n";
  }
  out += "  </testsuite>\n</testsuites>\n";
  return out;
}

}  // namespace fusediff::reports
