"""pipeline.json v2 as frozen dataclasses.

One field per JSON key, each with a default and a one-line ``doc``. ``parse.py`` turns JSON
into these generically (types, unknown keys, choices and aliases come from the field
metadata), so adding a key is adding a field here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .fields import (  # noqa: F401  (re-exported: the field helpers and shared ranges)
    CONTROL_VALUE, DTYPES, MAX_ELEMENTS, MAX_TOKENS, Range, SAMPLE_RATE, SEED, SHAPE, TOKENS,
    TOKEN_ID, _num, spec)
from .preprocessing_schema import (  # noqa: F401  (re-exported: the preprocessing section)
    AudioContext, AudioPreprocessing, CENTER_PADS, CONTEXT_ENCODE, ExpectedTensor, IMAGE_FORMATS,
    ImagePreprocessing, LogMelFeatures, PhonemesPreprocessing, Preprocessing, SpeechPreprocessing,
    TOOL_ARGUMENT_KEYS, TOOL_CALL_KEYS, TextPreprocessing, ToolCallFormat, UNICODE_FORMS)
from .registry import DRAFTERS, LOOPS, PHONEMIZERS, SCHEDULERS  # noqa: F401

FLOW_PHASES = ("init", "step", "final")
PHASE_ALIASES = {"once": "init", "prompt": "init", "always": "step"}
LOOP_MODES = ("batched", "per_image")
# which step-phase passes run a step: every one; those feeding more than one token per sequence
# (a prompt, a chat turn, a draft to check); those feeding exactly one (onnxruntime-genai's
# run_on_prompt / run_on_token_gen)
PASS_KINDS = ("any", "prompt", "token_gen")
KV_FORMATS = ("auto", "separate", "combined", "shared_buffer")
POSITION_STRATEGIES = ("auto", "default", "mrope_3d", "windowed")
GENERATION_LOOPS = LOOPS   # names registered by loops/; SCHEDULERS: by diffusion/ (config/registry.py)
SPECULATIVE_METHODS = DRAFTERS   # names registered by search/speculative.py (config/registry.py)


# ---- pipeline.sessions -------------------------------------------------------------------


@dataclass(frozen=True)
class SessionSpec:
    file: Any = spec(None, "ONNX file, or a map execution provider -> file variant", required=True,
                     numbers="none: file names (config/validate.py refuses others)")
    execution_provider: tuple[str, ...] = spec((), "provider, or ordered fallback list", one_or_many=True)
    session_options: dict[str, Any] = spec(doc="engine session options", factory=dict,
                                           numbers="the backend's session_options (onnxruntime's types)")
    optional: bool = spec(False, "a missing optional session and its flow steps are skipped")
    external_data: tuple[str, ...] | dict[str, tuple[str, ...]] = spec(
        (), "data files the .onnx refers to, or a map execution provider -> those of its variant",
        one_or_many=True)

    def file_for(self, provider: str | None) -> str:
        """The file variant made for ``provider`` (falls back to ``default``, then ``cpu``)."""
        return _variant(self.file, provider)

    def data_for(self, provider: str | None) -> tuple[str, ...]:
        """The external data files of the variant made for ``provider``."""
        return tuple(_variant(self.external_data, provider) or ())


def _variant(value, provider: str | None):
    if not isinstance(value, dict):
        return value
    for key in (provider, "default", "cpu"):
        if key and key in value:
            return value[key]
    return next(iter(value.values()), None)


# ---- pipeline.flow / dataflow ------------------------------------------------------------


@dataclass(frozen=True)
class DynamicShape:
    source: str = spec(None, "tensor giving per-item sizes", required=True)
    apply_to_dims: tuple[int, ...] = spec((), "dims of loop_over sliced by source",
                                          range=Range(0, 63, "a dimension index"))


@dataclass(frozen=True)
class MergeFeatures:
    """Rows of an earlier session's output written over this step's output, one per position
    of a placeholder token (a vision-language model's image features at its image tokens)."""

    from_: str = spec(None, "session.output: one row per placeholder, in order", required=True)
    into: str = spec(None, "this step's output they are written into, [batch, seq, hidden]; or "
                           "its input they are fed to (the session merges them itself: the rows "
                           "on a run whose ids hold the token, none [0, hidden] on other runs)",
                     required=True)
    token: str = spec("image_token", "the tokens.extra key whose id marks the positions")


@dataclass(frozen=True)
class FlowStep:
    run: str = spec(None, "session to run", required=True)
    when: str = spec("step", "phase", choices=FLOW_PHASES, aliases=PHASE_ALIASES)
    loop: str = spec("batched", "how inputs are passed", choices=LOOP_MODES)
    loop_over: str | None = spec(None, "input iterated by per_image")
    dynamic_shape: DynamicShape | None = spec(None, "per-item slicing for per_image")
    repeat: int = spec(1, "inner loop count within the phase", range=Range(1, 1024, "runs"))
    counter: str | None = spec(None, "input that receives the repeat index")
    optional: bool = spec(False, "skip when its session is missing")
    on: str = spec("any", "step phase: which passes run it (prompt: more than one token per "
                          "sequence fed; token_gen: one)", choices=PASS_KINDS)
    cross_attention_from: str | None = spec(None, "encoder session whose outputs are frozen")
    merge: MergeFeatures | tuple[MergeFeatures, ...] | None = spec(
        None, "write an earlier session's rows over this step's output at a token's positions "
              "(engine/merge.py); a list merges several sources, each at its own token")

    def merges(self, index: int) -> list[tuple[MergeFeatures, str]]:
        """Each of ``merge``'s entries with its JSON path (step ``index`` of pipeline.flow)."""
        path = f"$.pipeline.flow[{index}].merge"
        if self.merge is None:
            return []
        if isinstance(self.merge, MergeFeatures):
            return [(self.merge, path)]
        return [(m, f"{path}[{k}]") for k, m in enumerate(self.merge)]


@dataclass(frozen=True)
class Wire:
    from_: str = spec(None, "session.output or inputs.NAME", required=True)
    to: str = spec(None, "session.input or outputs.NAME", required=True)


# ---- pipeline.state ----------------------------------------------------------------------


@dataclass(frozen=True)
class SlidingWindow:
    """Layers whose attention sees only the last ``window_size`` positions keep a bounded cache.

    As onnxruntime-genai does it: each listed layer's past and present are fixed buffers of
    ``window_size + slack`` positions, and the graph's GroupQueryAttention (attribute
    ``sliding_window_cache=1``) evicts old positions itself. See state/sliding_window.py.
    """

    window_size: int = spec(None, "the attention window (the layers' local_window_size), > 0",
                            required=True, range=Range(1, MAX_TOKENS, "positions"))
    layers: tuple[int, ...] = spec((), "layers with a bounded cache (empty: every KV layer)",
                                   range=Range(0, 4095, "a layer index"))
    cache_slack: int = spec(0, "positions kept beyond the window (0: the provider's default, "
                               "16 on cpu/wasm, 0 on cuda)", range=Range(0, 65_536, "positions"))


@dataclass(frozen=True)
class KVCacheSpec:
    format: str = spec("auto", "cache layout", choices=KV_FORMATS)
    past_key_pattern: str | None = spec(None, "past key input name with {layer}")
    past_value_pattern: str | None = spec(None, "past value input name with {layer}")
    present_key_pattern: str | None = spec(None, "present key output name with {layer}")
    present_value_pattern: str | None = spec(None, "present value output name with {layer}")
    past_pattern: str | None = spec(None, "combined past input name with {layer}")
    present_pattern: str | None = spec(None, "combined present output name with {layer}")
    sliding_window: SlidingWindow | None = spec(None, "bounded cache for some layers")
    num_heads: int | None = spec(None, "KV heads, where the session leaves that dim symbolic",
                                 range=Range(1, 1024, "heads"))
    head_size: int | None = spec(None, "head size, where the session leaves that dim symbolic",
                                 range=Range(1, 16_384, "values per head"))


@dataclass(frozen=True)
class PositionIdsSpec:
    strategy: str = spec("auto", "how position ids are made", choices=POSITION_STRATEGIES)
    input_name: str = spec("position_ids", "session input that takes them")
    grid_source: str | None = spec(None, "mrope_3d: session.output giving the image grids [n, 3]; "
                                         "default: the grids preprocessing.image made")
    spatial_merge_size: int | None = spec(None, "mrope_3d: grid cells merged into one token along "
                                                "h and w; default: preprocessing.image's merge_size",
                                                range=Range(1, 64, "grid cells"))


@dataclass(frozen=True)
class AttentionMaskSpec:
    input_name: str = spec("attention_mask", "session input that takes the mask")


@dataclass(frozen=True)
class CacheBranchSpec:
    input_name: str = spec("use_cache_branch", "bool input: false while the past is empty, true after")


@dataclass(frozen=True)
class CrossCacheSpec:
    source: str = spec(None, "encoder session", required=True)
    frozen: bool = spec(True, "computed once, reused every step")


@dataclass(frozen=True)
class CrossKVSpec:
    """Cross-attention keys/values a merged decoder makes itself on its first step (Optimum's
    encoder-decoder export): fed empty then, taken from its outputs, fed back unchanged on every
    later step; later steps' outputs of those names are dropped. See state/cross_kv.py."""

    past_pattern: str = spec(None, "input name with {layer} and {kv} (key or value)", required=True)
    present_pattern: str = spec(None, "output name with {layer} and {kv}", required=True)


@dataclass(frozen=True)
class RecurrentSpec:
    input: str = spec(None, 'state input name; with "{layer}", one state per layer found in the '
                            "session's inputs", required=True)
    output: str = spec(None, 'state output name fed back next step ("{layer}" as in input)',
                       required=True)
    shape: tuple[int, ...] = spec((), "initial state shape; [] (or absent): the session input's, "
                                      "its batch axis the step's batch", range=SHAPE)
    dtype: str | None = spec(None, "element type; absent: the session input's (checked when given)",
                             choices=DTYPES)
    layers: tuple[int, ...] = spec((), 'with "{layer}": the layers that must have this state '
                                        "(checked against the session); [] (or absent): those it has",
                                    range=Range(0, 4095, "a layer index"))
    checkpoints: int = spec(0, "states kept from the last runs, so a chat or draft that cuts back "
                               "to one of those lengths continues exactly",
                            range=Range(0, 64, "runs"))


@dataclass(frozen=True)
class StateSpec:
    kv_cache: KVCacheSpec = spec(doc="KV cache", factory=KVCacheSpec)
    position_ids: PositionIdsSpec = spec(doc="position ids", factory=PositionIdsSpec)
    attention_mask: AttentionMaskSpec = spec(doc="attention mask", factory=AttentionMaskSpec)
    use_cache_branch: CacheBranchSpec = spec(doc="merged decoders' past/no-past switch (Optimum)",
                                             factory=CacheBranchSpec)
    cross_cache: CrossCacheSpec | None = spec(None, "frozen encoder outputs")
    cross_kv: CrossKVSpec | None = spec(None, "cross-attention keys/values made on the first step")
    recurrent: tuple[RecurrentSpec, ...] = spec((), "state pairs carried step to step")


# ---- pipeline ------------------------------------------------------------------------------


@dataclass(frozen=True)
class AudioOutput:
    sample_rate: int = spec(None, "samples per second of the waveform", required=True, range=SAMPLE_RATE)
    sentence_silence: float = spec(0.2, "seconds of silence put between sentences",
                                   range=Range(0, 10, "seconds"))
    peak_normalize: bool = spec(False, "scale each sentence so its peak is 1.0")


@dataclass(frozen=True)
class SegmentControls:
    """Per-chunk speech probabilities -> speech segments (speech/segments.py). Each key names
    the pipeline input (a scalar in pipeline.inputs, with its default and range) that sets it."""

    threshold: str = spec(None, "input: a chunk at or above this probability is speech", required=True)
    negative_threshold: str = spec(None, "input: in speech, a chunk below this is silence",
                                   required=True)
    min_silence_ms: str = spec(None, "input: silence that ends a segment", required=True)
    speech_pad_ms: str = spec(None, "input: time added before and after each segment", required=True)
    min_speech_ms: str = spec(None, "input: shorter speech is dropped", required=True)


@dataclass(frozen=True)
class ImageOutput:
    """The output is an image: values -> 8-bit pixels (diffusion/image.py)."""

    value_range: tuple[float, ...] = spec((-1.0, 1.0), "[low, high] mapped to 0 and 255, clamped "
                                                        "([-1, 1]: a VAE decoder's output)",
                                         range=Range(-1e6, 1e6, "an output value"))
    layout: str = spec("NCHW", "dims of the tensor: batch, channels (1, 3 or 4), height, width",
                       choices=("NCHW", "NHWC"))


@dataclass(frozen=True)
class OutputRef:
    session: str = spec(None, "session producing the result", required=True)
    name: str = spec(None, "its output name", required=True)
    audio: AudioOutput | None = spec(None, "the output is a waveform: how to make audio of it")
    segments: SegmentControls | None = spec(None, "the output is a speech probability per chunk "
                                                  "(streaming loop): how segments are made of it")
    image: ImageOutput | None = spec(None, "the output is an image: how to make pixels of it")


@dataclass(frozen=True)
class InputSpec:
    dtype: str = spec("float32", "element type", choices=DTYPES)
    shape: tuple[int, ...] = spec((), "tensor shape ([] for a scalar; a 0 dim: an empty tensor, "
                                      "e.g. an embedding's audio_features without audio)",
                                  range=Range(0, MAX_ELEMENTS, "a dimension size", elements=MAX_ELEMENTS))
    default: Any = spec(None, "value used when the caller gives none (a number or a flat list)",
                        range=CONTROL_VALUE)
    min: float | None = spec(None, "smallest value a caller may give", range=CONTROL_VALUE)
    max: float | None = spec(None, "largest value a caller may give", range=CONTROL_VALUE)
    doc: str = spec("", "what it controls (shown in the UI)")
    pack: tuple[str, ...] = spec((), "a 1-D tensor made of these other inputs' values, in order")
    options: dict[str, Any] = spec(doc="a choice control: option name -> the value the flow gets "
                                       "(a number or a flat list; default is then an option name)",
                                   factory=dict, range=CONTROL_VALUE)


@dataclass(frozen=True)
class PluginSpec:
    module: str = spec(None, "Python file inside the bundle (relative path)", required=True)
    entry_point: str = spec("create", "function the runtime calls")


@dataclass(frozen=True)
class Pipeline:
    extends: str | None = spec(None, "built-in preset")
    sessions: dict[str, SessionSpec] = spec(doc="ONNX sessions by name", factory=dict)
    flow: tuple[FlowStep, ...] = spec((), "ordered steps")
    dataflow: tuple[Wire, ...] = spec((), "explicit wires; the rest match by name")
    state: StateSpec = spec(doc="state carried between steps", factory=StateSpec)
    inputs: dict[str, InputSpec] = spec(doc="caller controls with defaults and ranges", factory=dict)
    output: OutputRef | None = spec(None, "the pipeline's result (a tensor or a waveform)")
    plugin: PluginSpec | None = spec(None, "escape hatch for orchestration")


# ---- tokens / generation / preprocessing --------------------------------------------------


@dataclass(frozen=True)
class Tokens:
    eos: tuple[int, ...] = spec((), "end-of-sequence ids", one_or_many=True, range=TOKEN_ID)
    pad: int | None = spec(None, "padding id", range=TOKEN_ID)
    bos: int | None = spec(None, "beginning-of-sequence id", range=TOKEN_ID)
    decoder_start: int | None = spec(None, "first decoder id (encoder-decoder)", range=TOKEN_ID)
    decoder_prefix: tuple[int, ...] = spec((), "ids every token loop starts from when the caller gives "
                                               "none (e.g. start, language, task)", one_or_many=True,
                                           range=TOKEN_ID)
    # -1: a placeholder an embedding session replaces itself (onnxruntime-genai's phi3v)
    extra: dict[str, Any] = spec(doc="model-specific ids (image_token, ...)", factory=dict,
                                 range=Range(-1, 2 ** 31 - 1, "a token id (or -1, a placeholder)"))


@dataclass(frozen=True)
class Sampling:
    do_sample: bool = spec(False, "sample instead of greedy")
    temperature: float = spec(1.0, "logit divisor; 0 means greedy (as a call's temperature 0)",
                               range=Range(0, 1000, "a logit divisor; 0 means greedy"))
    top_k: int = spec(50, "keep the k best (0: all)", range=Range(0, 2 ** 31 - 1, "tokens"))
    top_p: float = spec(1.0, "nucleus mass", range=Range(0, 1, "a probability mass", open_low=True))
    min_p: float = spec(0.0, "drop tokens below min_p * best probability",
                        range=Range(0, 1, "a fraction of the best probability", open_high=True))
    repetition_penalty: float = spec(1.0, "penalty on already seen ids",
                                     range=Range(0, 1000, "a logit divisor", open_low=True))
    num_beams: int = spec(1, "beam width: > 1 runs beam search (search/beam.py), the decoder "
                             "batched over the beams", range=Range(1, 64, "beams"))
    no_repeat_ngram_size: int = spec(0, "n > 0: no n-gram of the ids so far (prompt included) "
                                        "is generated twice", range=TOKENS)
    length_penalty: float = spec(1.0, "beam search: a finished beam's score is its summed "
                                      "log-probability / (new tokens ** length_penalty)",
                                 range=Range(-10, 10, "an exponent of the length"))
    early_stopping: bool | str = spec(False, 'beam search: true stops once num_beams beams have '
                                             'finished; false stops when no running beam can beat '
                                             'them by a heuristic; "never" when none can at all')
    num_return_sequences: int = spec(1, "beam search: the best finished beams returned (1..num_beams)",
                                     range=Range(1, 64, "beams"))
    random_seed: int = spec(-1, "seed; -1 picks one", range=SEED)


@dataclass(frozen=True)
class Stop:
    token_ids: tuple[int, ...] = spec((), "extra ids that end generation", one_or_many=True, range=TOKEN_ID)
    strings: tuple[str, ...] = spec((), "texts that end generation", one_or_many=True)


@dataclass(frozen=True)
class Streaming:
    """A streamed pipeline input cut into fixed-size chunks; the step flow runs once per chunk
    (loops/streaming.py). The last partial chunk is zero-padded."""

    input: str = spec(None, "pipeline input that takes each chunk, shape [1, context + chunk_size]",
                      required=True)
    chunk_size: int = spec(None, "samples per chunk", required=True, range=Range(1, 2 ** 20, "samples"))
    context: int = spec(0, "samples before each chunk put in front of it (zeros at the start)",
                        range=Range(0, 2 ** 20, "samples"))
    sample_rate: int = spec(None, "samples per second the input must have (the time base)",
                            required=True, range=SAMPLE_RATE)
    sample_rate_input: str | None = spec(None, "pipeline input given sample_rate as a scalar")


@dataclass(frozen=True)
class SuppressTokens:
    """Ids the sampler graph never picks (their logits set to -inf before the choice)."""

    always: tuple[int, ...] = spec((), "never generated", one_or_many=True, range=TOKEN_ID)
    at_start: tuple[int, ...] = spec((), "not generated as the first new token of a call",
                                     one_or_many=True, range=TOKEN_ID)


@dataclass(frozen=True)
class Speculative:
    """Draft tokens verified several at a time in one decoder pass (search/speculative.py)."""

    method: str = spec(None, "where drafts come from", choices=SPECULATIVE_METHODS, required=True)
    max_draft: int = spec(4, "most draft tokens verified per pass (1..32)", range=Range(1, 32, "tokens"))
    ngram: int = spec(3, "longest n-gram looked up in the ids so far (then shorter ones, down to 1)",
                      range=Range(1, 1024, "tokens"))


@dataclass(frozen=True)
class Denoising:
    """The denoising loop's wiring (loops/denoising.py): pipeline inputs it gives, the output it
    reads, the latents' shape and noise. Names are pipeline inputs/outputs: a session input of
    the same name takes them, or a dataflow wire ("inputs.NAME" / "outputs.NAME")."""

    latent_input: str = spec(None, "pipeline input given the latents each step (scaled for the "
                                   "scheduler; batch doubled with batched guidance)", required=True)
    timestep_input: str = spec(None, "pipeline input given the timestep each step (the session "
                                     "input's dtype; a scalar or one per batch row)", required=True)
    output: str = spec(None, "pipeline output read each step: the denoiser's prediction (noise, "
                             "v or x0, per the scheduler's prediction_type)", required=True)
    latent_shape: tuple[int, ...] = spec((), "the latents' shape, e.g. [1, 4, 64, 64]", required=True,
                                         range=SHAPE)
    final_input: str | None = spec(None, "pipeline input the final phase gets the denoised latents "
                                         "as (required when there is a final phase)")
    latent_scale: float = spec(1.0, "the denoised latents are divided by this before the final phase "
                                    "(a VAE's scaling_factor, e.g. 0.18215)",
                               range=Range(-1000, 1000, "a divisor of the latents"))
    seed: int = spec(-1, "seed of the initial noise (diffusion/noise.py); -1 picks one", range=SEED)
    scheduler_config: Any = spec(None, "scheduler settings as diffusers' scheduler_config.json: an "
                                       "object, or the name of such a file in the bundle",
                                 numbers="diffusion/settings.py's key tables (each key's kind and range)")


@dataclass(frozen=True)
class Generation:
    loop: str = spec("autoregressive", "loop strategy", choices=GENERATION_LOOPS)
    streaming: Streaming | None = spec(None, "chunked input of the streaming loop")
    max_length: int = spec(2048, "prompt + new tokens", range=Range(1, MAX_TOKENS, "tokens"))
    min_length: int = spec(0, "the end ids are masked in the sampler until the ids (prompt "
                              "included) are this long", range=TOKENS)
    min_new_tokens: int = spec(0, "the end ids are masked in the sampler until this many new tokens",
                               range=TOKENS)
    sampling: Sampling = spec(doc="search defaults", factory=Sampling)
    stop: Stop = spec(doc="stopping criteria", factory=Stop)
    suppress_tokens: SuppressTokens | None = spec(None, "ids masked out in the sampler graph")
    speculative: Speculative | None = spec(None, "speculative decoding (a search default; per call too)")
    denoising: Denoising | None = spec(None, "the denoising loop's inputs, output and latents")
    num_steps: int = spec(0, "denoising steps (denoising loop; >= 1 there)", range=Range(0, 10_000, "steps"))
    scheduler: str | None = spec(None, "denoising scheduler (else the one scheduler_config's "
                                       "_class_name names)", choices=SCHEDULERS)
    guidance_scale: float = spec(1.0, "classifier-free guidance scale; > 1 runs the denoiser on "
                                      "[unconditional, conditional]",
                                 range=Range(0, 1000, "a guidance scale"))


@dataclass(frozen=True)
class PipelineSpec:
    """The resolved pipeline.json: what every other stage sees."""

    version: int = spec(2, "schema version", required=True, range=Range(2, 2, "the schema version"))
    pipeline: Pipeline = spec(doc="sessions, flow, dataflow, state", factory=Pipeline)
    tokens: Tokens = spec(doc="special token ids", factory=Tokens)
    generation: Generation = spec(doc="loop and search", factory=Generation)
    preprocessing: Preprocessing = spec(doc="input processing", factory=Preprocessing)
    metadata: dict[str, Any] = spec(doc="free-form, never used for dispatch", factory=dict,
                                    numbers="none: never read by the runtime")
