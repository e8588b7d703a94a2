"""What the runtime worker calls (Pyodide only): one entry, ``call(verb, args_json, emit, data)``.

``VERBS`` maps each verb to its function and the arguments it takes; an unknown verb or
argument is an input error naming it. Arguments and results cross as JSON strings (results are
web_protocol dataclasses, snake_case keys), so no proxies leak across the boundary; streamed
events go out through ``emit(event, json, data)`` (``data``: a typed array or None) and bulk
audio comes in as ``data`` (a Float32Array). The worker side is workers/runtime.worker.ts.
"""

from __future__ import annotations

import json
import os
import time
from array import array

import onnxpipe_js  # type: ignore[import-not-found]  (workers/bridge.ts)
from pyodide.ffi import run_sync, to_js  # type: ignore[import-not-found]

from .api import Pipeline
from .backends.web import WebBackend
from .config import transformers_js
from .config.load import load_config
from .engine.build import session_files
from .engine.controls import tensors_from_json
from .errors import InputError, OnnxpipeError
from .heap.bundle_fit import check as heap_check, context_length, heaps as heaps_arg
from .heap.fit import with_context
from .heap.plan import EXPAND_MODES
from .text.web import load_web_text_processor
from .web_protocol import (FilesNeeded, HeapFit, HeapInfo, ListenHeard, ListenStarted, OpenedBundle, RunResult, SessionInfo,
                           StepEvent, TokenEvent, control_info, generation_result, sentence_info,
                           speech_result, to_wire, transcript_window, transcription_result, vad_event,
                           voice_activity_result)

_pipeline: Pipeline | None = None

# verb -> (function(args, emit, data), the argument names it takes)
VERBS: dict = {}


def verb(name: str, *takes: str):
    """Register ``fn`` as the handler of ``name`` taking the arguments ``takes``."""
    def register(fn):
        VERBS[name] = (fn, frozenset(takes))
        return fn
    return register


def error_json(exc: BaseException) -> str:
    kind = exc.kind if isinstance(exc, OnnxpipeError) else "internal"
    message = exc.message if isinstance(exc, OnnxpipeError) else f"{type(exc).__name__}: {exc}"
    return json.dumps({"error": {"kind": kind, "message": message}})


def check_call(name: str, args) -> tuple:
    """The handler of ``name`` and ``args`` as a dict; an unknown verb or argument is an InputError."""
    if name not in VERBS:
        raise InputError(f'unknown verb "{name}"; the Python entry takes {", ".join(sorted(VERBS))}')
    fn, takes = VERBS[name]
    if args is None:
        args = {}
    if not isinstance(args, dict):
        raise InputError(f"{name}: args must be an object, found {type(args).__name__}")
    unknown = sorted(set(args) - takes)
    if unknown:
        raise InputError(f'{name}: unknown argument "{unknown[0]}"; it takes {", ".join(sorted(takes)) or "none"}')
    return fn, args


def call(name: str, args_json: str, emit=None, data=None) -> str:
    """The one entry: run verb ``name`` -> '{"result": ...}' or '{"error": {kind, message}}'."""
    try:
        fn, args = check_call(name, json.loads(args_json or "{}"))
        return json.dumps({"result": to_wire(fn(args, emit, data))})
    except Exception as exc:  # every failure reaches the page as a typed error
        return error_json(exc)


def _emit(emit, event: str, payload, data=None) -> None:
    emit(event, json.dumps(to_wire(payload)), data)


def _object(args: dict, key: str) -> dict:
    """args[key] as a dict of its own (absent or null: empty); anything else is an input error."""
    value = args.get(key) or {}
    if not isinstance(value, dict):
        raise InputError(f"{key}: expected an object, found {type(value).__name__}")
    return dict(value)


def _rate(args: dict) -> int:
    rate = args.get("sample_rate")
    if not isinstance(rate, int) or isinstance(rate, bool):
        raise InputError(f"sample_rate: expected an integer (samples per second), found {rate!r}")
    return rate


def _samples(block) -> array:
    """A Float32Array's samples (crossing as one block of bytes)."""
    audio = array("f")
    audio.frombytes(block.to_bytes())
    return audio


def _backend(fs_dir: str, args: dict):
    expand = args.get("expand_weights") or "auto"
    if expand not in EXPAND_MODES:
        raise InputError(f'expand_weights: expected one of {", ".join(EXPAND_MODES)}, found {expand!r}')
    backend = WebBackend(fs_dir, tuple(args.get("available") or ("wasm",)), expand_weights=expand)
    providers = [args["ep"]] if args.get("ep") else None
    return backend, providers, load_config(fs_dir, dtype=args.get("dtype"))


def _heap_fit(config, backend, providers, args, sizes: dict[str, int]):
    """The bundle's fit in the WASM heap (heap/fit.py; refused when it can't fit) and the config
    with generation.max_length at the context it reserved; (None, config) off wasm."""
    context = context_length(args.get("context_length"), config.spec.generation.max_length)
    what = os.path.basename(os.path.normpath(args["dir"])) + (f" dtype {config.dtype}" if config.dtype else "")
    fit = heap_check(config, sizes, backend.providers, providers, args.get("variant"), context, what,
                     backend.expand_weights, heaps_arg(args.get("heaps")))
    if fit is None:
        return None, config
    return fit, with_context(config, fit.context)


@verb("files_needed", "dir", "ep", "available", "variant", "dtype", "sizes", "expand_weights", "context_length",
      "heaps")
def files_needed(args: dict, emit, data) -> FilesNeeded:
    """The large files (models, weights) this bundle opens here, before any is fetched, and
    whether it fits the WASM heap (a HeapError, kind "memory", when it can't)."""
    fs_dir = args["dir"]
    backend, providers, config = _backend(fs_dir, args)
    wanted = session_files(config, backend, providers, args.get("variant"))
    for name in list(wanted):   # undeclared data files by their usual name (v1 bundles)
        for guess in (name + ".data", name + "_data"):
            if guess not in wanted and os.path.exists(os.path.join(fs_dir, guess)):
                wanted.append(guess)
    sizes = args.get("sizes") or {}
    if not isinstance(sizes, dict):
        raise InputError(f"sizes: expected an object of file -> bytes, found {type(sizes).__name__}")
    fit, _ = _heap_fit(config, backend, providers, args, sizes)
    return FilesNeeded(files=wanted, heap=HeapFit(**fit.summary()) if fit is not None else None)


@verb("open_bundle", "dir", "ep", "available", "variant", "dtype", "sizes", "expand_weights", "context_length",
      "heaps")
def open_bundle(args: dict, emit, data) -> OpenedBundle:
    """Load the bundle written to ``dir``; args: {ep, available: [providers], variant, dtype,
    sizes, expand_weights, context_length, heaps}."""
    global _pipeline
    fs_dir = args["dir"]
    start = time.perf_counter()
    if _pipeline is not None:
        _pipeline.reset()
    backend, providers, config = _backend(fs_dir, args)
    fit, config = _heap_fit(config, backend, providers, args, args.get("sizes") or {})
    if fit is not None:
        backend.heap_budget = fit.budget
        if fit.heaps and fit.heaps > 1:   # one wasm session, spread over several heaps
            backend.heap_parts = {s.name: fit.heaps for s in fit.sessions}
    variant = args.get("variant")
    _pipeline = Pipeline(config, backend, providers, text_loader=load_web_text_processor,
                         variant=variant, phonemizer_loader=_web_phonemizer)
    warm_ms = _pipeline.warm_up() * 1000.0
    sessions = {name: SessionInfo(provider=s.provider,
                                  file=_pipeline.spec.pipeline.sessions[name].file_for(variant or s.provider),
                                  heap=HeapInfo(**backend.heap[name]) if name in backend.heap else None)
                for name, s in _pipeline.sessions.items()}
    # the transformers.js dtype opened (asked for, or the provider's default); None for others
    dtype = config.dtype or (transformers_js.dtype_of(fs_dir, [s.file for s in sessions.values()])
                             if config.dtypes else None)
    return OpenedBundle(
        kind=_pipeline.kind, sample_rate=_sample_rate(_pipeline),
        controls=[control_info(c) for c in _pipeline.controls], sessions=sessions,
        warnings=list(_pipeline.warnings), structure=_pipeline.structure,
        has_chat_template=bool(_pipeline.text and _pipeline.text.has_chat_template),
        load_ms=(time.perf_counter() - start) * 1000.0, warm_up_ms=warm_ms,
        dtype=dtype, dtypes=list(config.dtypes), heap=HeapFit(**fit.summary()) if fit is not None else None)


def _loaded() -> Pipeline:
    if _pipeline is None:
        raise InputError("no bundle is loaded: send a load request first")
    return _pipeline


def _web_phonemizer(bundle_dir, spec):
    from .phonemes import load_phonemizer
    from .phonemes.web import WebEspeak

    return load_phonemizer(bundle_dir, spec, engine=WebEspeak())


def _sample_rate(pipeline: Pipeline):
    """The rate of a speech bundle's audio, or the rate a voice-activity or transcription bundle
    listens at."""
    out = pipeline.spec.pipeline.output
    if pipeline.kind == "voice-activity":
        return pipeline.spec.generation.streaming.sample_rate
    if pipeline.kind == "transcription":
        return pipeline.spec.preprocessing.audio.sample_rate
    return out.audio.sample_rate if out is not None and out.audio is not None else None


def _cancelled() -> bool:
    onnxpipe_js.alive()   # every check is also word to the page that the call runs (throttled there)
    flag = onnxpipe_js.cancelFlag()   # shared memory the page writes: no wait
    if flag >= 0:
        return flag == 1
    # else one macrotask turn lets the worker take a cancel message between steps
    return bool(run_sync(onnxpipe_js.checkCancelled()))


@verb("speak", "text", "controls", "inputs")
def speak(args: dict, emit, data):
    """Text to speech; emits "audio" (SentenceInfo, Float32Array) per sentence, then "wav"
    (null, Uint8Array) with the whole WAV."""
    controls = args.get("controls") or {}
    if not isinstance(controls, dict):
        raise InputError(f"controls: expected an object of numbers, found {type(controls).__name__}")

    def on_audio(samples, sentence) -> None:
        _emit(emit, "audio", sentence_info(sentence), to_js(samples))

    inputs = tensors_from_json(args.get("inputs") or {}, "inputs")
    result = _loaded().speak(args.get("text"), inputs=inputs, on_audio=on_audio, cancel=_cancelled, **controls)
    emit("wav", "null", to_js(result.wav()))
    return speech_result(result)


@verb("generate", "messages", "prompt", "input_ids", "options")
def generate(args: dict, emit, media=None):
    """Run one generation; emits "token" (TokenEvent) per text piece. ``media`` (the data):
    {images, audios}, the worker's decoded images ({rgb: Uint8Array, width, height}) and its
    checked clips ({samples: Float32Array, sample_rate}), each absent when not given."""
    options = _object(args, "options")
    images = getattr(media, "images", None)
    audios = getattr(media, "audios", None)
    if images is not None:
        if args.get("messages") is not None:
            raise InputError("images go with a prompt or input_ids (one image token per image), "
                             "not with chat messages")
        from .image import Image
        options["images"] = [Image(i.rgb.to_bytes(), int(i.width), int(i.height)) for i in images]
    if audios is not None:
        if args.get("messages") is not None:
            raise InputError("audios go with a prompt (one <|audio_N|> tag per clip), not with chat messages")
        options["audios"] = [(_samples(clip.samples), int(clip.sample_rate)) for clip in audios]

    def on_event(event) -> None:
        if event.text or event.token_ids:
            _emit(emit, "token", TokenEvent(text=event.text, token_ids=list(event.token_ids)))

    if "inputs" in options:   # other pipeline inputs, {name: {values, shape}} (audio_features)
        options["inputs"] = tensors_from_json(options["inputs"] or {}, "options.inputs")
    pipeline = _loaded()
    if args.get("messages") is not None:   # given but empty or no list: chat() says what is wrong
        result = pipeline.chat(args["messages"], on_event=on_event, cancel=_cancelled, **options)
    else:
        result = pipeline.generate(prompt=args.get("prompt"), input_ids=args.get("input_ids"),
                                   on_event=on_event, cancel=_cancelled, **options)
    return generation_result(result)


@verb("run", "inputs", "controls", "options")
def run(args: dict, emit, data) -> RunResult:
    """A one-pass bundle (denoising, single_pass) once: args {inputs: {name: {values, shape}},
    controls, options: {seed, num_steps, guidance_scale, scheduler}}. Emits "step" (StepEvent)
    after each denoising step; then per output "output" ({name, shape}, a Float32Array, or the
    values in the JSON when not float); per image of pipeline.output.image "image" ({width,
    height, channels}, interleaved 8-bit pixels) and "png" (the file). Cancel stops between
    steps (finish_reason "cancelled", no outputs)."""
    from .diffusion.image import png, to_pixels

    options = _object(args, "options")
    controls = _object(args, "controls")
    pipeline = _loaded()
    loaded = pipeline.loaded
    loaded.require_loop(False, 'a "generate" request')
    options = pipeline.one_pass.call_options(options)   # a random seed chosen here is reported
    values = loaded.inputs(tensors_from_json(args.get("inputs") or {}, "inputs"), controls)
    steps = [0]
    stopped = [False]

    def on_step(done: int, total: int) -> None:
        steps[0] = done
        _emit(emit, "step", StepEvent(step=done, steps=total))

    def cancel() -> bool:
        stopped[0] = _cancelled()
        return stopped[0]

    result = pipeline.one_pass.run_values(values, on_step=on_step, cancel=cancel, **options)
    backend, held = loaded.backend, {id(v) for v in loaded.executor.values.values()}
    shapes = {}
    try:
        if not stopped[0]:
            for name in result.outputs:
                flat, shape = result.read(name)
                shapes[name] = list(shape)
                if all(isinstance(v, float) for v in flat):
                    emit("output", json.dumps({"name": name, "shape": list(shape)}), to_js(array("f", flat)))
                else:
                    emit("output", json.dumps({"name": name, "shape": list(shape), "values": flat}), None)
                image = loaded.spec.pipeline.output.image if name == "output" and loaded.spec.pipeline.output else None
                if image is not None:
                    for item in to_pixels(flat, shape, tuple(image.value_range), image.layout):
                        emit("image", json.dumps(dict(zip(("width", "height", "channels"), item[:3]))),
                             to_js(item[3]))
                        emit("png", "null", to_js(png(*item)))
    finally:   # tensors the loop made for this run (the executor's own go at its next reset)
        backend.dispose_many([t for t in result.outputs.values() if id(t) not in held])
    return RunResult(compute_seconds=result.compute_seconds, shapes=shapes, steps=steps[0],
                     finish_reason="cancelled" if stopped[0] else "done", **options)


@verb("detect_speech", "sample_rate", "controls")
def detect_speech(args: dict, emit, samples):
    """Speech segments of a whole recording: ``samples`` a Float32Array (crosses as one block of
    bytes); args {sample_rate, controls}."""
    controls = _object(args, "controls")
    return voice_activity_result(_loaded().detect_speech(samples.to_bytes(), _rate(args), **controls))


@verb("transcribe", "sample_rate", "options")
def transcribe(args: dict, emit, samples):
    """Speech to text: ``samples`` a Float32Array at any rate (crosses as one block of bytes);
    args {sample_rate, options}; emits "transcript" (TranscriptWindow) as each window is done."""
    rate = _rate(args)
    options = _object(args, "options")
    audio = array("f")
    audio.frombytes(samples.to_bytes())

    def on_text(window) -> None:
        _emit(emit, "transcript", transcript_window(window))

    return transcription_result(_loaded().transcribe(audio, rate, on_text=on_text, cancel=_cancelled, **options))


_detector = None   # the live speech detector of a 'listen' (workers/listen.ts)


@verb("listen_start", "controls", "pause_ms")
def listen_start(args: dict, emit, data) -> ListenStarted:
    """Start a live speech detector on the loaded voice-activity bundle; ``controls`` set its
    pipeline.inputs by name (e.g. min_silence_ms); ``pause_ms`` (optional) also reports pauses."""
    global _detector
    controls = _object(args, "controls")
    pause_ms = args.get("pause_ms")
    if pause_ms is not None and (isinstance(pause_ms, bool) or not isinstance(pause_ms, (int, float))):
        raise InputError(f"pause_ms: expected a number of milliseconds, found {type(pause_ms).__name__}")
    _detector = None
    _detector = _loaded().speech_detector(pause_ms, **controls)
    return ListenStarted(sample_rate=_detector.sample_rate)


@verb("listen_push")
def listen_push(args: dict, emit, samples) -> ListenHeard:
    """One chunk of microphone audio (a Float32Array at the detector's rate) -> the events decided."""
    if _detector is None:
        raise InputError("not listening: send a listen request first")
    return ListenHeard(events=[vad_event(e) for e in _detector.push(samples.to_bytes())])


@verb("listen_stop")
def listen_stop(args: dict, emit, data) -> None:
    """End the live detector's stream (an open speech ends unreported)."""
    global _detector
    detector, _detector = _detector, None
    if detector is not None and not detector.finished:
        detector.finish()


@verb("dispose")
def dispose(args: dict, emit, data) -> None:
    global _pipeline
    if _pipeline is not None:
        _pipeline.reset()
    _pipeline = None
