#!/usr/bin/env python3
"""conv2d + activation through a lookup table, as TFLite's reference kernels compute it, in numpy: a fusediff
plugin that speaks the subprocess protocol on its stdin and stdout (docs/plugins.md, "Subprocess protocol").

    fusediff run --fused exec:'python3 examples/plugins/conv_lut_plugin.py'

It is the Python twin of conv_lut_plugin.c: the same pattern (conv2d -> requantization into the activation's input
u -> the case's 8-bit lookup table), the same arithmetic (TFLite's double-rounding MultiplyByQuantizedMultiplier,
int32 accumulators), and it claims the same features, so fusediff gives it only the cases it can compute. Every
array is read where it lies in the frame (numpy.frombuffer, no copy); nothing but frames goes to stdout.
"""
import json
import struct
import sys

import numpy as np

MAGIC = b"FDF1"
PROTOCOL = 2
FEATURES = ["producer:conv2d", "stage:act", "table:lut"]
CONV2D = 0  # fusediff_conv_op


# ---- frames: b"FDF1", uint32 LE header length, the JSON header (padded to 8), the payload of arrays -------------
def read_frame(stream):
    prefix = stream.read(8)
    if not prefix:
        return None, None  # the host closed the stream
    if len(prefix) != 8 or prefix[:4] != MAGIC:
        raise SystemExit("conv_lut_plugin.py: not a fusediff frame on stdin")
    (header_bytes,) = struct.unpack("<I", prefix[4:])
    header = json.loads(stream.read(header_bytes))
    payload = stream.read(header["payload_bytes"])
    arrays = {}
    for a in header["arrays"]:
        count = int(np.prod(a["shape"], dtype=np.int64))
        arrays[a["name"]] = np.frombuffer(payload, dtype=a["dtype"], count=count, offset=a["offset"]).reshape(a["shape"])
    return header, arrays


def write_frame(stream, header, arrays=()):
    entries, chunks, offset = [], [], 0
    for name, array in arrays:
        array = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        pad = -offset % 8
        chunks.append(b"\0" * pad)
        offset += pad
        entries.append({"name": name, "dtype": array.dtype.str, "shape": list(array.shape), "offset": offset,
                        "bytes": array.nbytes})
        chunks.append(array.tobytes())
        offset += array.nbytes
    text = json.dumps(dict(header, arrays=entries, payload_bytes=offset)).encode()
    text += b" " * (-(8 + len(text)) % 8)
    stream.write(MAGIC + struct.pack("<I", len(text)) + text + b"".join(chunks))
    stream.flush()


# ---- TFLite's fixed-point requantization (gemmlowp / tflite-micro, as fused/src/fixedpoint.cpp) ----------------
def quantize_multiplier(real):
    """real = q * 2^shift, q in [0.5, 1); the Q31 multiplier round_half_away(q * 2^31) and shift."""
    if real == 0.0:
        return 0, 0
    q, shift = np.frexp(real)
    m = int(np.round(q * (1 << 31)))  # exact: a power-of-two scaling; ties cannot occur below 2^53
    if m == 1 << 31:
        m //= 2
        shift += 1
    if shift < -31:
        return 0, 0
    return m, int(shift)


def multiply_by_quantized_multiplier(acc, multiplier, shift):
    """MultiplyByQuantizedMultiplier, double rounding, on int64 arrays of int32 values."""
    left, right = max(shift, 0), max(-shift, 0)
    x = np.clip(acc * (1 << left), -(1 << 31), (1 << 31) - 1)  # the saturating left shift (fixedpoint.h)
    # SaturatingRoundingDoublingHighMul: floor((x * m + 2^30) / 2^31); |x * m| < 2^62, exact in int64.
    high = (x * multiplier + (1 << 30)) >> 31
    # RoundingDivideByPOT: ties away from zero.
    mask = (1 << right) - 1
    remainder = high & mask
    threshold = (mask >> 1) + (high < 0)
    return (high >> right) + (remainder > threshold)


# ---- the kernel ---------------------------------------------------------------------------------------------
# ---- a batch: the draws' scalars as one table, each tensor's values end to end with NAME.offsets ----------------
def draw_of(header, arrays, i):
    """Draw i of a run message: its scalars by column name, and its slice of every tensor."""
    draw = dict(zip(header["columns"], (int(v) for v in arrays["scalars"][i])))
    draw["input_scale"] = float(arrays["input_scale"][i])
    for name, values in arrays.items():
        offsets = arrays.get(name + ".offsets")
        if offsets is not None:
            draw[name] = values[offsets[i]:offsets[i + 1]]
    return draw


def conv2d_lut(case, draw):
    n, h, w, c = draw["batch"], draw["input_height"], draw["input_width"], draw["input_channels"]
    k, kh, kw = draw["output_channels"], draw["kernel_height"], draw["kernel_width"]
    sh, sw, dh, dw = draw["stride_height"], draw["stride_width"], draw["dilation_height"], draw["dilation_width"]
    oh, ow = draw["output_height"], draw["output_width"]
    x = draw["input_codes"].reshape(n, h, w, c).astype(np.int64) - draw["input_zero_point"]
    weights = draw["weights"].reshape(k, kh, kw, c).astype(np.int64)  # OHWI
    bias = draw["bias"].astype(np.int64)
    # Zero padding of x - zx is the input zero point's code, as TFLite pads.
    x = np.pad(x, ((0, 0), (draw["padding_top"], draw["padding_bottom"]), (draw["padding_left"], draw["padding_right"]),
                   (0, 0)))
    acc = np.broadcast_to(bias, (n, oh, ow, k)).copy()  # |acc| < 2^31 by the draw's construction (int32 accumulator)
    for ky in range(kh):
        for kx in range(kw):
            rows = x[:, ky * dh: ky * dh + (oh - 1) * sh + 1: sh, kx * dw: kx * dw + (ow - 1) * sw + 1: sw, :]
            acc += rows @ weights[:, ky, kx, :].T
    u = case["intermediate"]
    sx = np.float32(draw["input_scale"])
    su = np.float32(u["scale"])
    scales = draw["weight_scales"]
    out = np.empty_like(acc)
    for channel in range(k):
        # TFLite: the effective scale in double from the float32 scales.
        real = float(sx) * float(scales[channel]) / float(su)
        m, shift = quantize_multiplier(real)
        out[..., channel] = multiply_by_quantized_multiplier(acc[..., channel], m, shift)
    codes = np.clip(out + u["zero_point"], u["qmin"], u["qmax"])
    lut = np.asarray(case["table_lut"], dtype=np.int32)
    return lut[codes - u["qmin"]].astype("<i4").reshape(-1)


def unsupported(case):
    u = case["intermediate"]
    if len(case["table_lut"]) != u["qmax"] - u["qmin"] + 1 or len(case["table_lut"]) > 256:
        return "expects an 8-bit intermediate with one table entry per code"
    return None


def main():
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    case = None
    while True:
        header, arrays = read_frame(stdin)
        if header is None or header["type"] == "bye":
            return
        kind = header["type"]
        if kind == "hello":
            write_frame(stdout, {"type": "hello", "protocol": PROTOCOL, "name": "conv_lut_plugin.py",
                                 "version": "1.0", "abi_major": header["abi_major"], "abi_minor": header["abi_minor_max"],
                                 "features": FEATURES,
                                 # What it computes, as conv_lut_plugin.c declares it: TFLite's requantization, a
                                 # quantized u, the table's exact entries; symmetric weights; conv2d draws only.
                                 "declaration": {"requant": "double_rounding", "intermediate_kind": "quantized",
                                                 "post_ops": "exact", "weight_range": "symmetric",
                                                 "threading": "serial", "preferred_batch": 64, "transposed": 0}})
        elif kind == "prepare":
            case = header["case"]
            why = unsupported(case)
            write_frame(stdout, {"type": "rejected", "reason": why} if why else {"type": "prepared"})
        elif kind == "run":
            # Every draw's y_count outputs end to end (a rejected draw's slots too); the rejected ones listed.
            ys, rejected = [], []
            for i in range(header["draw_count"]):
                draw = draw_of(header, arrays, i)
                if draw["op"] != CONV2D:
                    rejected.append({"draw": i, "reason": "transposed convolutions are not implemented"})
                    ys.append(np.zeros(draw["y_count"], dtype="<i4"))
                    continue
                ys.append(conv2d_lut(case, draw))
            write_frame(stdout, {"type": "result", "rejected": rejected, "implementation": "numpy conv2d+lut"},
                        [("y", np.concatenate(ys) if ys else np.zeros(0, dtype="<i4"))])
        else:
            write_frame(stdout, {"type": "error", "message": f"unknown message type '{kind}'"})


if __name__ == "__main__":
    main()
