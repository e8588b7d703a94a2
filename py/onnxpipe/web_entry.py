"""What the runtime worker calls (Pyodide only): open a bundle, generate, cancel, dispose.

Arguments and results cross as JSON strings, so no proxies leak across the boundary; token
events go out through the ``emit`` callback the worker passes in.
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
from .text.web import load_web_text_processor

_pipeline: Pipeline | None = None


def error_json(exc: BaseException) -> str:
    kind = exc.kind if isinstance(exc, OnnxpipeError) else "internal"
    message = exc.message if isinstance(exc, OnnxpipeError) else f"{type(exc).__name__}: {exc}"
    return json.dumps({"error": {"kind": kind, "message": message}})


def files_needed(fs_dir: str, options_json: str) -> str:
    """The large files (models, weights) this bundle opens here, before any is fetched."""
    try:
        options = json.loads(options_json)
        backend = WebBackend(fs_dir, tuple(options.get("available") or ("wasm",)))
        providers = [options["ep"]] if options.get("ep") else None
        config = load_config(fs_dir, dtype=options.get("dtype"))
        wanted = session_files(config, backend, providers, options.get("variant"))
        for name in list(wanted):   # undeclared data files by their usual name (v1 bundles)
            for guess in (name + ".data", name + "_data"):
                if guess not in wanted and os.path.exists(os.path.join(fs_dir, guess)):
                    wanted.append(guess)
        return json.dumps({"files": wanted})
    except Exception as exc:
        return error_json(exc)


def open_bundle(fs_dir: str, options_json: str) -> str:
    """Load the bundle written to ``fs_dir``; options: {ep, available: [providers], variant, dtype}."""
    global _pipeline
    try:
        options = json.loads(options_json)
        start = time.perf_counter()
        if _pipeline is not None:
            _pipeline.reset()
        backend = WebBackend(fs_dir, tuple(options.get("available") or ("wasm",)))
        providers = [options["ep"]] if options.get("ep") else None
        variant = options.get("variant")
        config = load_config(fs_dir, dtype=options.get("dtype"))
        _pipeline = Pipeline(config, backend, providers, text_loader=load_web_text_processor,
                             variant=variant, phonemizer_loader=_web_phonemizer)
        warm_ms = _pipeline.warm_up() * 1000.0
        sessions = {name: {"provider": s.provider,
                           "file": _pipeline.spec.pipeline.sessions[name].file_for(variant or s.provider)}
                    for name, s in _pipeline.sessions.items()}
        # the transformers.js dtype opened (asked for, or the provider's default); null for others
        dtype = config.dtype or (transformers_js.dtype_of(fs_dir, [s["file"] for s in sessions.values()])
                                 if config.dtypes else None)
        return json.dumps({"sessions": sessions, "warnings": _pipeline.warnings,
                           "dtype": dtype, "dtypes": list(config.dtypes),
                           "structure": _pipeline.structure,
                           "hasChatTemplate": bool(_pipeline.text and _pipeline.text.has_chat_template),
                           "kind": _pipeline.kind, "sampleRate": _sample_rate(_pipeline),
                           "controls": [c.to_dict() for c in _pipeline.controls],
                           "warmUpMs": warm_ms, "loadMs": (time.perf_counter() - start) * 1000.0})
    except Exception as exc:  # every failure reaches the page as a typed error
        return error_json(exc)


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
    flag = onnxpipe_js.cancelFlag()   # shared memory the page writes: no wait
    if flag >= 0:
        return flag == 1
    # else one macrotask turn lets the worker take a cancel message between steps
    return bool(run_sync(onnxpipe_js.checkCancelled()))


def speak(request_json: str, emit) -> str:
    """Text to speech; ``emit("audio", json, Float32Array)`` per sentence, then
    ``emit("wav", "", Uint8Array)`` with the whole WAV. Returns the result JSON."""
    try:
        request = json.loads(request_json)
        controls = request.get("controls") or {}
        if not isinstance(controls, dict):
            raise InputError(f"controls: expected an object of numbers, found {type(controls).__name__}")

        def on_audio(samples, sentence) -> None:
            emit("audio", json.dumps(sentence.to_dict()), to_js(samples))

        inputs = tensors_from_json(request.get("inputs") or {}, "inputs")
        result = _loaded().speak(request.get("text"), inputs=inputs, on_audio=on_audio, cancel=_cancelled,
                                 **controls)
        emit("wav", "", to_js(result.wav()))
        return json.dumps({"result": result.to_dict()})
    except Exception as exc:
        return error_json(exc)


def _object(request: dict, key: str) -> dict:
    """request[key] as a dict of its own (absent or null: empty); anything else is an input error."""
    value = request.get(key) or {}
    if not isinstance(value, dict):
        raise InputError(f"{key}: expected an object, found {type(value).__name__}")
    return dict(value)


def generate(request_json: str, emit, images=None) -> str:
    """Run one generation; ``emit(json)`` gets each token event. Returns the result JSON.
    ``images``: the worker's decoded images ({rgb: Uint8Array, width, height}), if any."""
    try:
        request = json.loads(request_json)
        options = _object(request, "options")
        if images is not None:
            if request.get("messages") is not None:
                raise InputError("images go with a prompt or inputIds (one image token per image), "
                                 "not with chat messages")
            from .image import Image
            options["images"] = [Image(i.rgb.to_bytes(), int(i.width), int(i.height)) for i in images]

        def on_event(event) -> None:
            if event.text or event.token_ids:
                emit(json.dumps({"text": event.text, "tokenIds": event.token_ids}))

        pipeline = _loaded()
        if request.get("messages") is not None:   # given but empty or no list: chat() says what is wrong
            result = pipeline.chat(request["messages"], on_event=on_event, cancel=_cancelled, **options)
        else:
            result = pipeline.generate(prompt=request.get("prompt"), input_ids=request.get("inputIds"),
                                        on_event=on_event, cancel=_cancelled, **options)
        return json.dumps({"result": result.to_dict()})
    except Exception as exc:
        return error_json(exc)


def run(request_json: str, emit) -> str:
    """A one-pass bundle (denoising, single_pass) once: request {inputs: {name: {values, shape}},
    controls, options: {seed, num_steps, guidance_scale, scheduler}}. ``emit(kind, json, data)``:
    "step" after each denoising step; then per output "output" ({name, shape}, a Float32Array, or
    the values in the JSON when not float); per image of pipeline.output.image "image" ({width,
    height, channels}, interleaved 8-bit pixels) and "png" (the file). Cancel stops between steps
    (finish_reason "cancelled", no outputs). Returns {"result": {...}} as the CLI's --json says."""
    try:
        from .diffusion.image import png, to_pixels

        request = json.loads(request_json)
        options = _object(request, "options")
        controls = _object(request, "controls")
        pipeline = _loaded()
        loaded = pipeline.loaded
        loaded.require_loop(False, 'a "generate" request')
        unknown = sorted(set(options) - set(loaded.loop.options))
        if unknown:
            takes = ", ".join(loaded.loop.options) or "none"
            raise InputError(f'options: "{unknown[0]}" is not an option of the {loaded.loop.name} loop; it takes {takes}')
        denoising = loaded.spec.generation.denoising
        if denoising is not None and options.get("seed") is None and denoising.seed < 0:
            options["seed"] = int.from_bytes(os.urandom(4), "little")   # reported, so the image can be made again
        values = loaded.inputs(tensors_from_json(request.get("inputs") or {}, "inputs"), controls)
        steps = [0]
        stopped = [False]

        def on_step(done: int, total: int) -> None:
            steps[0] = done
            emit("step", json.dumps({"step": done, "steps": total}), None)

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
                            emit("png", "", to_js(png(*item)))
        finally:   # tensors the loop made for this run (the executor's own go at its next reset)
            backend.dispose_many([t for t in result.outputs.values() if id(t) not in held])
        return json.dumps({"result": dict(options, compute_seconds=result.compute_seconds, shapes=shapes,
                                          steps=steps[0], finish_reason="cancelled" if stopped[0] else "done")})
    except Exception as exc:
        return error_json(exc)


def detect_speech(request_json: str, samples) -> str:
    """Speech segments of a whole recording: ``samples`` a Float32Array (crosses as one block of
    bytes); request {sampleRate, controls}. Returns {"result": VoiceActivityResult with probabilities}."""
    try:
        request = json.loads(request_json)
        controls = _object(request, "controls")
        rate = request.get("sampleRate")
        if not isinstance(rate, int) or isinstance(rate, bool):
            raise InputError(f"sampleRate: expected an integer (samples per second), found {rate!r}")
        result = _loaded().detect_speech(samples.to_bytes(), rate, **controls)
        return json.dumps({"result": dict(result.to_dict(probabilities=True),
                                          events=[e.to_dict() for e in result.events])})
    except Exception as exc:
        return error_json(exc)


def transcribe(request_json: str, samples, emit) -> str:
    """Speech to text: ``samples`` a Float32Array at any rate (crosses as one block of bytes);
    request {sampleRate, options}; ``emit(json)`` gets each window as it is done. Returns
    {"result": TranscriptionResult with windows and finish_reason}."""
    try:
        request = json.loads(request_json)
        rate = request.get("sampleRate")
        if not isinstance(rate, int) or isinstance(rate, bool):
            raise InputError(f"sampleRate: expected an integer (samples per second), found {rate!r}")
        options = request.get("options") or {}
        if not isinstance(options, dict):
            raise InputError(f"options: expected an object, found {type(options).__name__}")
        audio = array("f")
        audio.frombytes(samples.to_bytes())

        def on_text(window) -> None:
            emit(json.dumps(window.to_dict()))

        result = _loaded().transcribe(audio, rate, on_text=on_text, cancel=_cancelled, **options)
        return json.dumps({"result": dict(result.to_dict(), windows=[w.to_dict() for w in result.windows],
                                          finish_reason=result.finish_reason)})
    except Exception as exc:
        return error_json(exc)


_detector = None   # the live speech detector of a 'listen' (workers/listen.ts)


def listen_start(controls_json: str) -> str:
    """Start a live speech detector on the loaded voice-activity bundle; ``controls`` set its
    pipeline.inputs by name (e.g. min_silence_ms). Returns {"sample_rate"} it expects."""
    global _detector
    try:
        controls = json.loads(controls_json or "{}")
        if not isinstance(controls, dict):
            raise InputError(f"controls: expected an object, found {type(controls).__name__}")
        _detector = None
        _detector = _loaded().speech_detector(**controls)
        return json.dumps({"sample_rate": _detector.sample_rate})
    except Exception as exc:
        return error_json(exc)


def listen_push(samples) -> str:
    """One chunk of microphone audio (a Float32Array at the detector's rate) -> {"events"}."""
    try:
        if _detector is None:
            raise InputError("not listening: send a listen request first")
        events = _detector.push(samples.to_bytes())
        return json.dumps({"events": [e.to_dict() for e in events]})
    except Exception as exc:
        return error_json(exc)


def listen_stop() -> str:
    """End the live detector's stream (an open speech ends unreported)."""
    global _detector
    detector, _detector = _detector, None
    try:
        if detector is not None and not detector.finished:
            detector.finish()
        return "{}"
    except Exception as exc:
        return error_json(exc)


def dispose() -> str:
    global _pipeline
    if _pipeline is not None:
        _pipeline.reset()
    _pipeline = None
    return "{}"
