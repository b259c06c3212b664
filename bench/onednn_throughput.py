#!/usr/bin/env python3
"""Issue 12's throughput target: samples per second of the default suite's oneDNN cases.

Runs `fusediff run --fused onednn --threads 1` (oneDNN's OpenMP team of one, --repeat 1 where the binary has it) for
this build and a baseline binary in alternating rounds, and reports wall and CPU (user + sys, from wait4) time per
round and their medians. The verdict reads CPU time, which leaves out the time other processes held the core; on a
quiet machine the two agree.

  bench/onednn_throughput.py BASELINE_BINARY [THIS_BINARY] [--rounds N]

A baseline binary: git worktree add /tmp/base COMMIT && cmake -S /tmp/base -B /tmp/base/build
-DCMAKE_BUILD_TYPE=Release -DFUSEDIFF_WITH_ONEDNN=ON && cmake --build /tmp/base/build --target fusediff
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time


def measure(binary):
    help_text = subprocess.run([binary, "run", "--help"], capture_output=True, text=True).stdout
    args = [binary, "run", "--fused", "onednn", "--threads", "1"]
    if "--repeat" in help_text:
        args += ["--repeat", "1"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    start = time.monotonic()
    child = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    output = child.stdout.read().decode()
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.monotonic() - start
    match = re.search(r"^(\d+) samples in [0-9.]+ s", output, re.MULTILINE)
    if not match or os.waitstatus_to_exitcode(status) not in (0, 1):
        sys.exit(f"onednn_throughput: {binary} failed:\n{output[-2000:]}")
    return int(match.group(1)), usage.ru_utime + usage.ru_stime, wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("baseline")
    parser.add_argument("current", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "build", "fusediff"))
    parser.add_argument("--rounds", type=int, default=5)
    a = parser.parse_args()
    rates = {"baseline": ([], []), "current": ([], [])}
    print(f"{'round':<6} {'binary':<9} {'samples':>9} {'cpu_s':>7} {'wall_s':>7} {'samples/cpu_s':>14} {'samples/wall_s':>15}")
    for r in range(1, a.rounds + 1):
        for which, binary in (("baseline", a.baseline), ("current", a.current)):
            samples, cpu, wall = measure(binary)
            rates[which][0].append(samples / cpu)
            rates[which][1].append(samples / wall)
            print(f"{r:<6} {which:<9} {samples:>9} {cpu:>7.2f} {wall:>7.2f} {samples / cpu:>14.0f} {samples / wall:>15.0f}")
    b_cpu, b_wall = (statistics.median(x) for x in rates["baseline"])
    c_cpu, c_wall = (statistics.median(x) for x in rates["current"])
    ratio = c_cpu / b_cpu
    print(f"median samples/s: baseline {b_cpu:.0f} (CPU) {b_wall:.0f} (wall); this {c_cpu:.0f} (CPU) {c_wall:.0f} (wall)")
    print(f"speed-up: {ratio:.2f}x (CPU time), {c_wall / b_wall:.2f}x (wall); target >= 4x: {'PASS' if ratio >= 4 else 'FAIL'}")
    return 0 if ratio >= 4 else 1


if __name__ == "__main__":
    sys.exit(main())
