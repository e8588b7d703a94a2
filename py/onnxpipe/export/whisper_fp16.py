"""Whisper graphs with their weights stored as fp16 where that loses nothing, computed in fp32.

The package ships Whisper in CTranslate2's fp16 format, so every weight the fp32 export holds is
an fp16 value widened. Each float32 initializer of at least ``MIN_ELEMENTS`` values that fp16
represents exactly is stored as float16 and cast back to float32 at the top of the graph (Cast);
onnxruntime folds those constant Casts when it opens the session, so the graph runs fp32's
kernels on bit-identical weights, and the files (what the browser downloads) are half the size.
Inputs and outputs keep their names.
"""

from __future__ import annotations

MIN_ELEMENTS = 1024   # smaller tensors (biases, norms, shapes) are not worth a Cast


def fp16_stored(src: str, dst: str) -> tuple[int, int]:
    """Write ``dst`` from ``src``; returns (initializers stored as fp16, float32 ones kept)."""
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(src)
    graph = model.graph
    casts, kept = [], []
    stored = left = 0
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT and np.prod(init.dims, dtype=np.int64) >= MIN_ELEMENTS:
            value = numpy_helper.to_array(init)
            half = value.astype(np.float16)
            if np.array_equal(half.astype(np.float32), value):   # exact: store it as fp16
                kept.append(numpy_helper.from_array(half, init.name + "__fp16"))
                casts.append(helper.make_node("Cast", [init.name + "__fp16"], [init.name],
                                              to=TensorProto.FLOAT, name=init.name + "__to_fp32"))
                stored += 1
                continue
            left += 1
        kept.append(init)
    del graph.initializer[:]
    graph.initializer.extend(kept)
    nodes = casts + list(graph.node)
    del graph.node[:]
    graph.node.extend(nodes)
    onnx.save(model, dst)
    return stored, left
