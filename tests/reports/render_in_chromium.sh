#!/usr/bin/env bash
# Renders the HTML sign-off report in headless Chromium and checks that it loads without errors, that every
# SVG plot has a non-zero laid-out size and that nothing external is fetched; also takes a screenshot.
# The report itself has no script: the probe script below is added to a test copy only.
# Usage: render_in_chromium.sh FUSEDIFF_BINARY WORK_DIR
set -euo pipefail
fusediff=$1
work=$2
rm -rf "$work" && mkdir -p "$work"
unset GTEST_TOTAL_SHARDS GTEST_SHARD_INDEX TEST_TOTAL_SHARDS TEST_SHARD_INDEX TEST_SHARD_STATUS_FILE \
  JOB_COMPLETION_INDEX FUSEDIFF_SHARD_COUNT SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_STEP

chromium=$(command -v chromium || command -v chromium-browser || true)
if [[ -z "$chromium" ]]; then
  echo "FAIL: chromium not found; run 'bash scripts/setup.sh' (it installs Debian's chromium package)" >&2
  exit 1
fi

set +e
"$fusediff" run --activation silu --samples 2000 --mutant use-output-scale --json "$work/results.json" >/dev/null
code=$?
set -e
[[ $code -eq 1 ]] || { echo "FAIL: run exited $code, expected 1 (mutant fails)" >&2; exit 1; }
"$fusediff" report "$work/results.json" --html "$work/signoff.html"
# The gate's page too (issue 24): a table with one knot 5 LSB off, its worse knot listed and its run in a panel.
mkdir -p "$work/table"
cp "$(dirname "$0")/../../examples/silu_int16_lut_interp.json" "$work/table/"
awk -F, 'NR == 302 { $2 += 5 } { print }' OFS=, "$(dirname "$0")/../../examples/silu_int16_lut_interp.csv" \
  > "$work/table/silu_int16_lut_interp.csv"
set +e
"$fusediff" gate "$work/table/silu_int16_lut_interp.json" --samples 1000 --html "$work/gate.html" > "$work/gate.txt"
code=$?
set -e
[[ $code -eq 1 ]] || { echo "FAIL: gate exited $code, expected 1 (a knot 5 LSB off)" >&2; exit 1; }
grep -q '<title>fusediff gate: REJECT (relative mode, k = 1): ' "$work/gate.html" ||
  { echo "FAIL: the gate page's title does not state the verdict" >&2; exit 1; }
for page in signoff gate; do
  if grep -qi '<script' "$work/$page.html"; then echo "FAIL: the $page page contains a script" >&2; exit 1; fi
done

# The probe: collects load errors (capture phase sees failed resources too), then measures every SVG.
probe_head='<script>window.__errors=[];addEventListener("error",function(e){__errors.push(String(e.message||(e.target&&(e.target.src||e.target.href))))},true);</script>'
probe_tail='<script>(function(){var s=document.querySelectorAll("svg"),bad=[];for(var i=0;i<s.length;i++){var r=s[i].getBoundingClientRect();if(!(r.width>0&&r.height>0))bad.push(i)}var res=performance.getEntriesByType("resource").map(function(x){return x.name});var ok=s.length>0&&bad.length===0&&__errors.length===0&&res.length===0;var p=document.createElement("pre");p.id="probe";p.textContent="FUSEDIFF-PROBE "+(ok?"OK":"FAIL")+" svgs="+s.length+" zero_size="+JSON.stringify(bad)+" errors="+JSON.stringify(__errors)+" resources="+JSON.stringify(res);document.body.appendChild(p)})();</script>'
shopt -u patsub_replacement 2>/dev/null || true  # '&' in the probe is literal
flags=(--headless --no-sandbox --disable-gpu --disable-quic --no-first-run --disable-background-networking
       --disable-component-update --disable-sync --user-data-dir="$work/profile" --window-size=1200,3000)
for name in signoff gate; do
  page=$(<"$work/$name.html")
  page=${page/<head>/<head>${probe_head}}
  page=${page/<\/body>/${probe_tail}<\/body>}
  printf '%s\n' "$page" > "$work/probe-$name.html"
  timeout 90 "$chromium" "${flags[@]}" --dump-dom "file://$work/probe-$name.html" > "$work/dom-$name.html" \
    2> "$work/chromium-dom-$name.log" || true
  probe=$(grep -o '<pre id="probe">FUSEDIFF-PROBE [^<]*' "$work/dom-$name.html" | sed 's/<pre id="probe">//' || true)
  echo "$name: $probe"
  if [[ "$probe" != "FUSEDIFF-PROBE OK svgs="* ]]; then
    echo "FAIL: the $name page did not render cleanly: ${probe:-no probe output (see $work/chromium-dom-$name.log)}" >&2
    exit 1
  fi
done

timeout 90 "$chromium" "${flags[@]}" --screenshot="$work/signoff.png" "file://$work/signoff.html" 2> "$work/chromium-shot.log" || true
size=$(stat -c %s "$work/signoff.png" 2>/dev/null || echo 0)
if (( size < 10000 )); then echo "FAIL: screenshot missing or blank ($size bytes)" >&2; exit 1; fi
echo "screenshot $work/signoff.png: $size bytes"
