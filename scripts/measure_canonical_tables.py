#!/usr/bin/env python3
"""Measures the canonical tables of the gate's relative mode (docs/tolerances.md) for every activation at its
default-suite int16 quantization (taken from `fusediff run --json`):

- lut_interp: the canonical TFLite LUTPopulateInt16 table's max |e| and exact % over every code, and the
  minimax knots (`table generate --knots minimax`): how much better they are.
- pwl: for 16, 32, 64 and 128 segments, today's chord fit (`--line-fit chord`) against the canonical fit on the
  same boundaries (the minimax line per segment): max |e|, exact %, |bias|, and the relative gate's verdict.

Every figure comes from `fusediff gate --samples 0 --json` (exhaustive over the 65,536 codes, exact reference).
Usage: python3 scripts/measure_canonical_tables.py build/fusediff
"""
import json
import os
import subprocess
import sys
import tempfile
import time

ACTIVATIONS = ["relu", "relu6", "leaky_relu", "hard_sigmoid", "hard_swish", "gelu_erf", "gelu_tanh", "sigmoid",
               "tanh", "silu", "elu", "softplus", "mish"]
SEGMENTS = [16, 32, 64, 128]


def quant(q):
    return f"{q['type']}{'_narrow' if q['narrow'] else ''}:{q['scale']!r}:{q['zero_point']}"


def gate(tool, tmp, name):
    """(candidate stats, canonical stats, verdict) of an exhaustive relative gate."""
    out = os.path.join(tmp, name + ".results.json")
    subprocess.run([tool, "gate", os.path.join(tmp, name + ".json"), "--samples", "0", "--json", out],
                   check=False, stdout=subprocess.DEVNULL)
    with open(out) as f:
        j = json.load(f)
    reason = j["cases"][0].get("reason", "")
    broken = [rule for rule, text in (("max", "max |e|"), ("per code", "worse than the canonical"), ("bias", "|bias|"))
              if text in reason]
    verdict = j["gate"]["verdict"] + (f" ({', '.join(broken)})" if broken else "")
    return j["cases"][0]["error_lsb"], j["gate"]["canonical"]["error_lsb"], verdict


def figures(stats):
    return f"{stats['max_abs']} / {100 * stats['exact_fraction']:.2f}% / {abs(stats['mean']):.3f}"


def main(tool):
    with tempfile.TemporaryDirectory() as tmp:
        print("| activation | int16 u / y | TFLite lut_interp max / exact % | minimax knots max / exact % | search s |")
        print("|---|---|--:|--:|--:|")
        pwl_rows = []
        for activation in ACTIVATIONS:
            results = os.path.join(tmp, "run.json")
            subprocess.run([tool, "run", "--activation", activation, "--samples", "1", "--json", results],
                           check=False, stdout=subprocess.DEVNULL)
            with open(results) as f:
                case = [c for c in json.load(f)["cases"]
                        if c["source"] == "sweep" and c["convention"]["intermediate"]["type"] == "int16"][0]
            u, y = quant(case["convention"]["intermediate"]), quant(case["convention"]["output"])
            base = [tool, "table", "generate", "--activation", activation, "--intermediate", u, "--output", y,
                    "--out-dir", tmp]
            subprocess.run(base + ["--kind", "lut_interp", "--name", "tflite"], check=True, stdout=subprocess.DEVNULL)
            _, tflite, _ = gate(tool, tmp, "tflite")
            start = time.monotonic()
            found = subprocess.run(base + ["--kind", "lut_interp", "--knots", "minimax", "--name", "minimax"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            seconds = time.monotonic() - start
            if found.returncode == 0:
                minimax, _, _ = gate(tool, tmp, "minimax")
                best = f"{minimax['max_abs']} / {100 * minimax['exact_fraction']:.2f}%"
            else:
                best = "not searched: " + found.stderr.strip().split(": ", 2)[-1]
            print(f"| {activation} | {u} / {y} | {tflite['max_abs']} / {100 * tflite['exact_fraction']:.2f}% | "
                  f"{best} | {seconds:.1f} |", flush=True)
            for count in SEGMENTS:
                subprocess.run(base + ["--kind", "pwl", "--segments", str(count), "--line-fit", "chord", "--name",
                                       "chord"], check=True, stdout=subprocess.DEVNULL)
                chord, canonical, verdict = gate(tool, tmp, "chord")
                pwl_rows.append(f"| {activation} | {count} | {figures(chord)} | {figures(canonical)} | {verdict} |")
        print("\n| activation | segments | chord (today) max / exact % / abs bias | canonical fit max / exact % / "
              "abs bias | relative gate on the chord table |")
        print("|---|--:|--:|--:|---|")
        print("\n".join(pwl_rows))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/fusediff")
