"""Piper's phoneme ids for a text, computed the way Piper does it, straight from espeak-ng.

The independent reference for onnxpipe's phonemizer: it calls the `espeak-ng` program itself
(`-q --ipa`, which prints one line per clause and drops the punctuation), puts each clause's
punctuation back after it, ends a sentence at . ! ? and maps every code point through the
voice's ``phoneme_id_map`` as Piper does: ``^ _ (phoneme _)* $``. None of onnxpipe's phonemizer
code (batching, sentence splitting, clean-up rules) is used.

Clause punctuation is found in the text: one of , ; : . ! ? followed by a space or the end,
which is where espeak-ng ends a clause for the plain English texts the tests use.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

CLAUSE_END = re.compile(r"[,;:.!?](?=\s|$)")
SENTENCE_END = ".!?"


def espeak_clauses(text: str, voice: str, data_path: Path | None) -> list[str]:
    """espeak-ng's IPA for ``text``, one string per clause."""
    path = [f"--path={data_path}"] if data_path else []
    out = subprocess.run(["espeak-ng", *path, "-q", "--ipa", "-v", voice, text],
                         capture_output=True, encoding="utf-8", check=True, timeout=60).stdout
    return [line.strip() for line in out.splitlines() if line.strip()]


def sentences(text: str, voice: str, data_path: Path | None) -> list[str]:
    """The phoneme string of each sentence, clause punctuation put back."""
    clauses = espeak_clauses(text, voice, data_path)
    marks = CLAUSE_END.findall(text)
    if len(marks) != len(clauses):
        raise ValueError(f"{text!r}: espeak-ng gave {len(clauses)} clauses for {len(marks)} punctuation "
                         "marks; the reference handles plain clause punctuation only")
    out, current = [], ""
    for phonemes, mark in zip(clauses, marks):
        current += phonemes + mark
        if mark in SENTENCE_END:
            out.append(current)
            current = ""
        else:
            current += " "
    return out


def ids(phonemes: str, id_map: dict[str, list[int]]) -> list[int]:
    """Piper's ids: bos, pad, then each phoneme followed by pad, then eos."""
    pad = id_map["_"]
    out = id_map["^"] + pad
    for symbol in phonemes:
        out += id_map[symbol] + pad
    return out + id_map["$"]


def voice_id_map(voice_json: Path) -> dict[str, list[int]]:
    """The ``phoneme_id_map`` of a Piper voice's .onnx.json."""
    return json.loads(Path(voice_json).read_text(encoding="utf-8"))["phoneme_id_map"]


def reference(text: str, voice: str, data_path: Path | None, id_map: dict[str, list[int]]
              ) -> list[tuple[str, list[int]]]:
    """(phonemes, ids) of each sentence of ``text``."""
    return [(s, ids(s, id_map)) for s in sentences(text, voice, data_path)]


def duration_margins(model_path: Path, sentence_ids: list[list[int]], scales: list[float]) -> list[float]:
    """How close the voice's frame durations come to a whole frame, for each sentence's ids: VITS rounds
    each phoneme's predicted duration up (the graph's one Ceil), so two engines whose kernels
    differ by less than this give the same number of frames, hence of samples. Natively, with
    the Ceil's input added as an output of a copy of the graph."""
    import numpy as np
    import onnx
    import onnxruntime as ort

    model = onnx.load(str(model_path))
    (ceil,) = [n for n in model.graph.node if n.op_type == "Ceil"]
    model.graph.output.append(onnx.helper.make_tensor_value_info(ceil.input[0], onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    out = []
    for ids in sentence_ids:
        durations = session.run([ceil.input[0]], {"input": np.array([ids], np.int64),
                                                  "input_lengths": np.array([len(ids)], np.int64),
                                                  "scales": np.array(scales, np.float32)})[0].reshape(-1)
        out.append(float(np.abs(durations - np.round(durations)).min()))
    return out
