#!/usr/bin/env python3
"""Two fusediff builds' `bisect` on the overhead bench's models, alternated run by run (so that a slower minute of a
shared machine hits both): whole-process wall time, time inside ONNX Runtime's calls (the JSON's
timing.inside_onnxruntime_s) and the overhead, median and range.

    python3 bench/bisect_ab.py BEFORE/fusediff AFTER/fusediff [RUNS]   (default 7 runs)
"""
import json
import statistics
import subprocess
import sys
import tempfile
import time

MODELS = ['twin_causes', 'resnet_block_qdq', 'resnet_block_float', 'conv2d_add_act_relu', 'fc_act_gelu_erf']


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    binaries = {'before': sys.argv[1], 'after': sys.argv[2]}
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    with tempfile.TemporaryDirectory() as work:
        subprocess.run([binaries['after'], 'export-onnx', '--out-dir', f'{work}/models', '--scales', 'general'],
                       stdout=subprocess.DEVNULL, check=True)
        results = {(b, m): [] for b in binaries for m in MODELS}
        for _ in range(runs):
            for m in MODELS:
                for b, path in binaries.items():
                    start = time.perf_counter()
                    subprocess.run([path, 'bisect', f'{work}/models/{m}/model.onnx', '--json', f'{work}/b.json'],
                                   stdout=subprocess.DEVNULL)
                    wall = time.perf_counter() - start
                    with open(f'{work}/b.json') as f:
                        results[(b, m)].append((wall, json.load(f)['timing']['inside_onnxruntime_s']))
    print(f"{'model':<22} {'binary':<7} {'process ms':>10} {'in ORT ms':>9} {'overhead':>8}  range")
    for m in MODELS:
        for b in binaries:
            v = results[(b, m)]
            overheads = sorted((p - i) / p for p, i in v)
            print(f"{m:<22} {b:<7} {1000 * statistics.median(p for p, _ in v):10.1f} "
                  f"{1000 * statistics.median(i for _, i in v):9.1f} {100 * statistics.median(overheads):7.1f}%  "
                  f"{100 * overheads[0]:.1f}-{100 * overheads[-1]:.1f}")


if __name__ == '__main__':
    main()
