#!/bin/bash
# The offline mode end to end: the default suite's draws exported for the C example plugin, answered by
# `fusediff plugin-host --offline` (as a simulator would, from the files alone), read back by `run --fused offline:`
# through the same comparison: exit 0. A missing answer is an error (exit 2), never a pass.
# Usage: offline_roundtrip_test.sh FUSEDIFF PLUGIN.so OUT_DIR [run options...]
set -u
fusediff=$1 plugin=$2 out=$3
shift 3
rm -rf "$out" && mkdir -p "$out"
fail() { echo "offline round trip: $*"; exit 1; }
"$fusediff" export-draws "$out/draws" --like "plugin:$plugin" "$@" >"$out/export.txt" 2>&1 ||
  { cat "$out/export.txt"; fail "export-draws failed"; }
runs=$(find "$out/draws" -name 'run-*.fdf' | wc -l)
[ "$runs" -gt 0 ] || fail "no batch exported"
# Reading back before anything answered: exit 2, naming what is missing.
"$fusediff" run --fused "offline:$out/draws" "$@" >"$out/unanswered.txt" 2>&1
[ $? = 2 ] || { cat "$out/unanswered.txt"; fail "reading unanswered draws did not exit 2"; }
grep -q 'has no answers' "$out/unanswered.txt" || { cat "$out/unanswered.txt"; fail "no clear error"; }
"$fusediff" plugin-host "$plugin" --offline "$out/draws" >"$out/answer.txt" 2>&1 ||
  { cat "$out/answer.txt"; fail "plugin-host --offline failed"; }
results=$(find "$out/draws" -name 'result-*.fdf' | wc -l)
"$fusediff" run --fused "offline:$out/draws" --json "$out/r.json" "$@" >"$out/run.txt" 2>&1 ||
  { cat "$out/run.txt"; fail "run --fused offline: did not exit 0"; }
tail -1 "$out/run.txt"
echo "offline round trip: $runs batches exported, $results answered; as expected"
