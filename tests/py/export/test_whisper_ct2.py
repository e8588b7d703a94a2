"""The CTranslate2 model.bin reader (export/whisper_ct2.py) on a file written here byte by byte
in the layout CTranslate2's ModelSpec.save writes, split in two pieces mid-variable as the PyPI
packages split the real one; and refusals of a wrong version or a cut file."""

from __future__ import annotations

import struct

import numpy as np
import pytest

from onnxpipe.export.whisper_ct2 import read_model


def _string(text: str) -> bytes:
    raw = text.encode() + b"\0"
    return struct.pack("<H", len(raw)) + raw


def _variable(name: str, array: np.ndarray, type_id: int, raw: bytes | None = None) -> bytes:
    raw = array.tobytes() if raw is None else raw
    return (_string(name) + struct.pack("<B", array.ndim) + b"".join(struct.pack("<I", d) for d in array.shape)
            + struct.pack("<B", type_id) + struct.pack("<I", len(raw)) + raw)


def _file(version: int = 6) -> tuple[bytes, dict]:
    weight = np.arange(6, dtype=np.float16).reshape(2, 3) / 4
    heads = np.array(8, dtype=np.int16)
    scale = np.array([1.5, -2.0], dtype=np.float32)
    bf16 = np.array([1.0, -0.5], dtype=np.float32)
    bf16_raw = (bf16.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    body = (struct.pack("<I", version) + _string("WhisperSpec") + struct.pack("<I", 3) + struct.pack("<I", 4)
            + _variable("decoder/embeddings/weight", weight, 4) + _variable("decoder/num_heads", heads, 2)
            + _variable("encoder/scale", scale, 0) + _variable("encoder/bf16", bf16, 5, bf16_raw)
            + struct.pack("<I", 1) + _string("decoder/projection/weight") + _string("decoder/embeddings/weight"))
    return body, {"weight": weight, "heads": heads, "scale": scale, "bf16": bf16}


def test_reads_variables_and_aliases_across_pieces(tmp_path):
    body, want = _file()
    cut = 40   # inside the first variable
    (tmp_path / "a").write_bytes(body[:cut])
    (tmp_path / "b").write_bytes(body[cut:])
    model = read_model([tmp_path / "a", tmp_path / "b"])
    assert (model.spec, model.revision) == ("WhisperSpec", 3)
    np.testing.assert_array_equal(model.get("decoder/projection/weight"), want["weight"])
    assert model.get("decoder/embeddings/weight").dtype == np.float16
    assert int(model.get("decoder/num_heads")) == 8
    np.testing.assert_array_equal(model.get("encoder/scale"), want["scale"])
    np.testing.assert_array_equal(model.get("encoder/bf16"), want["bf16"])


def test_refuses_other_versions_and_cut_files(tmp_path):
    body, _ = _file(version=2)
    (tmp_path / "old.bin").write_bytes(body)
    with pytest.raises(ValueError, match="binary version 2"):
        read_model(tmp_path / "old.bin")
    body, _ = _file()
    (tmp_path / "cut.bin").write_bytes(body[:60])
    with pytest.raises(ValueError, match="ends early"):
        read_model(tmp_path / "cut.bin")
    (tmp_path / "extra.bin").write_bytes(body + b"\0")
    with pytest.raises(ValueError, match="unexpected bytes"):
        read_model(tmp_path / "extra.bin")
