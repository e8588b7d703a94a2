"""The worker protocol's two sides agree: each dataclass in onnxpipe.web_protocol has the fields
(names, and which are optional) of the TypeScript interface of its name in web/src/protocol.ts."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

import pytest

from onnxpipe import web_protocol
from onnxpipe.web_protocol import WIRE_TYPES, to_wire

PROTOCOL_TS = Path(__file__).resolve().parents[2] / "web" / "src" / "protocol.ts"


def ts_interfaces(source: str) -> dict[str, dict[str, bool]]:
    """``export interface Name { field?: type; ... }`` -> {Name: {field: optional}} (own fields
    only: an ``extends`` clause is not followed)."""
    out: dict[str, dict[str, bool]] = {}
    for match in re.finditer(r"export interface (\w+)(?:<[^>]*>)?(?: extends [^{]+)? \{", source):
        depth, i, body_start = 1, match.end(), match.end()
        while depth:
            depth += {"{": 1, "}": -1}.get(source[i], 0)
            i += 1
        body = source[body_start:i - 1]
        members: dict[str, bool] = {}
        level = 0
        for line in body.splitlines():
            code = line.split("//")[0]
            if level == 0:
                field = re.match(r"\s*(\w+)(\?)?\s*:", code)
                if field:
                    members[field.group(1)] = field.group(2) == "?"
            level += code.count("{") + code.count("<") - code.count("}") - code.count(">")
        out[match.group(1)] = members
    return out


def py_fields(cls) -> dict[str, bool]:
    return {f.name: bool(f.metadata.get("wire_optional")) for f in fields(cls)}


def mismatches(source: str) -> list[str]:
    """What differs between the dataclasses and the interfaces in ``source``, one line each."""
    interfaces = ts_interfaces(source)
    problems = []
    for cls in WIRE_TYPES:
        ts = interfaces.get(cls.__name__)
        if ts is None:
            problems.append(f"{cls.__name__}: no interface of that name in web/src/protocol.ts")
            continue
        py = py_fields(cls)
        for name in sorted(set(py) - set(ts)):
            problems.append(f"{cls.__name__}.{name}: in Python, not in TypeScript")
        for name in sorted(set(ts) - set(py)):
            problems.append(f"{cls.__name__}.{name}: in TypeScript, not in Python")
        for name in sorted(set(py) & set(ts)):
            if py[name] != ts[name]:
                problems.append(f"{cls.__name__}.{name}: optional in {'Python' if py[name] else 'TypeScript'} only")
    return problems


def test_every_wire_dataclass_matches_its_typescript_interface():
    assert mismatches(PROTOCOL_TS.read_text(encoding="utf-8")) == []


@pytest.mark.parametrize("old, new, expected", [
    ("  token_ids: number[];", "  tokenIds: number[];",
     ["TokenEvent.token_ids: in Python, not in TypeScript", "TokenEvent.tokenIds: in TypeScript, not in Python"]),
    ("  has_chat_template: boolean;", "  hasChatTemplate: boolean;",
     ["OpenedBundle.has_chat_template: in Python, not in TypeScript",
      "OpenedBundle.hasChatTemplate: in TypeScript, not in Python"]),
    ("  speculative?: SpeculationStats;", "  speculative: SpeculationStats;",
     ["GenerationResult.speculative: optional in Python only"]),
    ("export interface StepEvent {", "export interface StepInfo {",
     ["StepEvent: no interface of that name in web/src/protocol.ts"]),
])
def test_a_field_changed_on_one_side_only_is_caught(old, new, expected):
    source = PROTOCOL_TS.read_text(encoding="utf-8")
    assert source.count(old) == 1, old
    assert mismatches(source.replace(old, new)) == expected


def test_the_parser_reads_own_fields_not_nested_ones():
    source = "export interface A extends B {\n  x: { y: number };\n  z?: Record<string, { w: 1 }>; // c\n}\n"
    assert ts_interfaces(source) == {"A": {"x": False, "z": True}}


def test_to_wire_leaves_out_unset_optional_fields_only():
    result = web_protocol.GenerationResult(tokens=[1], text="a", finish_reason=None, prompt_tokens=2,
                                           cached_tokens=0, prefill_ms=1.0, decode_tokens_per_s=2.0)
    assert to_wire(result) == {"tokens": [1], "text": "a", "finish_reason": None, "prompt_tokens": 2,
                               "cached_tokens": 0, "prefill_ms": 1.0, "decode_tokens_per_s": 2.0}
    event = web_protocol.VadEvent(type="speech_end", start=0.5, time=1.0, end=0.9)
    assert to_wire(web_protocol.ListenHeard(events=[event])) == {
        "events": [{"type": "speech_end", "start": 0.5, "time": 1.0, "end": 0.9}]}


def test_the_pipeline_results_cross_as_their_own_dicts_say():
    """The wire conversions keep every key and value the pipeline's own to_dict() gives."""
    from array import array

    from onnxpipe.engine.controls import Control
    from onnxpipe.pipeline.text_generation import GenerationResult
    from onnxpipe.pipeline.transcription_result import TranscriptionResult, WindowText
    from onnxpipe.pipeline.voice_activity import VoiceActivityResult
    from onnxpipe.speech.result import SentenceAudio, SpeechResult
    from onnxpipe.speech.segments import SpeechEvent

    gen = GenerationResult(tokens=[5, 6], text="hi", finish_reason="stop", prompt_tokens=3, prefill_ms=1.23456,
                           speculative={"passes": 2, "drafted": 4, "accepted": 3, "acceptance_rate": 0.75},
                           sequences=[{"tokens": [5, 6], "text": "hi", "score": -0.5, "finish_reason": "stop"},
                                      {"tokens": [5], "score": -0.9, "finish_reason": None}],
                           padded=[[5, 6], [5, 0]])
    assert to_wire(web_protocol.generation_result(gen)) == gen.to_dict()
    plain = GenerationResult(tokens=[1], text="a", finish_reason=None)
    assert to_wire(web_protocol.generation_result(plain)) == plain.to_dict()

    sentences = [SentenceAudio("Hi.", [1, 2], 100, 0.1, 0.02), SentenceAudio("Yo.", [3], 50, 0.05, 0.01, tokens=[7])]
    speech = SpeechResult(array("f", [0.0] * 150), 1000, sentences, warnings=["w"])
    assert to_wire(web_protocol.speech_result(speech)) == dict(speech.to_dict(), sentences=[s.to_dict() for s in sentences])

    window = WindowText(0, 0.0, 1.5, "hello", [9], 0.25)
    text = TranscriptionResult("hello", [9], 1.5, 0.25, [window], "cancelled")
    assert to_wire(web_protocol.transcription_result(text)) == dict(text.to_dict(), windows=[window.to_dict()],
                                                                     finish_reason="cancelled")

    events = [SpeechEvent("speech_start", 0.1, None, 0.3), SpeechEvent("speech_end", 0.1, 0.9, 1.2)]
    vad = VoiceActivityResult([(0.1, 0.9)], array("f", [0.5, 0.25]), events, 16000, 512, 1024, 0.01)
    assert to_wire(web_protocol.voice_activity_result(vad)) == dict(vad.to_dict(probabilities=True),
                                                                    events=[e.to_dict() for e in events])

    control = Control("voice", "a", None, None, "which voice", ("a", "b"))
    assert to_wire(web_protocol.control_info(control)) == control.to_dict()
