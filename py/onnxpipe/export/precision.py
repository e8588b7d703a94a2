"""Precision variants of an fp32 ONNX file, named and made as in onnx-community folders.

transformers.js picks a file by dtype: ``fp16`` -> ``model_fp16.onnx``, ``q8`` ->
``model_quantized.onnx``, ``q4`` -> ``model_q4.onnx``, ``q4f16`` -> ``model_q4f16.onnx``.
The recipes follow transformers.js's ``scripts/quantize.py``:

- ``to_fp16``: onnxruntime's float16 converter (``onnxruntime.transformers.float16``) with
  ``keep_io_types=False``, so the KV cache and the logits are float16 as in onnx-community's
  fp16 decoders; ops with no fp16 kernel stay float32 behind Casts (the converter's block list).
- ``to_q8``: dynamic int8 (``quantize_dynamic``): int8 weights, activations quantized per call
  to uint8 (MatMulInteger / DynamicQuantizeLinear); uint8 weights when the graph has a Conv,
  because onnxruntime-web has no ConvInteger for int8 weights.
- ``to_q4``: MatMul weights -> 4-bit blocks (``MatMulNBits``, symmetric, ``block_size`` 32).
- ``to_q4f16``: ``to_q4`` applied to the fp16 model: MatMulNBits with fp16 scales and fp16
  activations, every other tensor fp16 as in ``to_fp16``.

Each reads ``src`` with its external data and writes ``dst``; the weights go to
``<dst name>_data`` beside it when the model is too large for one protobuf (or when
``external=True``), as onnx-community does. CPython only (onnx, onnxruntime, numpy).

    PYTHONPATH=py python -m onnxpipe.export.precision SRC.onnx DST.onnx fp16|q8|q4|q4f16
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

# Above this many bytes of weights the file is written with external data (protobuf caps at 2 GiB).
EXTERNAL_DATA_BYTES = 1_800_000_000
# File-name suffix per dtype in an onnx-community folder (transformers.js's naming).
SUFFIXES = {"fp32": "", "fp16": "_fp16", "q8": "_quantized", "q4": "_q4", "q4f16": "_q4f16"}


def _load(src):
    import onnx

    return onnx.load(os.fspath(src), load_external_data=True)


def _weight_bytes(model) -> int:
    total = 0
    for init in model.graph.initializer:
        total += len(init.raw_data) or 0
    return total


def _save(model, dst, external: bool | None) -> Path:
    """Write ``model`` to ``dst``; weights in ``<dst>_data`` when large (or asked)."""
    import onnx

    dst = Path(dst)
    dst.parent.mkdir(parents=True, exist_ok=True)
    data = dst.with_name(dst.name + "_data")
    if data.exists():
        data.unlink()  # save_model appends to an existing data file
    if external is None:
        external = _weight_bytes(model) > EXTERNAL_DATA_BYTES
    if external:
        onnx.save_model(model, os.fspath(dst), save_as_external_data=True,
                        all_tensors_to_one_file=True, location=data.name, size_threshold=1024)
    else:
        onnx.save_model(model, os.fspath(dst))
    return dst


def fp16_model(model):
    """The fp16 ModelProto of an fp32 one (inputs/outputs fp16 too)."""
    from onnxruntime.transformers import float16

    # Shape inference needs the whole proto in memory; skip it past protobuf's 2 GiB cap.
    big = _weight_bytes(model) > EXTERNAL_DATA_BYTES
    return float16.convert_float_to_float16(
        model, keep_io_types=False, disable_shape_infer=big,
        op_block_list=list(float16.DEFAULT_OP_BLOCK_LIST))


def q4_model(model, block_size: int = 32):
    """MatMul weights of ``model`` (fp32 or fp16) -> MatMulNBits 4-bit blocks."""
    import logging

    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    # it logs one INFO line per node on a root logger it configures itself
    logging.getLogger("onnxruntime.quantization.matmul_nbits_quantizer").setLevel(logging.WARNING)
    quantizer = MatMulNBitsQuantizer(model, bits=4, block_size=block_size, is_symmetric=True)
    quantizer.process()
    return quantizer.model.model


def to_fp16(src, dst, external: bool | None = None) -> Path:
    """Write the fp16 variant (``model_fp16.onnx``) of ``src`` to ``dst``."""
    return _save(fp16_model(_load(src)), dst, external)


def to_q8(src, dst, external: bool | None = None) -> Path:
    """Write transformers.js's ``q8`` variant (``model_quantized.onnx``): dynamic int8."""
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    import onnx

    # the graph alone to look at; quantize_dynamic reads the file itself (handed a loaded model
    # it holds a second copy of every weight: 18 GB for a 1B model)
    has_conv = any(n.op_type == "Conv" for n in onnx.load(os.fspath(src), load_external_data=False).graph.node)
    # quantize_dynamic writes the file itself; go through a temporary one so ``_save`` decides
    # on external data the same way for every dtype.
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(dst))) as tmp:
        out = Path(tmp) / "q8.onnx"
        quantize_dynamic(Path(src), out, weight_type=QuantType.QUInt8 if has_conv else QuantType.QInt8,
                         use_external_data_format=True,
                         extra_options={"EnableSubgraph": True, "MatMulConstBOnly": True})
        return _save(_load(out), dst, external)


def to_q4(src, dst, block_size: int = 32, external: bool | None = None) -> Path:
    """Write the ``q4`` variant (``model_q4.onnx``): 4-bit MatMulNBits, fp32 elsewhere."""
    return _save(q4_model(_load(src), block_size), dst, external)


def to_q4f16(src, dst, block_size: int = 32, external: bool | None = None) -> Path:
    """Write the ``q4f16`` variant (``model_q4f16.onnx``): the fp16 model, MatMuls in 4 bits."""
    return _save(q4_model(fp16_model(_load(src)), block_size), dst, external)


CONVERTERS = {"fp16": to_fp16, "q8": to_q8, "q4": to_q4, "q4f16": to_q4f16}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="onnxpipe.export.precision", description=__doc__.split("\n")[0])
    parser.add_argument("src")
    parser.add_argument("dst")
    parser.add_argument("dtype", choices=sorted(CONVERTERS))
    args = parser.parse_args(argv)
    CONVERTERS[args.dtype](args.src, args.dst)
    print(args.dst)
    return 0


if __name__ == "__main__":
    sys.exit(main())
