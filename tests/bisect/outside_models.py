#!/usr/bin/python3
"""Small ONNX models built the way other tools build them, not by fusediff: with ONNX's own Python helpers
(python3-onnx), unnamed nodes, their own naming of tensors. `fusediff bisect` is tested on them.

  /usr/bin/python3 tests/bisect/outside_models.py OUT_DIR

writes OUT_DIR/NAME/model.onnx for each model below (deterministic: fixed weights from a seeded generator).

- qdq_conv_add_relu_pool_rmsnorm: a QDQ chain Conv -> Add -> Relu -> AveragePool (opset 13, uint8 activations,
  int8 weights, int32 bias) whose pooled features, flattened to one vector, go through an RMS normalization written
  out as ONNX ops (Pow, ReduceMean, Add, Sqrt, Div, Mul by a learned scale) before the last QuantizeLinear. ONNX
  Runtime 1.30 refuses every session that enables SimplifiedLayerNormFusion on it (docs/bisect.md, "Refused
  sessions").
- qdq_conv_add_relu_pool: the same QDQ chain without the normalization (ONNX Runtime builds every session).
- token_ids: int64 token ids through an embedding Gather, an int64 attention mask, a float output.
- every_type: float16, bfloat16 (through Cast), float64, int32, int16, int8, uint8 and bool inputs, one output each.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def save(model, out, name):
    onnx.checker.check_model(model)
    os.makedirs(os.path.join(out, name), exist_ok=True)
    onnx.save(model, os.path.join(out, name, "model.onnx"))


def qdq_chain(rmsnorm):
    rng = np.random.default_rng(25)
    c = 4
    inits = [
        nh.from_array(np.array(0.05, np.float32), "x_scale"), nh.from_array(np.array(128, np.uint8), "x_zero"),
        nh.from_array(rng.integers(-20, 20, (c, 3, 3, 3)).astype(np.int8), "w"),
        nh.from_array(np.array(0.01, np.float32), "w_scale"), nh.from_array(np.array(0, np.int8), "w_zero"),
        nh.from_array(rng.integers(-200, 200, (c,)).astype(np.int32), "b"),
        nh.from_array(np.array(0.0005, np.float32), "b_scale"), nh.from_array(np.array(0, np.int32), "b_zero"),
    ]
    for k, zero in (("conv", 128), ("res", 128), ("sum", 128), ("relu", 0), ("pool", 0), ("out", 128)):
        inits += [nh.from_array(np.array(0.1 if k != "out" else 0.02, np.float32), k + "_scale"),
                  nh.from_array(np.array(zero, np.uint8), k + "_zero")]
    nodes = []

    def node(op, inputs, outputs, **attrs):
        nodes.append(h.make_node(op, inputs, outputs, **attrs))  # no name, as many exporters leave them

    def qdq(x, k, out):
        node("QuantizeLinear", [x, k + "_scale", k + "_zero"], [x + "_q"])
        node("DequantizeLinear", [x + "_q", k + "_scale", k + "_zero"], [out])

    qdq("input", "x", "x_dq")
    node("DequantizeLinear", ["w", "w_scale", "w_zero"], ["w_dq"])
    node("DequantizeLinear", ["b", "b_scale", "b_zero"], ["b_dq"])
    node("Conv", ["x_dq", "w_dq", "b_dq"], ["conv"], pads=[1, 1, 1, 1])
    qdq("conv", "conv", "conv_dq")
    qdq("residual", "res", "res_dq")
    node("Add", ["conv_dq", "res_dq"], ["sum"])
    qdq("sum", "sum", "sum_dq")
    node("Relu", ["sum_dq"], ["relu"])
    qdq("relu", "relu", "relu_dq")
    node("AveragePool", ["relu_dq"], ["pool"], kernel_shape=[2, 2], strides=[2, 2])
    last = "pool"
    if rmsnorm:
        qdq("pool", "pool", "pool_dq")
        n = c * 4 * 4
        inits += [nh.from_array(np.array([n], np.int64), "flat_shape"),
                  nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1e-5, np.float32), "eps"),
                  nh.from_array(rng.uniform(0.5, 1.5, (n,)).astype(np.float32), "gamma")]
        node("Reshape", ["pool_dq", "flat_shape"], ["features"])
        node("Pow", ["features", "two"], ["square"])
        node("ReduceMean", ["square"], ["mean_square"], axes=[-1])
        node("Add", ["mean_square", "eps"], ["mean_square_eps"])
        node("Sqrt", ["mean_square_eps"], ["rms"])
        node("Div", ["features", "rms"], ["normalized"])
        node("Mul", ["gamma", "normalized"], ["scaled"])  # the learned scale first, as written by hand
        last = "scaled"
        out_shape = [n]
    else:
        out_shape = [1, c, 4, 4]
    node("QuantizeLinear", [last, "out_scale", "out_zero"], ["output"])
    graph = h.make_graph(nodes, "outside_qdq",
                         [h.make_tensor_value_info("input", T.FLOAT, [1, 3, 8, 8]),
                          h.make_tensor_value_info("residual", T.FLOAT, [1, c, 8, 8])],
                         [h.make_tensor_value_info("output", T.UINT8, out_shape)], inits)
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], producer_name="outside_models.py")
    model.ir_version = 7
    return model


def token_ids():
    rng = np.random.default_rng(26)
    inits = [nh.from_array(rng.standard_normal((50, 8)).astype(np.float32), "embedding"),
             nh.from_array(np.array([2], np.int64), "hidden_axis")]
    nodes = [h.make_node("Gather", ["input_ids", "embedding"][::-1], ["embedded"]),
             h.make_node("Cast", ["attention_mask"], ["mask_f"], to=T.FLOAT),
             h.make_node("Unsqueeze", ["mask_f", "hidden_axis"], ["mask_3d"]),
             h.make_node("Mul", ["embedded", "mask_3d"], ["masked"]),
             h.make_node("Relu", ["masked"], ["hidden"])]
    graph = h.make_graph(nodes, "token_ids",
                         [h.make_tensor_value_info("input_ids", T.INT64, ["batch", 6]),
                          h.make_tensor_value_info("attention_mask", T.INT64, ["batch", 6])],
                         [h.make_tensor_value_info("hidden", T.FLOAT, ["batch", 6, 8])], inits)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], producer_name="outside_models.py")


def every_type():
    inputs, outputs, nodes = [], [], []
    for name, t in (("f16", T.FLOAT16), ("f64", T.DOUBLE), ("i32", T.INT32), ("i16", T.INT16), ("i8", T.INT8),
                    ("u8", T.UINT8)):
        inputs.append(h.make_tensor_value_info(name, t, [2, 3]))
        outputs.append(h.make_tensor_value_info(name + "_out", t, [2, 3]))
        nodes.append(h.make_node("Neg" if t not in (T.UINT8,) else "Identity", [name], [name + "_out"]))
    inputs.append(h.make_tensor_value_info("bf16_as_f32", T.FLOAT, [2, 3]))
    nodes.append(h.make_node("Cast", ["bf16_as_f32"], ["bf16_out"], to=T.BFLOAT16))
    outputs.append(h.make_tensor_value_info("bf16_out", T.BFLOAT16, [2, 3]))
    inputs.append(h.make_tensor_value_info("flag", T.BOOL, [2, 3]))
    nodes.append(h.make_node("Not", ["flag"], ["flag_out"]))
    outputs.append(h.make_tensor_value_info("flag_out", T.BOOL, [2, 3]))
    graph = h.make_graph(nodes, "every_type", inputs, outputs)
    return h.make_model(graph, opset_imports=[h.make_opsetid("", 13)], producer_name="outside_models.py")


def main():
    out = sys.argv[1]
    save(qdq_chain(rmsnorm=True), out, "qdq_conv_add_relu_pool_rmsnorm")
    save(qdq_chain(rmsnorm=False), out, "qdq_conv_add_relu_pool")
    save(token_ids(), out, "token_ids")
    save(every_type(), out, "every_type")


if __name__ == "__main__":
    main()
