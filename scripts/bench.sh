#!/usr/bin/env bash
# Prints the performance tables of issues 7 and 11 (samples/s, ratios, PASS/FAIL per target). Builds first
# (Release): fusediff, the benchmarks and harness_tests (the mutants ctest is timed).
#   bash scripts/bench.sh            # full: ~1 s per benchmark, 10^8 samples for the memory check, 5 default runs
#   bash scripts/bench.sh --quick    # short timings, 10^6 samples for the memory check, 3 default runs
#   BASELINE=75580e2 bash scripts/bench.sh   # also builds that commit in build-base/ and measures its conv+act
#                                            # benchmarks and default run interleaved with this build's
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fusediff fusediff_bench harness_tests >/dev/null
args=("$@")
if [[ -n "${BASELINE:-}" ]]; then
  base="${BASELINE_DIR:-build-base}"
  # The commit's tree, not a worktree: nothing of this checkout is touched. build-base/ is git-ignored (/build*/).
  # Extracted again only for another commit (fresh files would rebuild everything).
  commit="$(git rev-parse --verify "$BASELINE^{commit}")"
  if [[ "$(cat "$base/src.commit" 2>/dev/null)" != "$commit" ]]; then
    rm -rf "$base/src" "$base/build"
    mkdir -p "$base/src"
    git archive "$commit" | tar -x -C "$base/src"
    echo "$commit" >"$base/src.commit"
  fi
  # The same options as this build (oneDNN on or off alike), so that the default runs compare.
  onednn="$(sed -n 's/^FUSEDIFF_WITH_ONEDNN:BOOL=//p' "$build/CMakeCache.txt")"
  cmake -S "$base/src" -B "$base/build" -DCMAKE_BUILD_TYPE=Release -DFUSEDIFF_WITH_ONEDNN="${onednn:-ON}" \
    "${launcher[@]}" >/dev/null
  cmake --build "$base/build" -j"$(nproc)" --target fusediff fusediff_bench >/dev/null
  args+=(--baseline "$base/build")
fi
exec /usr/bin/python3 bench/report.py "$build" "${args[@]}"
