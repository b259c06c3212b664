#!/bin/bash
# A run whose plugin child crashes or hangs on some draws, end to end through the real binary: exit 1, the lost
# draws' verdict on their cases, every other case compared, and the JSON, JUnit and HTML outputs whole.
# Usage: lost_draws_run_test.sh FUSEDIFF OUT_DIR VERDICT FUSED_WORD [run options...]
set -u
fusediff=$1 out=$2 verdict=$3 word=$4
shift 4
rm -rf "$out" && mkdir -p "$out"
"$fusediff" run --fused "$word" --json "$out/r.json" --junit "$out/r.xml" "$@" >"$out/stdout" 2>"$out/stderr"
status=$?
fail() { echo "lost draws run: $*"; cat "$out/stdout" "$out/stderr"; exit 1; }
[ "$status" = 1 ] || fail "exit $status, expected 1"
"$fusediff" report "$out/r.json" --html "$out/r.html" >/dev/null 2>&1 || fail "report --html failed"
grep -q '</html>' "$out/r.html" || fail "the HTML report is not whole"
grep -q "type=\"$verdict\"" "$out/r.xml" || fail "no <failure type=\"$verdict\"> in the JUnit"
grep -q '</testsuites>' "$out/r.xml" || fail "the JUnit is not whole"
/usr/bin/python3 - "$out/r.json" "$verdict" <<'PY' || fail "the JSON does not hold what it should"
import json, sys
run = json.load(open(sys.argv[1]))
verdict = sys.argv[2]
cases = run["cases"]
lost = [c for c in cases if c["verdict"] == verdict]
others = [c for c in cases if c["verdict"] not in ("crashed", "timeout")]
field = "crashed" if verdict == "crashed" else "timeout"
assert lost, "no case with verdict " + verdict
for c in lost:
    assert c[field + "_samples"] > 0 and c[field + "_replay"].startswith("fusediff-replay/"), c["name"]
    assert "fused=" in c[field + "_replay"]
assert all(c["complete"] for c in cases)
compared = sum(c["samples"] for c in cases)
assert compared > 0, "nothing compared"
print("%d cases: %d %s (%s samples), %d others, %d samples compared" % (
    len(cases), len(lost), verdict, sum(c[field + "_samples"] for c in lost), len(others), compared))
print("first: " + lost[0][field + "_reason"])
PY
grep -q "$(echo "$verdict" | tr a-z A-Z)" "$out/stdout" || fail "the table does not name the verdict"
echo "lost draws run: as expected"
