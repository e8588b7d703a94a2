"""The worker protocol's results and events as Python makes them (web_entry.py sends them).

Each dataclass here is the Python side of the TypeScript interface of the same name in
web/src/protocol.ts; tests/py/test_web_protocol.py checks their fields agree, so a field renamed
on one side only fails a test. Keys are snake_case on both sides. Plain CPython: no Pyodide.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

# fields a wire dataclass leaves out of its dict when they are None (optional in TypeScript: `?:`)
_OPTIONAL = "wire_optional"


def optional(default=None):
    """A field sent only when it is not None (``name?: type`` in web/src/protocol.ts)."""
    return field(default=default, metadata={_OPTIONAL: True})


def to_wire(value):
    """``value`` as JSON-ready data: wire dataclasses to dicts (optional None fields left out)."""
    if hasattr(value, "__dataclass_fields__"):
        out = {}
        for f in fields(value):
            item = getattr(value, f.name)
            if item is None and f.metadata.get(_OPTIONAL):
                continue
            out[f.name] = to_wire(item)
        return out
    if isinstance(value, dict):
        return {k: to_wire(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_wire(v) for v in value]
    return value


@dataclass
class HeapInfo:
    weight_bytes: int              # the session's weights as they sit in the WASM heap
    temp_bytes: int                # the largest buffer a MatMulNBits left as it is allocates per call
    expanded: int                  # MatMulNBits nodes opened as fp32 MatMuls (exact: heap/nbits.py)
    kept: int                      # MatMulNBits nodes left as they are
    kept_why: list[str]            # why (a budget, or what the node has that the expansion does not do)
    widened: int = 0               # fp16 MatMul weights opened as fp32 (heap/float16.py: what the engine does)
    heaps: int = 1                 # onnxruntime-web instances its graph is spread over (heap/shards.py)


@dataclass
class SessionInfo:
    provider: str
    file: str
    heap: HeapInfo | None = optional()   # wasm sessions: what the heap plan made of the file (heap/plan.py)


@dataclass
class ControlInfo:
    name: str
    default: float | str
    min: float | None
    max: float | None
    doc: str
    options: list[str]


@dataclass
class OpenedBundle:
    """What Python reports of a bundle it opened (the worker adds the runtime's part: LoadedInfo)."""

    kind: str                      # text | speech | voice-activity | transcription | image
    sample_rate: int | None        # speech: of its audio; voice-activity, transcription: taken
    controls: list[ControlInfo]
    sessions: dict[str, SessionInfo]
    warnings: list[str]
    structure: str
    has_chat_template: bool
    load_ms: float                 # warm_up_ms included
    warm_up_ms: float
    dtype: str | None              # the transformers.js precision opened; None for other bundles
    dtypes: list[str]              # the precisions the folder offers; empty for other bundles
    heap: HeapFit | None = optional()   # wasm: the bundle's fit in the WASM heap


@dataclass
class HeapFit:
    """A bundle's fit in onnxruntime-web's WASM heap (heap/fit.py), in bytes."""

    limit_bytes: int               # the heap's size limit (4 GiB)
    need_bytes: int                # what the load needs (all MatMulNBits expanded when that fits)
    full_bytes: int                # with every MatMulNBits expanded (the fast plan)
    least_bytes: int               # with none expanded (weights as stored)
    kv_bytes: int                  # the KV cache at context_length (twice: a step's past and present)
    work_bytes: int                # one prefill chunk's working memory
    engine_bytes: int              # the engine's own
    context_length: int            # tokens the KV cache is reserved for (generation stops there)
    weights_exact: bool            # weights read from the graphs (else counted from config.json)
    expanded_all: bool             # every MatMulNBits opens expanded
    heaps: int                     # onnxruntime-web instances (4 GiB heaps) the weights are spread over


@dataclass
class FilesNeeded:
    files: list[str]               # the large files this bundle opens here, before any is fetched
    heap: HeapFit | None = optional()   # wasm: the heap it will need


@dataclass
class TokenEvent:
    text: str                      # new text since the previous event
    token_ids: list[int]


@dataclass
class SpeculationStats:
    passes: int
    drafted: int
    accepted: int
    acceptance_rate: float


@dataclass
class BeamSequence:
    tokens: list[int]
    score: float
    finish_reason: str | None
    text: str | None = optional()


@dataclass
class GrammarInfo:
    kind: str
    compile_ms: float
    cached: bool
    vocabulary_ms: float
    complete: bool
    # when complete: checked against the constraint (grammar/check.py); None: not checked
    valid: bool | None = optional()
    error: str | None = optional()


@dataclass
class GenerationResult:
    tokens: list[int]
    text: str
    finish_reason: str | None
    prompt_tokens: int
    cached_tokens: int
    prefill_ms: float
    decode_tokens_per_s: float
    speculative: SpeculationStats | None = optional()
    sequences: list[BeamSequence] | None = optional()
    padded: list[list[int]] | None = optional()
    tool_calls: list[dict] | None = optional()   # OpenAI's shape, as the pipeline made them
    grammar: GrammarInfo | None = optional()


@dataclass
class SentenceInfo:
    text: str
    samples: int
    audio_seconds: float
    compute_seconds: float
    ids: list[int]
    tokens: list[int] | None = optional()


@dataclass
class SpeechResult:
    audio_seconds: float
    compute_seconds: float
    sample_rate: int
    real_time_factor: float
    finish_reason: str
    samples: int
    sentences: list[SentenceInfo]
    warnings: list[str]


@dataclass
class TranscriptWindow:
    index: int
    start_seconds: float
    end_seconds: float
    text: str
    tokens: list[int]
    compute_seconds: float


@dataclass
class TranscriptionResult:
    text: str
    tokens: list[int]
    audio_seconds: float
    compute_seconds: float
    windows: list[TranscriptWindow]
    finish_reason: str


@dataclass
class VadEvent:
    type: str                      # speech_start | speech_pause | speech_end
    start: float
    time: float
    end: float | None = optional()   # speech_pause and speech_end


@dataclass
class VoiceActivityResult:
    segments: list[list[float]]
    probabilities: list[float]
    events: list[VadEvent]
    audio_seconds: float
    compute_seconds: float
    sample_rate: int
    chunk_size: int
    chunks: int


@dataclass
class ListenStarted:
    sample_rate: int


@dataclass
class ListenHeard:
    events: list[VadEvent]


@dataclass
class StepEvent:
    step: int
    steps: int


@dataclass
class RunResult:
    """A run's summary: the options it ran with (the seed it picked included), output shapes."""

    compute_seconds: float
    shapes: dict[str, list[int]]
    steps: int                     # denoising steps done (0 for a single pass)
    finish_reason: str             # done | cancelled
    seed: int | None = optional()
    num_steps: int | None = optional()
    guidance_scale: float | None = optional()
    scheduler: str | None = optional()


# The dataclasses above, each checked against the interface of its name in web/src/protocol.ts.
WIRE_TYPES = (HeapFit, HeapInfo, SessionInfo, ControlInfo, OpenedBundle, FilesNeeded, TokenEvent, SpeculationStats,
              BeamSequence, GrammarInfo, GenerationResult, SentenceInfo, SpeechResult, TranscriptWindow,
              TranscriptionResult, VadEvent, VoiceActivityResult, ListenStarted, ListenHeard,
              StepEvent, RunResult)


# ---- from the pipeline's own results ----------------------------------------------------------

def generation_result(result) -> GenerationResult:
    spec = result.speculative
    return GenerationResult(
        tokens=list(result.tokens), text=result.text, finish_reason=result.finish_reason,
        prompt_tokens=result.prompt_tokens, cached_tokens=result.cached_tokens,
        prefill_ms=round(result.prefill_ms, 3), decode_tokens_per_s=round(result.decode_tokens_per_s, 3),
        speculative=None if spec is None else SpeculationStats(**spec),
        sequences=None if result.sequences is None else [BeamSequence(**s) for s in result.sequences],
        padded=result.padded, tool_calls=getattr(result, "tool_calls", None),
        grammar=None if result.grammar is None else GrammarInfo(**result.grammar))


def sentence_info(sentence) -> SentenceInfo:
    return SentenceInfo(text=sentence.text, samples=sentence.samples, ids=list(sentence.ids),
                        audio_seconds=round(sentence.audio_seconds, 6),
                        compute_seconds=round(sentence.compute_seconds, 6),
                        tokens=list(sentence.tokens) if sentence.tokens else None)


def speech_result(result) -> SpeechResult:
    return SpeechResult(**{k: v for k, v in result.to_dict().items() if k != "sentences"},
                        sentences=[sentence_info(s) for s in result.sentences])


def transcript_window(window) -> TranscriptWindow:
    return TranscriptWindow(**window.to_dict())


def transcription_result(result) -> TranscriptionResult:
    return TranscriptionResult(**result.to_dict(), windows=[transcript_window(w) for w in result.windows],
                               finish_reason=result.finish_reason)


def vad_event(event) -> VadEvent:
    return VadEvent(**event.to_dict())


def voice_activity_result(result) -> VoiceActivityResult:
    return VoiceActivityResult(**result.to_dict(probabilities=True), events=[vad_event(e) for e in result.events])


def control_info(control) -> ControlInfo:
    return ControlInfo(**control.to_dict())
