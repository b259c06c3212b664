#!/usr/bin/env bash
# The default run and oneDNN's tests under every DNNL_MAX_CPU_ISA cap this CPU reaches: oneDNN dispatches to other
# kernels on other CPUs (docs/onednn.md, "Every ISA"), so a user with an older or newer x86-64 CPU gets what this
# checks. A cap the CPU cannot reach (oneDNN dispatches to another ISA under it) is reported and skipped.
# Usage: bash scripts/isa_caps.sh [BUILD_DIR]   (after the README's test command; .ci/run calls it)
set -uo pipefail
build="${1:-build}"
fusediff="$build/fusediff"
[[ -x "$fusediff" ]] || { echo "isa_caps: $fusediff not built (run the README's test command first)" >&2; exit 2; }
export OMP_NUM_THREADS=1
status=0
for cap in SSE41 AVX2 AVX2_VNNI AVX512_CORE AVX512_CORE_VNNI AVX512_CORE_BF16 AVX512_CORE_AMX; do
  lower="${cap,,}"
  start=$SECONDS
  out="$(DNNL_MAX_CPU_ISA=$cap "$fusediff" run 2>&1)"
  rc=$?
  dispatched="$(sed -n 's/^oneDNN .* dispatched to \([a-z0-9_]*\) .*/\1/p' <<<"$out")"
  if [[ "$dispatched" != "$lower" ]]; then
    echo "isa_caps: $cap: not reachable on this CPU (oneDNN dispatches to ${dispatched:-?}): skipped"
    continue
  fi
  summary="$(grep -E '^[0-9]+ passed, [0-9]+ failed' <<<"$out")"
  if [[ $rc -ne 0 ]]; then
    echo "isa_caps: $cap: fusediff run exited $rc: $summary"
    grep -E 'FAIL|NONDETERMINISTIC' <<<"$out" | head -5
    status=1
  fi
  # oneDNN's GoogleTest cases (each in a process of its own, under this cap; those needing another ISA skip).
  if ! DNNL_MAX_CPU_ISA=$cap ctest --test-dir "$build" -R '^OneDnn' -j"$(nproc)" --output-on-failure >/tmp/isa_caps_$$.log 2>&1; then
    echo "isa_caps: $cap: oneDNN tests failed:"
    grep -E 'Failed|\*\*\*' /tmp/isa_caps_$$.log | head -10
    status=1
  fi
  echo "isa_caps: $cap ($lower): fusediff run exit $rc, $summary; oneDNN tests: $(grep -E 'tests passed' /tmp/isa_caps_$$.log) ($((SECONDS - start)) s)"
done
rm -f /tmp/isa_caps_$$.log
exit $status
