"""A pure-Python ONNX reader (no onnx, no numpy: it runs in Pyodide) and what it detects.

    info = read_model_file("model.onnx")          # graph structure only; weights are skipped
    facts = GraphFacts(info.graph)
    facts.kv_dims("past_key_values.0.key", "present.0.key")   # heads, head size, and how found

Modules: wire.py (protobuf wire format over range reads), model.py (ModelProto -> GraphInfo),
reader.py (files and range-read sources), shapes.py (static dims), attention.py (what attention
ops say about their cache), detect.py (the answers, in a documented order), session.py (a
session's graph, read on first need through the backend's ``model_reader``).
"""

from .detect import Detected, GraphFacts, KVDims
from .model import GraphInfo, ModelInfo, Node, TensorMeta, ValueInfo
from .reader import FileSource, read_model, read_model_file
from .session import SessionGraph
from .wire import BlockSource, BytesSource

__all__ = ["BlockSource", "BytesSource", "Detected", "FileSource", "GraphFacts", "GraphInfo", "KVDims",
           "ModelInfo", "Node", "SessionGraph", "TensorMeta", "ValueInfo", "read_model", "read_model_file"]
