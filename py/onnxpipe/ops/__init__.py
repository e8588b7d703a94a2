"""Small shape-generic ONNX graphs the runtime runs itself (sampling, KV-cache glue).

Pure standard-library Python: the graphs are written by ``proto``'s minimal protobuf writer,
so they can be built inside Pyodide, where neither numpy nor ``onnx`` exist. Every factory
returns model bytes, cached per argument tuple, for the backend to open as a session.
"""

from .kv import gather_batch_many_graph, grow_seq_graph, slice_seq_many_graph, zeros_graph
from .proto import Graph, Tensor
from .sampler import beam_graph, greedy_graph, sampling_graph

__all__ = [
    "Graph",
    "Tensor",
    "beam_graph",
    "gather_batch_many_graph",
    "greedy_graph",
    "grow_seq_graph",
    "sampling_graph",
    "slice_seq_many_graph",
    "zeros_graph",
]
