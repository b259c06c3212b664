#!/usr/bin/env python3
# Usage: python3 scripts/measure_lut_interp_tolerance.py build/fusediff   (about 40 s)
# lut_interp tolerance measurement over non-saturating quantizations: for each activation, intermediate domains
# D in {2, 4, 6, 8, 12, 16} (su = D/32768) and output ranges R = c * max|f| on [-D, D], c in {1, 1.25, 2, 4}
# (sy = R/32768). Exhaustive sweep of all 65,536 int16 codes per configuration. Prints max |e| per activation.
import json, math, subprocess, sys
import struct
bin = sys.argv[1]
import os, tempfile
out = os.path.join(tempfile.mkdtemp(), "r.json")
def sig(x): return 1/(1+math.exp(-x))
F = {
 'relu': lambda x: max(x,0.0), 'relu6': lambda x: min(max(x,0.0),6.0), 'leaky_relu': lambda x: x if x>=0 else 0.01*x,
 'hard_sigmoid': lambda x: min(max(x+3,0.0),6.0)/6, 'hard_swish': lambda x: x*min(max(x+3,0.0),6.0)/6,
 'gelu_erf': lambda x: 0.5*x*(1+math.erf(x/math.sqrt(2))),
 'gelu_tanh': lambda x: 0.5*x*(1+math.tanh(math.sqrt(2/math.pi)*(x+0.044715*x**3))),
 'sigmoid': sig, 'tanh': math.tanh, 'silu': lambda x: x*sig(x), 'elu': lambda x: x if x>=0 else math.expm1(x),
 'softplus': lambda x: math.log1p(math.exp(x)) if x<30 else x, 'mish': lambda x: x*math.tanh(math.log1p(math.exp(x)) if x<30 else x)}
for act, f in F.items():
    worst = (0, '')
    for D in [2, 4, 6, 8, 12, 16]:
        M = max(abs(f(-D + 2*D*i/4000)) for i in range(4001))
        for c in [1.0, 1.25, 2.0, 4.0]:
            su = struct.unpack("f", struct.pack("f", D/32768))[0]; sy = struct.unpack("f", struct.pack("f", c*M/32768))[0]
            subprocess.run([bin, 'run', '--activation', act, '--fused', 'lut_interp', '--intermediate', f'int16:{su!r}:0',
                            '--output', f'int16:{sy!r}:0', '--samples', '1', '--max-abs-lsb', '100000', '--json', out],
                           stdout=subprocess.DEVNULL, check=True)
            j = json.load(open(out))
            m = max(cs['error_lsb']['max_abs'] for cs in j['cases'] if cs['source'] == 'sweep')
            if m > worst[0]: worst = (m, f'D={D} R={c}*max|f| su={su!r} sy={sy!r}')
    print(act, worst[0], worst[1], flush=True)
