#!/usr/bin/env bash
# Prints issue 7's performance table (samples/s, ratios, PASS/FAIL per target). Builds first (Release).
#   bash scripts/bench.sh            # full: ~1 s per benchmark and 10^8 samples for the memory check (minutes)
#   bash scripts/bench.sh --quick    # short timings and 10^6 samples for the memory check
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" -j"$(nproc)" --target fusediff fusediff_bench >/dev/null
exec /usr/bin/python3 bench/report.py "$build" "$@"
