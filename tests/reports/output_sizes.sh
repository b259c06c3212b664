#!/usr/bin/env bash
# The three jobs at the sizes CI takes (issue 24), end to end on the default suite: the default run's stdout is at
# most 60 lines and ends with the closing line, its results JSON at most 2 MB; seed 1 against seed 2 compares clean
# (exit 0, the rule printed); a mutant night against the baseline exits 1 naming the mutant; the Markdown reports
# stay under 60,000 characters and the HTML under 2 MB. Prints every size it checked.
# Usage: output_sizes.sh FUSEDIFF_BINARY WORK_DIR
set -uo pipefail
fusediff=$1
work=$2
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
unset GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE \
  JOB_COMPLETION_INDEX FUSEDIFF_SHARD_COUNT SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_STEP
export OMP_NUM_THREADS=1
fail() { echo "FAIL: $*" >&2; exit 1; }
at_most() {  # FILE LIMIT WHAT: bytes (characters: the reports are ASCII)
  local size
  size=$(stat -c %s "$1")
  (( size <= $2 )) || fail "$3 $1 is $size bytes (limit $2)"
  echo "$3 $1: $size bytes"
}

"$fusediff" run --json s1.json > run1.txt
code=$?
[[ $code -eq 0 ]] || fail "the default run exited $code"
lines=$(wc -l < run1.txt)
(( lines <= 60 )) || fail "the default run printed $lines lines (limit 60)"
tail -n 1 run1.txt | grep -Eq '^[0-9]+ passed, 0 failed, .*; [0-9]+ cases, seed 1$' ||
  fail "the default run's last line is not the closing line: $(tail -n 1 run1.txt)"
echo "default run stdout: $lines lines, $(stat -c %s run1.txt) bytes; closing line: $(tail -n 1 run1.txt)"
at_most s1.json 2000000 "default run results"
"$fusediff" report s1.json --html s1.html --md s1.md || fail "report of the default run"
at_most s1.md 59999 "default run Markdown"
at_most s1.html 1999999 "default run HTML"

"$fusediff" run --seed 2 --json s2.json > /dev/null || fail "the seed-2 run failed"
"$fusediff" compare s1.json s2.json > compare12.txt
code=$?
[[ $code -eq 0 ]] || { cat compare12.txt; fail "seed 1 against seed 2 exited $code"; }
grep -q "^rule: [0-9]* cases on different samples: .* Holm at family-wise level 0.01: 0 significant" compare12.txt ||
  fail "the compare does not say why: $(cat compare12.txt)"
echo "compare seed 1 / seed 2: exit 0, $(wc -l < compare12.txt) lines; $(tail -n 1 compare12.txt)"

"$fusediff" run --mutant use-output-scale --json mutant.json > mutant.txt
[[ $? -eq 1 ]] || fail "the mutant night did not fail"
"$fusediff" compare s1.json mutant.json > compare_mutant.txt
code=$?
[[ $code -eq 1 ]] || fail "the mutant night against the baseline exited $code, expected 1"
grep -q "^gelu_erf.int8.lut.conv: REGRESSION (mutant: none -> use-output-scale): verdict pass -> fail" compare_mutant.txt ||
  fail "the mutant's effect is not named: $(head -5 compare_mutant.txt)"
echo "compare against the mutant night: exit 1, $(wc -l < compare_mutant.txt) lines; $(tail -n 1 compare_mutant.txt)"
"$fusediff" report mutant.json --html mutant.html --md mutant.md || fail "report of the mutant night"
at_most mutant.md 59999 "mutant night Markdown"
at_most mutant.html 1999999 "mutant night HTML"
echo "output sizes: within the limits"
