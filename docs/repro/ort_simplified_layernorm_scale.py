#!/usr/bin/python3
"""ONNX Runtime 1.30's SimplifiedLayerNormFusion takes the Div's own output as the scale (docs/bisect.md, "Refused
sessions"): the minimal models. An RMS normalization written out as ONNX ops,

    y = Mul(A, B),  with {A, B} = {gamma, x / Sqrt(ReduceMean(Pow(x, 2), axes=[-1]) + eps)},

over a 1-D x of 4 elements and a 1-D gamma of 4. The fusion's scale is "the last input of the Mul that has one
dimension" (onnxruntime/core/optimizer/layer_norm_fusion.cc, SimplifiedLayerNormFusion::ApplyImpl): with the Div's
output last, it is the Div's output, a node the fusion then removes.

  /usr/bin/python3 docs/repro/ort_simplified_layernorm_scale.py DIR   (then: node docs/repro/ort_simplified_layernorm_scale.js DIR)

writes DIR/scale_first.onnx (Mul(gamma, normalized): refused), DIR/scale_last.onnx (Mul(normalized, gamma): fused,
builds) and DIR/scale_first_2d.onnx (x of shape [1, 4]: the Div's output has two dimensions, is not taken, fused,
builds). Opset 13, unnamed nodes.
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh


def model(scale_first, x_shape):
    inits = [nh.from_array(np.array(2.0, np.float32), "two"), nh.from_array(np.array(1e-5, np.float32), "eps"),
             nh.from_array(np.array([0.5, 1.0, 1.5, 2.0], np.float32), "gamma")]
    mul = ["gamma", "normalized"] if scale_first else ["normalized", "gamma"]
    nodes = [h.make_node("Pow", ["x", "two"], ["square"]),
             h.make_node("ReduceMean", ["square"], ["mean_square"], axes=[-1]),
             h.make_node("Add", ["mean_square", "eps"], ["mean_square_eps"]),
             h.make_node("Sqrt", ["mean_square_eps"], ["rms"]),
             h.make_node("Div", ["x", "rms"], ["normalized"]),
             h.make_node("Mul", mul, ["y"])]
    graph = h.make_graph(nodes, "rmsnorm", [h.make_tensor_value_info("x", T.FLOAT, x_shape)],
                         [h.make_tensor_value_info("y", T.FLOAT, x_shape)], inits)
    m = h.make_model(graph, opset_imports=[h.make_opsetid("", 13)])
    m.ir_version = 7
    onnx.checker.check_model(m)
    return m


out = sys.argv[1]
os.makedirs(out, exist_ok=True)
onnx.save(model(True, [4]), os.path.join(out, "scale_first.onnx"))
onnx.save(model(False, [4]), os.path.join(out, "scale_last.onnx"))
onnx.save(model(True, [1, 4]), os.path.join(out, "scale_first_2d.onnx"))
