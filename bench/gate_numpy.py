#!/usr/bin/python3
"""What users write today to check an int16 lut_interp table: sweep the 65,536 codes in double precision with
SciPy, quantize, emulate TFLite's LUTLookup in NumPy, report the largest error. Not exact (libm/SciPy rounding
near output ties is not decided), and no conv cases: the baseline `fusediff gate` is timed against
(scripts/bench.sh). Usage: /usr/bin/python3 bench/gate_numpy.py DESCRIPTOR.json [--max-abs-lsb K]"""
import argparse
import json
import os
import sys

import numpy as np
from scipy import special


def activation(kind, x):
    if kind == "gelu_erf":
        return 0.5 * x * (1.0 + special.erf(x / np.sqrt(2.0)))
    if kind == "sigmoid":
        return special.expit(x)
    if kind == "tanh":
        return np.tanh(x)
    if kind == "silu":
        return x * special.expit(x)
    if kind == "hard_swish":
        return x * np.clip(x + 3.0, 0.0, 6.0) / 6.0
    sys.exit(f"gate_numpy.py: activation {kind} is not in this script")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("descriptor")
    parser.add_argument("--max-abs-lsb", type=int, default=1)
    args = parser.parse_args()
    with open(args.descriptor) as f:
        d = json.load(f)
    if d["table"]["kind"] != "lut_interp":
        sys.exit("gate_numpy.py: only lut_interp tables")
    table_path = os.path.join(os.path.dirname(args.descriptor), d["table"]["file"])
    rows = np.loadtxt(table_path, delimiter=",", skiprows=1, dtype=np.int64)
    knots = np.zeros(513, dtype=np.int64)
    knots[rows[:, 0]] = rows[:, 1]

    u = np.arange(-32768, 32768, dtype=np.int64)
    su, sy = float(np.float32(d["intermediate"]["scale"])), float(np.float32(d["output"]["scale"]))
    zu, zy = d["intermediate"]["zero_point"], d["output"]["zero_point"]
    f = activation(d["activation"]["kind"], (u - zu) * su)
    t = f / sy
    y_ref = np.clip(np.sign(t) * np.floor(np.abs(t) + 0.5) + zy, -32768, 32767).astype(np.int64)  # half away

    index = 256 + (u >> 7)
    offset = u & 0x7F
    base = knots[index]
    slope = (knots[index + 1] - base).astype(np.int16).astype(np.int64)
    y_fused = (base + ((slope * offset + 64) >> 7)).astype(np.int16).astype(np.int64)

    error = y_fused - y_ref
    worst = int(np.abs(error).max())
    print(f"{args.descriptor}: {u.size} codes, max |e| = {worst} LSB, {int(np.count_nonzero(error))} codes differ")
    return 0 if worst <= args.max_abs_lsb else 1


if __name__ == "__main__":
    sys.exit(main())
