#!/usr/bin/python3
"""Float models for the bisect's rounding-error verdicts, built with ONNX's own Python helpers (python3-onnx):

  /usr/bin/python3 tests/bisect/bound_models.py OUT_DIR

writes OUT_DIR/NAME/model.onnx for each model below (deterministic: fixed weights from a seeded generator).

- conv_bn_relu: Conv (8 -> 8 channels, 3x3) -> BatchNormalization with a large gamma (20 to 60) and a small variance
  (1e-4 to 1e-3) -> Relu. ConvBNFusion folds the normalization into the conv: its roundings are scaled by
  gamma / sqrt(var), and a fixed tolerance in ulps calls the fold a defect.
- conv_bn_relu_dropped: the same with one weight of the conv set to 0 (a fused kernel that drops one term).
- gelu: MatMul (16 -> 32) + bias -> com.microsoft.Gelu. With optimization.enable_gelu_approximation=1,
  GeluApproximation replaces Gelu by FastGelu (a tanh approximation): not a legal rewrite.
- layernorm: x + 1000 (a large row mean), then LayerNormalization written out in ops (ReduceMean, Sub, Pow,
  ReduceMean, Add, Sqrt, Div, Mul, Add) over rows of 64, which LayerNormFusion fuses into one kernel.
- batch_n: a symbolic batch N: Conv -> BatchNormalization -> Relu -> GlobalAveragePool -> Flatten -> Gemm, for
  `--shapes N=1,8,32`.
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


def conv_bn_inits(rng, c, prefix="", dropped=False):
    w = (rng.standard_normal((c, c, 3, 3)) * 0.2).astype(np.float32)
    if dropped:
        w[0, 0, 1, 1] = 0
    return [
        nh.from_array(w, prefix + "w"),
        nh.from_array((rng.standard_normal(c) * 0.1).astype(np.float32), prefix + "b"),
        nh.from_array(rng.uniform(20, 60, c).astype(np.float32), prefix + "gamma"),
        nh.from_array((rng.standard_normal(c) * 0.5).astype(np.float32), prefix + "beta"),
        nh.from_array((rng.standard_normal(c) * 0.2).astype(np.float32), prefix + "mean"),
        nh.from_array(rng.uniform(1e-4, 1e-3, c).astype(np.float32), prefix + "var"),
    ]


def conv_bn_nodes(x, out, prefix=""):
    return [h.make_node("Conv", [x, prefix + "w", prefix + "b"], [prefix + "conv"], pads=[1, 1, 1, 1]),
            h.make_node("BatchNormalization", [prefix + "conv", prefix + "gamma", prefix + "beta", prefix + "mean",
                                               prefix + "var"], [prefix + "bn"], epsilon=1e-5),
            h.make_node("Relu", [prefix + "bn"], [out])]


def model(nodes, name, inputs, outputs, inits, opsets=(("", 17),)):
    graph = h.make_graph(nodes, name, inputs, outputs, inits)
    m = h.make_model(graph, opset_imports=[h.make_opsetid(d, v) for d, v in opsets], producer_name="bound_models.py")
    m.ir_version = 8
    return m


def conv_bn_relu(dropped):
    rng = np.random.default_rng(26)
    c = 8
    return model(conv_bn_nodes("x", "y"), "conv_bn_relu", [h.make_tensor_value_info("x", T.FLOAT, [1, c, 8, 8])],
                 [h.make_tensor_value_info("y", T.FLOAT, [1, c, 8, 8])], conv_bn_inits(rng, c, dropped=dropped))


def gelu():
    rng = np.random.default_rng(27)
    inits = [nh.from_array((rng.standard_normal((16, 32)) * 0.5).astype(np.float32), "w"),
             nh.from_array((rng.standard_normal(32) * 0.5).astype(np.float32), "b")]
    nodes = [h.make_node("MatMul", ["x", "w"], ["mm"]), h.make_node("Add", ["mm", "b"], ["pre"]),
             h.make_node("Gelu", ["pre"], ["y"], domain="com.microsoft")]
    return model(nodes, "gelu", [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
                 [h.make_tensor_value_info("y", T.FLOAT, [4, 32])], inits, (("", 17), ("com.microsoft", 1)))


def layernorm():
    rng = np.random.default_rng(28)
    n = 64
    inits = [nh.from_array(np.array(1000, np.float32), "offset"), nh.from_array(np.array(2, np.float32), "two"),
             nh.from_array(np.array(1e-5, np.float32), "eps"),
             nh.from_array(rng.uniform(0.5, 1.5, n).astype(np.float32), "gamma"),
             nh.from_array((rng.standard_normal(n) * 0.1).astype(np.float32), "beta")]
    nodes = [h.make_node("Add", ["x", "offset"], ["shifted"]),
             h.make_node("ReduceMean", ["shifted"], ["mean"], axes=[-1]),
             h.make_node("Sub", ["shifted", "mean"], ["d"]),
             h.make_node("Pow", ["d", "two"], ["sq"]),
             h.make_node("ReduceMean", ["sq"], ["var"], axes=[-1]),
             h.make_node("Add", ["var", "eps"], ["var_eps"]),
             h.make_node("Sqrt", ["var_eps"], ["sd"]),
             h.make_node("Div", ["d", "sd"], ["norm"]),
             h.make_node("Mul", ["norm", "gamma"], ["scaled"]),
             h.make_node("Add", ["scaled", "beta"], ["y"])]
    return model(nodes, "layernorm", [h.make_tensor_value_info("x", T.FLOAT, [2, 8, n])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 8, n])], inits)


def batch_n():
    rng = np.random.default_rng(29)
    c = 8
    inits = conv_bn_inits(rng, c) + [nh.from_array((rng.standard_normal((10, c)) * 0.3).astype(np.float32), "fc_w"),
                                     nh.from_array((rng.standard_normal(10) * 0.1).astype(np.float32), "fc_b")]
    nodes = conv_bn_nodes("x", "r") + [h.make_node("GlobalAveragePool", ["r"], ["pool"]),
                                       h.make_node("Flatten", ["pool"], ["flat"]),
                                       h.make_node("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], transB=1)]
    return model(nodes, "batch_n", [h.make_tensor_value_info("x", T.FLOAT, ["N", c, 16, 16])],
                 [h.make_tensor_value_info("logits", T.FLOAT, ["N", 10])], inits)


def main():
    out = sys.argv[1]
    save(conv_bn_relu(False), out, "conv_bn_relu")
    save(conv_bn_relu(True), out, "conv_bn_relu_dropped")
    save(gelu(), out, "gelu")
    save(layernorm(), out, "layernorm")
    save(batch_n(), out, "batch_n")


if __name__ == "__main__":
    main()
