#!/usr/bin/env python3
"""The BatchNorm-fold table of docs/batchnorm.md from a `fusediff run --pattern conv2d+batchnorm+act --json` file:
max |e| / p99 |e| in output LSB per fold precision x weight quantization x regime, for comparison (b) exact_fold and
(c) graph, one column pair per activation; (a) declared_fold verdicts are counted."""
import json
import sys
from collections import defaultdict

cases = json.load(open(sys.argv[1]))["cases"]
cell = {}
verdicts = defaultdict(int)
unsupported = {}
acts = []
for c in cases:
    _, act, prec, formula, quant, regime, ref, _ = c["name"].split(".")
    if act not in acts:
        acts.append(act)
    e = c["error_lsb"]
    if ref == "declared_fold":
        verdicts[c["verdict"]] += 1
        continue
    p99 = max(abs(float(e.get("p1", 0)) if "p1" in e else 0), abs(float(e["p99"])))
    cell[(act, prec, quant, regime, ref)] = (e["max_abs"], e["p99"], c.get("unsupported_samples", 0), e["count"])

print("declared_fold (a) verdicts:", dict(verdicts))
head = "| precision | weights | regime | " + " | ".join(f"{a} (b) | {a} (c)" for a in acts) + " |"
print(head)
print("|" + "---|" * (3 + 2 * len(acts)))
for prec in ["exact", "f32", "f16", "bf16"]:
    for quant in ["per_tensor", "per_channel"]:
        for regime in ["benign", "tiny_variance", "large_gamma", "large_mean"]:
            row = [prec, quant, regime]
            for a in acts:
                for ref in ["exact_fold", "graph"]:
                    v = cell.get((a, prec, quant, regime, ref))
                    row.append("-" if v is None else f"{v[0]} / {v[1]}")
            print("| " + " | ".join(row) + " |")
