#!/usr/bin/env python3
"""Tables of a `fusediff run --fused onednn --isa all --json FILE` matrix (fusediff-isa-matrix/1), as Markdown:
per cap and producer implementation the judged samples and exact % (same-convention cases), per cap and ledger
entry the samples it explains, and per cap the cases per verdict. Usage: python3 scripts/isa_table.py FILE"""
import collections
import json
import sys

VERDICTS = ("pass", "documented_behaviour", "known_defect", "fail", "nondeterministic", "unsupported", "cross_convention")


def main(path):
    isas = json.load(open(path))["isas"]
    reached = [i for i in isas if i["available"]]
    print("| cap (dispatch) | producer implementation | judged samples | exact % | max abs e |")
    print("|---|---|--:|--:|--:|")
    for isa in reached:
        judged = collections.defaultdict(lambda: [0, 0, 0])  # samples, exact, max |e|
        for case in isa["results"]["cases"]:
            if case.get("comparison") == "cross_convention":
                continue
            for name, stats in case.get("by_implementation", {}).items():
                j = judged[name.split(";")[0]]
                j[0] += stats["count"]
                j[1] += round(stats["exact_fraction"] * stats["count"])
                j[2] = max(j[2], stats["max_abs"])
        for name, (samples, exact, worst) in sorted(judged.items()):
            print(f"| {isa['cap']} ({isa['effective_isa']}) | `{name}` | {samples} | {100.0 * exact / samples:.3f} | {worst} |")
    print("\n| cap (dispatch) | ledger entry | kind | cases | explained samples |")
    print("|---|---|---|--:|--:|")
    for isa in reached:
        entries = collections.defaultdict(lambda: [0, 0])
        for case in isa["results"]["cases"]:
            for key, kind in (("known_defects", "known defect"), ("documented_behaviours", "documented behaviour")):
                for tally in case.get(key, []):
                    entries[(tally["id"], kind)][0] += 1
                    entries[(tally["id"], kind)][1] += tally["explained"]["count"]
        for (entry, kind), (cases, samples) in sorted(entries.items()):
            print(f"| {isa['cap']} ({isa['effective_isa']}) | {entry} | {kind} | {cases} | {samples} |")
    print("\n| cap (dispatch) | " + " | ".join(VERDICTS) + " | exit |")
    print("|---|" + "--:|" * (len(VERDICTS) + 1))
    for isa in isas:
        if not isa["available"]:
            print(f"| {isa['cap']} | not reachable on this CPU (oneDNN dispatches to {isa['effective_isa']}) |")
            continue
        counts = collections.Counter(c["verdict"] for c in isa["results"]["cases"])
        print(f"| {isa['cap']} ({isa['effective_isa']}) | " + " | ".join(str(counts[v]) for v in VERDICTS) +
              f" | {isa['exit_code']} |")


if __name__ == "__main__":
    main(sys.argv[1])
