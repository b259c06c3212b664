#!/usr/bin/env python3
"""Measures the pwl default tolerances (docs/tolerances.md): for every activation at its default-suite
quantization (8-bit and int16, taken from `fusediff run --json`), generates a pwl table with
`fusediff table generate --segments N --line-fit chord` (the fit the defaults were measured on) and gates it exhaustively (`fusediff gate --samples 0`), recording
max |e| against the exact reference. Prints one row per (width, segment count): the maximum over activations.

Usage: python3 scripts/measure_pwl_tolerance.py build/fusediff
"""
import json
import os
import subprocess
import sys
import tempfile

ACTIVATIONS = ["relu", "relu6", "leaky_relu", "hard_sigmoid", "hard_swish", "gelu_erf", "gelu_tanh", "sigmoid",
               "tanh", "silu", "elu", "softplus", "mish"]
COUNTS = {8: [8, 16, 32, 64], 16: [16, 32, 64, 128]}


def quant(q):
    return f"{q['type']}{'_narrow' if q['narrow'] else ''}:{q['scale']!r}:{q['zero_point']}"


def main(tool):
    worst = {}
    with tempfile.TemporaryDirectory() as tmp:
        for activation in ACTIVATIONS:
            results = os.path.join(tmp, "run.json")
            subprocess.run([tool, "run", "--activation", activation, "--samples", "1", "--json", results],
                           check=False, stdout=subprocess.DEVNULL)
            with open(results) as f:
                cases = [c for c in json.load(f)["cases"] if c["source"] == "sweep"]
            for case in cases:
                u, y = case["convention"]["intermediate"], case["convention"]["output"]
                bits = 16 if u["type"] == "int16" else 8
                for count in COUNTS[bits]:
                    name = f"{activation}_{bits}_{count}"
                    subprocess.run([tool, "table", "generate", "--activation", activation, "--intermediate", quant(u),
                                    "--output", quant(y), "--kind", "pwl", "--segments", str(count), "--line-fit", "chord", "--name", name,
                                    "--out-dir", tmp], check=True, stdout=subprocess.DEVNULL)
                    gate = os.path.join(tmp, name + ".results.json")
                    subprocess.run([tool, "gate", os.path.join(tmp, name + ".json"), "--samples", "0",
                                    "--max-abs-lsb", "1000000", "--json", gate], check=True, stdout=subprocess.DEVNULL)
                    with open(gate) as f:
                        e = json.load(f)["cases"][0]["error_lsb"]["max_abs"]
                    print(f"{activation:13s} {bits:2d}-bit {count:4d} segments: max |e| {e}", flush=True)
                    key = (bits, count)
                    if key not in worst or e > worst[key][0]:
                        worst[key] = (e, activation)
    for (bits, count), (e, activation) in sorted(worst.items()):
        print(f"bits={bits} segments={count}: max |e| {e} ({activation})")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/fusediff")
