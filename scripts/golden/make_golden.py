#!/usr/bin/python3
"""Writes tests/data/golden_activations.csv: f(x) for every activation at fixed decimal points, computed with
mpmath at 60 significant digits (an implementation independent of the reference's MPFR code).

Usage: /usr/bin/python3 scripts/golden/make_golden.py [OUTPUT]   (default: tests/data/golden_activations.csv)

Deterministic: the same mpmath gives a byte-identical file (fixed point list, fixed order, fixed formatting).
Formulas (docs/activations.md) use the stable forms (erfc, log1p, expm1) so that 50 printed digits are all
correct at 60 working digits even where the naive form would cancel.
"""
import os
import struct
import sys
from decimal import Decimal

import mpmath
from mpmath import mp, mpf

mp.dps = 60
DIGITS = 50


def float32_exact(text):
    """The exact decimal value of the float32 nearest to `text` (the reference uses alpha's exact value)."""
    value = struct.unpack('<f', struct.pack('<f', float(text)))[0]
    return format(Decimal(value), 'f')


# (activation, alpha) pairs: defaults from model/activation.h (leaky_relu 0.01f, elu 1.0f) plus one other each.
ACTIVATIONS = [
    ('relu', '0'), ('relu6', '0'),
    ('leaky_relu', float32_exact('0.01')), ('leaky_relu', float32_exact('0.2')),
    ('hard_sigmoid', '0'), ('hard_swish', '0'),
    ('gelu_erf', '0'), ('gelu_tanh', '0'), ('sigmoid', '0'), ('tanh', '0'), ('silu', '0'),
    ('elu', '1'), ('elu', '0.5'),
    ('softplus', '0'), ('mish', '0'),
]

# Exact decimal points. Knees (0, +-3, 6), GELU minimum (about -0.75179), SiLU minimum (about -1.27846),
# sigmoid/tanh maximum-curvature points (+-ln(2+sqrt 3) = +-1.31696, half of it for tanh), saturation and
# asymptotic points, large and tiny magnitudes, and dyadic points where rounding ties can occur.
POINTS = [
    '0', '3', '-3', '6', '-6', '2.9999', '-2.9999', '3.0001', '-3.0001', '5.9999', '6.0001',
    '-0.7517915246935645', '-0.7518', '-1.2784645427610738', '-1.2785',
    '1.3169578969248167', '-1.3169578969248167', '0.6584789484624084', '-0.6584789484624084',
    '8', '-8', '20', '-20', '50', '-50', '100', '-100', '1000', '-1000',
    '0.001', '-0.001', '1e-8', '-1e-8', '1e-30', '-1e-30',
    '0.5', '-0.5', '1', '-1', '1.5', '-1.5', '2', '-2', '2.5', '-2.5', '0.25', '-0.25', '0.125', '-0.125',
    '0.0625', '-0.0625', '0.75', '-0.75', '1.25', '-1.25', '3.5', '-3.5', '4', '-4', '5', '-5', '7', '-7',
    '10', '-10', '12.25', '-12.25', '0.0078125', '-0.0009765625', '0.1', '-0.1', '0.3', '-0.3',
]


def sigmoid(w):
    return 1 / (1 + mpmath.exp(-w))


def softplus(x):
    return max(x, mpf(0)) + mpmath.log1p(mpmath.exp(-abs(x)))


def relu6(x):
    return min(max(x, mpf(0)), mpf(6))


def evaluate(kind, alpha, x):
    a = mpf(alpha)
    if kind == 'relu':
        return max(x, mpf(0))
    if kind == 'relu6':
        return relu6(x)
    if kind == 'leaky_relu':
        return x if x >= 0 else a * x
    if kind == 'hard_sigmoid':
        return relu6(x + 3) / 6
    if kind == 'hard_swish':
        return x * relu6(x + 3) / 6
    if kind == 'gelu_erf':
        return x / 2 * mpmath.erfc(-x / mpmath.sqrt(2))
    if kind == 'gelu_tanh':
        z = mpmath.sqrt(2 / mpmath.pi) * (x + mpf('0.044715') * x ** 3)
        return x * sigmoid(2 * z)
    if kind == 'sigmoid':
        return sigmoid(x)
    if kind == 'tanh':
        return mpmath.tanh(x)
    if kind == 'silu':
        return x * sigmoid(x)
    if kind == 'elu':
        return x if x >= 0 else a * mpmath.expm1(x)
    if kind == 'softplus':
        return softplus(x)
    if kind == 'mish':
        return x * mpmath.tanh(softplus(x))
    raise ValueError(kind)


def main():
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, 'tests', 'data', 'golden_activations.csv')
    lines = ['activation,alpha,x,f']
    for kind, alpha in ACTIVATIONS:
        for x in POINTS:
            f = evaluate(kind, alpha, mpf(x))
            lines.append('%s,%s,%s,%s' % (kind, alpha, x, mpmath.nstr(f, DIGITS)))
    with open(out, 'w', newline='\n') as handle:
        handle.write('\n'.join(lines) + '\n')


if __name__ == '__main__':
    main()
