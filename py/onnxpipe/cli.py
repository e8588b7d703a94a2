"""``onnxpipe run | chat | tts | vad | transcribe | validate | inspect | convert | serve | batch`` (also
``python -m onnxpipe``)."""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

from .errors import InputError, OnnxpipeError
from .scale.commands import add_batch_parser, add_serve_ray_args, serve_plan

EXIT_CODES = {"config": 2, "bundle": 2, "input": 3, "engine": 4}


def _ids(text: str) -> list[int]:
    try:
        return [int(x) for x in text.replace(" ", "").split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--input-ids: expected comma-separated integers, found {text!r}")


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="new tokens at most (default 256, as in the browser)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--greedy", action="store_true", help="greedy decoding")
    mode.add_argument("--sample", action="store_true", help="sample (temperature, top-k, top-p, min-p)")
    p.add_argument("--temperature", type=float)
    p.add_argument("--top-k", type=int)
    p.add_argument("--top-p", type=float)
    p.add_argument("--min-p", type=float)
    p.add_argument("--repetition-penalty", type=float)
    p.add_argument("--seed", type=int, help="random seed (same seed, same tokens)")
    p.add_argument("--stop", action="append", default=None, help="stop string (repeatable)")
    p.add_argument("--ignore-eos", action="store_true", help="keep going past end-of-sequence ids")
    p.add_argument("--min-new-tokens", type=int, help="end ids masked until this many new tokens")
    p.add_argument("--min-length", type=int, help="end ids masked until the ids (prompt included) are this long")
    p.add_argument("--no-repeat-ngram-size", type=int, help="no n-gram of this size generated twice")
    p.add_argument("--num-beams", type=int, help="beam search with this many beams (greedy: 1)")
    p.add_argument("--length-penalty", type=float, help="beam search: score / new tokens ** this")
    p.add_argument("--early-stopping", choices=("true", "false", "never"),
                   help="beam search: stop once num_beams beams finished (true), when none can "
                   "likely improve (false), or when none can (never)")
    p.add_argument("--num-return-sequences", type=int, help="beam search: the best N beams returned")
    p.add_argument("--speculative", metavar="METHOD", help="verify drafts several tokens per pass: "
                   "prompt_lookup, or off (over the bundle's generation.speculative)")
    p.add_argument("--max-draft", type=int, help="with --speculative: most draft tokens per pass")
    p.add_argument("--ngram", type=int, help="with --speculative prompt_lookup: longest n-gram looked up")
    p.add_argument("--provider", action="append", default=None,
                   help="execution provider (repeatable, in order of preference)")
    p.add_argument("--variant", help="open the files the bundle made for this provider (e.g. wasm)")
    _dtype_arg(p)


def _dtype_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", help="precision of a transformers.js folder: fp32, fp16, q8, int8, uint8, "
                   "q4, q4f16, bnb4 (default: the one that suits each execution provider)")


def _search_options(a) -> dict:
    opts = {}
    if a.greedy:
        opts["do_sample"] = False
    if a.sample:
        opts["do_sample"] = True
    for name in ("temperature", "top_k", "top_p", "min_p", "repetition_penalty", "min_new_tokens",
                 "min_length", "no_repeat_ngram_size", "num_beams", "length_penalty", "num_return_sequences"):
        if getattr(a, name) is not None:
            opts[name] = getattr(a, name)
    if a.seed is not None:
        opts["random_seed"] = a.seed
    if a.early_stopping is not None:
        opts["early_stopping"] = {"true": True, "false": False}.get(a.early_stopping, a.early_stopping)
    if a.stop:
        opts["stop_strings"] = a.stop
    if a.ignore_eos:
        opts["ignore_eos"] = True
    tuning = {k: getattr(a, k) for k in ("max_draft", "ngram") if getattr(a, k) is not None}
    if a.speculative in (None, "off") and tuning:
        raise InputError(f"--{next(iter(tuning)).replace('_', '-')}: give --speculative METHOD too")
    if a.speculative == "off":
        opts["speculative"] = None
    elif a.speculative is not None:
        opts["speculative"] = {"method": a.speculative, **tuning}
    return opts


def _structure_args(p: argparse.ArgumentParser) -> None:
    shape = p.add_mutually_exclusive_group()
    shape.add_argument("--response-format", metavar="json|FILE.json",
                       help="constrain the output: json (any JSON object) or a JSON schema file (named by its stem)")
    shape.add_argument("--regex", metavar="PATTERN", help="constrain the output to a regular expression")
    shape.add_argument("--grammar", metavar="FILE.ebnf", help="constrain the output to an EBNF grammar (root rule: root)")
    p.add_argument("--tools", metavar="FILE.json", help="with --chat: a JSON list of OpenAI function tools")
    p.add_argument("--tool-choice", metavar="auto|none|required|NAME",
                   help="with --tools: whether and which tool the reply calls (NAME: that function)")


def _read(path: str, flag: str, as_json: bool):
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f) if as_json else f.read()
    except OSError as exc:
        raise InputError(f"{flag} {path}: cannot read it: {exc.strerror}") from None
    except ValueError as exc:
        raise InputError(f"{flag} {path}: not JSON: {exc}") from None


def _structure_options(a) -> dict:
    """--response-format / --regex / --grammar / --tools / --tool-choice as call keywords."""
    opts: dict = {}
    if a.response_format == "json":
        opts["response_format"] = {"type": "json_object"}
    elif a.response_format is not None:
        name = re.sub(r"[^A-Za-z0-9_-]", "_", os.path.splitext(os.path.basename(a.response_format))[0])[:64]
        schema = _read(a.response_format, "--response-format", True)
        opts["response_format"] = {"type": "json_schema", "json_schema": {"name": name or "schema", "schema": schema}}
    elif a.regex is not None:
        opts["response_format"] = {"type": "regex", "regex": a.regex}
    elif a.grammar is not None:
        opts["response_format"] = {"type": "grammar", "grammar": _read(a.grammar, "--grammar", False)}
    if a.tools is not None:
        opts["tools"] = _read(a.tools, "--tools", True)
    if a.tool_choice is not None:
        if a.tools is None:
            raise InputError("--tool-choice: give --tools FILE.json too")
        choice = a.tool_choice
        opts["tool_choice"] = choice if choice in ("auto", "none", "required") else \
            {"type": "function", "function": {"name": choice}}
    return opts


def _tensor_arg(text: str) -> tuple[str, tuple[list, tuple[int, ...]]]:
    """--input NAME=JSON (a nested list, or a number) or NAME=@FILE.json -> (name, (flat, shape))."""
    name, eq, value = text.partition("=")
    if not eq or not name:
        raise InputError(f"--input: expected NAME=VALUES (a JSON nested list or @file.json), found {text!r}")
    try:
        if value.startswith("@"):
            with open(value[1:], encoding="utf-8") as f:
                value = f.read()
        data = json.loads(value)
    except (OSError, ValueError) as exc:
        raise InputError(f"--input {name}: {exc}") from None
    shape, level = [], data
    while isinstance(level, list):
        shape.append(len(level))
        level = level[0] if level else None
    flat = data
    for _ in shape[1:]:
        flat = [x for row in flat for x in (row if isinstance(row, list) else [row])]
    count = 1
    for n in shape:
        count *= n
    if not isinstance(data, list):
        flat = [data]
    if len(flat) != count or any(isinstance(x, list) or isinstance(x, bool) or not isinstance(x, (int, float))
                                 for x in flat):
        raise InputError(f"--input {name}: expected a nested list of numbers with equal-length rows")
    return name, (flat, tuple(shape))


_ONCE_FLAGS = {"seed": "--seed", "num_steps": "--steps", "guidance_scale": "--guidance-scale",
               "scheduler": "--scheduler"}   # one-pass options by the flag that sets them


def cmd_run_once(a) -> int:
    """A one-pass bundle (denoising, single_pass): --input tensors in, the output (PNGs) out."""
    from .api import load
    from .diffusion.image import output_pngs

    pipe = load(a.bundle, providers=a.provider, variant=a.variant, dtype=a.dtype)
    inputs = dict(_tensor_arg(t) for t in a.input or [])
    options = {k: v for k, v in (("seed", a.seed), ("num_steps", a.steps), ("guidance_scale", a.guidance_scale),
                                 ("scheduler", a.scheduler)) if v is not None}
    # checked, and a random seed chosen where the bundle asks for one: printed, so the image can be made again
    options = pipe.one_pass.call_options(options, name=lambda k: _ONCE_FLAGS[k])
    result = pipe.run(inputs, **options)
    files = []
    if a.out:
        pngs = output_pngs(result, pipe.spec)
        stem, dot, ext = a.out.rpartition(".")
        for i, data in enumerate(pngs):
            path = a.out if len(pngs) == 1 else f"{stem}-{i}.{ext}" if dot else f"{a.out}-{i}"
            with open(path, "wb") as f:
                f.write(data)
            files.append(path)
    values, shape = result.read("output")
    summary = {"files": files, "shape": list(shape), "compute_seconds": result.compute_seconds, **options}
    if a.json:
        print(json.dumps(summary))
    else:
        seed = f", seed {options['seed']}" if "seed" in options else ""
        print(f"{', '.join(files) or 'no --out'}: output {list(shape)}, {result.compute_seconds:.2f} s{seed}")
    return 0


def cmd_run(a) -> int:
    from .api import load

    if a.input or a.out or a.steps is not None or a.guidance_scale is not None or a.scheduler is not None:
        return cmd_run_once(a)
    given = [x for x in (a.input_ids, a.prompt, a.chat) if x is not None]
    if len(given) != 1:
        raise SystemExit("onnxpipe run: give exactly one of --input-ids, --prompt or --chat")
    if a.image and a.chat is not None:
        raise SystemExit("onnxpipe run: --image goes with --prompt or --input-ids (one image token "
                         "in the prompt per image)")
    pipe = load(a.bundle, providers=a.provider, variant=a.variant, dtype=a.dtype)
    for warning in pipe.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    opts = {**_search_options(a), **_structure_options(a)}
    if "tools" in opts and a.chat is None:
        raise SystemExit("onnxpipe run: --tools goes with --chat (the chat template shows the model the tools)")
    if a.image:
        from .image.files import read_image
        opts["images"] = [read_image(path) for path in a.image]
    # without --json the text appears as it is generated
    show = None if a.json else lambda event: print(event.text, end="", flush=True)
    if a.chat is not None:
        result = pipe.chat([{"role": "user", "content": a.chat}], max_new_tokens=a.max_new_tokens, on_event=show, **opts)
    elif a.prompt is not None:
        result = pipe.generate(prompt=a.prompt, max_new_tokens=a.max_new_tokens, on_event=show, **opts)
    else:
        result = pipe.generate(input_ids=a.input_ids, max_new_tokens=a.max_new_tokens, on_event=show, **opts)
    if a.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print(flush=True)
        for call in result.tool_calls or []:
            print(f"tool call {call['id']}: {call['function']['name']}({call['function']['arguments']})")
        for i, beam in enumerate((result.sequences or [])[1:], 2):   # beam search's other sequences
            print(f"#{i} (score {beam['score']:.4f}): {beam.get('text', beam['tokens'])}")
        drafts = result.speculative
        accepted = f", drafts accepted {drafts['accepted']}/{drafts['drafted']}" if drafts else ""
        print(f"[{len(result.tokens)} tokens, {result.finish_reason}; prefill {result.prefill_ms:.1f} ms, "
              f"decode {result.decode_tokens_per_s:.1f} tokens/s{accepted}]", file=sys.stderr)
    return 0


def cmd_chat(a) -> int:
    from .api import load

    pipe = load(a.bundle, providers=a.provider, variant=a.variant, dtype=a.dtype)
    for warning in pipe.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    opts = _search_options(a)
    messages: list[dict] = []
    if a.system:
        messages.append({"role": "system", "content": a.system})
    interactive = sys.stdin.isatty()
    print("onnxpipe chat: type a message; /reset starts over, /quit or Ctrl-D leaves.", file=sys.stderr)
    while True:
        if interactive:
            print("> ", end="", flush=True)
        line = sys.stdin.readline()
        if not line:
            break
        line = line.strip()
        if not line:
            continue
        if line == "/quit":
            break
        if line == "/reset":
            messages = messages[:1] if a.system else []
            pipe.reset()
            continue
        messages.append({"role": "user", "content": line})
        reply = []
        try:
            for event in pipe.chat_stream(messages, max_new_tokens=a.max_new_tokens, **opts):
                print(event.text, end="", flush=True)
                reply.append(event.text)
        except KeyboardInterrupt:
            print(" [stopped]", end="")
        except OnnxpipeError as exc:
            messages.pop()
            print(f"error ({exc.kind}): {exc.message}", file=sys.stderr)
            continue
        print(flush=True)
        messages.append({"role": "assistant", "content": "".join(reply)})
    return 0


def _control(text: str) -> tuple[str, float | str]:
    """NAME=NUMBER for a number control, NAME=TEXT for a choice (the pipeline checks which)."""
    name, eq, value = text.partition("=")
    if not eq or not name.strip() or not value.strip():
        raise argparse.ArgumentTypeError(f"--set: expected NAME=NUMBER or NAME=CHOICE (e.g. noise_scale=0, "
                                         f"voice=jm_kumo), found {text!r}")
    try:
        return name.strip(), float(value)
    except ValueError:
        return name.strip(), value.strip()


def _tensor_inputs(a) -> dict:
    """--inputs FILE.json ({name: {values, shape}}) and --input NAME=FILE.wav ([1, samples])."""
    from .audio import decode_wav
    from .engine.controls import tensors_from_json

    given = {}
    if a.inputs:
        try:
            with open(a.inputs, encoding="utf-8") as f:
                doc = json.load(f)
        except (OSError, ValueError) as exc:
            raise SystemExit(f"onnxpipe tts: --inputs {a.inputs}: {exc}")
        given.update(tensors_from_json(doc, f"--inputs {a.inputs}"))
    for item in a.input or []:
        name, eq, path = item.partition("=")
        if not eq or not name or not path.endswith(".wav"):
            raise SystemExit(f"onnxpipe tts: --input: expected NAME=FILE.wav, found {item!r}")
        try:
            with open(path, "rb") as f:
                samples, _, channels = decode_wav(f.read())
        except OSError as exc:
            raise SystemExit(f"onnxpipe tts: --input {item}: {exc.strerror}")
        if channels != 1:
            raise SystemExit(f"onnxpipe tts: --input {item}: expected a mono WAV, found {channels} channels")
        given[name] = (samples, (1, len(samples)))
    return given


def cmd_tts(a) -> int:
    from .api import load

    if a.text is None:
        raise SystemExit("onnxpipe tts: give --text TEXT (or --text - to read it from stdin)")
    text = sys.stdin.read() if a.text == "-" else a.text
    pipe = load(a.bundle, providers=a.provider, variant=a.variant, dtype=a.dtype)
    for warning in pipe.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = pipe.speak(text, inputs=_tensor_inputs(a), **dict(a.set or []))
    with open(a.out, "wb") as f:
        f.write(result.wav())
    if a.json:
        print(json.dumps(dict(result.to_dict(), out=a.out), ensure_ascii=False))
    else:
        print(f"{a.out}: {result.audio_seconds:.2f} s of audio at {result.sample_rate} Hz in "
              f"{result.compute_seconds:.2f} s ({result.real_time_factor:.1f}x real time, "
              f"{len(result.sentences)} sentence(s))", file=sys.stderr)
    return 0


def _mono_wav(path: str, command: str) -> tuple[list[float], int]:
    """(mono samples, sample rate) of a WAV file (audio/wav.py's formats); channels are averaged."""
    from .audio import decode_wav

    try:
        with open(path, "rb") as f:
            samples, rate, channels = decode_wav(f.read())
    except OSError as exc:
        raise SystemExit(f"onnxpipe {command}: --audio {path}: {exc.strerror}")
    except InputError as exc:   # a bad file: say which
        raise InputError(f"--audio {path}: {exc.message}") from None
    if channels > 1:
        samples = [sum(samples[i:i + channels]) / channels for i in range(0, len(samples), channels)]
    return samples, rate


def cmd_vad(a) -> int:
    from .api import load

    samples, rate = _mono_wav(a.audio, "vad")
    pipe = load(a.bundle, providers=a.provider, variant=a.variant, text=False)
    for warning in pipe.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = pipe.detect_speech(samples, rate, **dict(a.set or []))
    if a.json:
        print(json.dumps(result.to_dict(probabilities=a.probabilities)))
    else:
        for start, end in result.segments:
            print(f"{start:.3f}\t{end:.3f}")
        print(f"[{len(result.segments)} segment(s) in {result.audio_seconds:.2f} s of audio; "
              f"{result.compute_seconds:.3f} s compute]", file=sys.stderr)
    return 0


def cmd_transcribe(a) -> int:
    from .api import load

    samples, rate = _mono_wav(a.audio, "transcribe")
    pipe = load(a.bundle, providers=a.provider, variant=a.variant)
    for warning in pipe.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    result = pipe.transcribe(samples, rate, max_new_tokens=a.max_new_tokens)
    if a.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
    else:
        print(result.text)
        print(f"[{result.audio_seconds:.2f} s of audio in {result.compute_seconds:.2f} s, "
              f"{len(result.windows)} window(s), {len(result.tokens)} tokens]", file=sys.stderr)
    return 0


def cmd_validate(a) -> int:
    from .api import load

    pipe = load(a.bundle, text=False, dtype=a.dtype)
    print(f"{pipe.config.file}: ok ({pipe.structure}, {len(pipe.sessions)} session(s), "
          f"loop {pipe.spec.generation.loop})")
    for warning in pipe.warnings:
        print(f"warning: {warning}")
    return 0


def cmd_inspect(a) -> int:
    from .config import load_config
    from .config.parse import to_json

    print(json.dumps(to_json(load_config(a.bundle, dtype=a.dtype).spec), indent=2))
    return 0


def cmd_convert(a) -> int:
    """Write the pipeline.json a transformers.js folder is read as, for a model builder to edit."""
    import os

    from .config import resolve_document, transformers_js
    from .config.ranges import check_ranges
    from .config.validate import validate_spec
    from .errors import BundleError

    folder = os.path.abspath(a.folder)
    if not os.path.isdir(folder) or not transformers_js.looks_like(folder):
        raise BundleError(f"{a.folder}: not a transformers.js folder (expected config.json and "
                          f"onnx/model*.onnx in it)")
    out = a.out or os.path.join(folder, "pipeline.json")
    if out != "-" and os.path.dirname(os.path.abspath(out)) != folder:
        raise BundleError(f"--out {out}: the pipeline.json must sit in {folder}, beside the files it names")
    if out != "-" and os.path.exists(out) and not a.force:
        raise BundleError(f"{out} exists; pass --force to replace it")
    document = transformers_js.translate(folder, a.dtype)
    config_file = os.path.join(folder, transformers_js.CONFIG_FILE)
    # the checks a load makes, before anything is written
    spec = resolve_document(document, config_file)
    validate_spec(spec, config_file, folder)
    check_ranges(spec, config_file)
    text = json.dumps(document, indent=2) + "\n"
    if out == "-":
        print(text, end="")
    else:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
        print(f"{out}: written ({', '.join(f'{k}: {v}' for k, v in _files(document).items())})",
              file=sys.stderr)
    return 0


def _files(document: dict) -> dict:
    file = document["pipeline"]["sessions"]["decoder"]["file"]
    return file if isinstance(file, dict) else {"file": file}


def cmd_serve(a) -> int:
    import logging

    try:
        from .server.app import Limits, serve
    except ImportError as exc:
        raise InputError(f"serve needs the server's packages ({exc.name} is missing): "
                         "pip install 'onnxpipe[native,serve]'") from None

    for flag, value, low in (("--port", a.port, 0), ("--max-concurrent", a.max_concurrent, 1),
                             ("--max-queue", a.max_queue, 0), ("--max-tokens", a.max_tokens, 1)):
        if value < low:
            raise InputError(f"{flag}: expected an integer >= {low}, found {value}")
    if not a.max_upload_mb > 0:
        raise InputError(f"--max-upload-mb: expected a number above 0, found {a.max_upload_mb}")
    plan = serve_plan(a)   # --ray's flags, refused without it
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    limits = Limits(a.max_concurrent, a.max_queue, a.max_tokens, a.max_upload_mb)
    try:
        if plan is None:
            serve(a.bundles, limits, a.host, a.port, a.threads)
        else:
            from .scale.ray_runtime import require_ray
            from .scale.serve_ray import serve_on_ray

            require_ray()
            serve_on_ray(a.bundles, limits, a.host, a.port, a.address, *plan)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="onnxpipe", description="Run ONNX pipelines declared as data.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="generate once")
    run.add_argument("bundle")
    run.add_argument("--input-ids", type=_ids)
    run.add_argument("--prompt")
    run.add_argument("--chat", help="a user message, wrapped in the bundle's chat template")
    run.add_argument("--image", action="append", metavar="FILE",
                     help="an image (PNG, JPEG; repeatable) for a vision-language bundle: one image "
                          "token in the prompt per image")
    run.add_argument("--json", action="store_true", help="print one JSON object")
    run.add_argument("--input", action="append", metavar="NAME=VALUES",
                     help="a pipeline input of a one-pass bundle: a JSON nested list, or @file.json (repeatable)")
    run.add_argument("--out", help="write the image output as PNG (pipeline.output.image)")
    run.add_argument("--steps", type=int, help="denoising steps (over generation.num_steps)")
    run.add_argument("--guidance-scale", type=float, help="classifier-free guidance scale (> 1: on)")
    run.add_argument("--scheduler", help="denoising scheduler: euler_discrete or ddim")
    _search_args(run)
    _structure_args(run)
    run.set_defaults(func=cmd_run)
    chat = sub.add_parser("chat", help="interactive streaming chat")
    chat.add_argument("bundle")
    chat.add_argument("--system", help="system prompt")
    _search_args(chat)
    chat.set_defaults(func=cmd_chat)
    tts = sub.add_parser("tts", help="text to speech: write a WAV file")
    tts.add_argument("bundle")
    tts.add_argument("--text", help="what to say (- reads stdin)")
    tts.add_argument("--out", required=True, help="WAV file to write")
    tts.add_argument("--set", action="append", type=_control, metavar="NAME=VALUE",
                     help="a voice control from pipeline.inputs, e.g. noise_scale=0 or voice=jm_kumo (repeatable)")
    tts.add_argument("--inputs", metavar="FILE.json", help="other pipeline inputs: {name: {values, shape}}")
    tts.add_argument("--input", action="append", metavar="NAME=FILE.wav",
                     help="a mono WAV as the pipeline input NAME, shape [1, samples] (repeatable)")
    tts.add_argument("--json", action="store_true", help="print one JSON object")
    tts.add_argument("--provider", action="append", default=None, help="execution provider (repeatable)")
    tts.add_argument("--variant", help="open the files the bundle made for this provider")
    _dtype_arg(tts)
    tts.set_defaults(func=cmd_tts)
    vad = sub.add_parser("vad", help="speech segments of a WAV file (voice activity bundles)")
    vad.add_argument("bundle")
    vad.add_argument("--audio", required=True, metavar="FILE.wav",
                     help="a WAV file at any rate (resampled to the bundle's; channels are averaged)")
    vad.add_argument("--set", action="append", type=_control, metavar="NAME=VALUE",
                     help="a control from pipeline.inputs, e.g. threshold=0.6 (repeatable)")
    vad.add_argument("--json", action="store_true", help='print one JSON object {"segments": [[start_s, end_s], ...], ...}')
    vad.add_argument("--probabilities", action="store_true", help="with --json: every chunk's speech probability too")
    vad.add_argument("--provider", action="append", default=None, help="execution provider (repeatable)")
    vad.add_argument("--variant", help="open the files the bundle made for this provider")
    vad.set_defaults(func=cmd_vad)
    asr = sub.add_parser("transcribe", help="speech to text of a WAV file (any sample rate)")
    asr.add_argument("bundle")
    asr.add_argument("--audio", required=True, metavar="FILE.wav",
                     help="WAV file: PCM 8/16/24/32-bit or float, any rate (channels are averaged)")
    asr.add_argument("--json", action="store_true",
                     help='print one JSON object {"text", "tokens", "audio_seconds", "compute_seconds"}')
    asr.add_argument("--max-new-tokens", type=int, default=None, help="token budget per 30 s window")
    asr.add_argument("--provider", action="append", default=None, help="execution provider (repeatable)")
    asr.add_argument("--variant", help="open the files the bundle made for this provider")
    asr.set_defaults(func=cmd_transcribe)
    val = sub.add_parser("validate", help="load and check a bundle")
    val.add_argument("bundle")
    _dtype_arg(val)
    val.set_defaults(func=cmd_validate)
    ins = sub.add_parser("inspect", help="print the resolved pipeline config")
    ins.add_argument("bundle")
    _dtype_arg(ins)
    ins.set_defaults(func=cmd_inspect)
    conv = sub.add_parser("convert", help="write the pipeline.json a transformers.js folder is read as")
    conv.add_argument("folder")
    _dtype_arg(conv)
    conv.add_argument("--out", help="where to write it (default FOLDER/pipeline.json; - for stdout)")
    conv.add_argument("--force", action="store_true", help="replace an existing pipeline.json")
    conv.set_defaults(func=cmd_convert)
    serve = sub.add_parser("serve", help="an OpenAI-compatible HTTP server over bundles (docs/server.md)")
    serve.add_argument("bundles", nargs="+", metavar="BUNDLE",
                       help="a bundle folder (its id: the folder's name) or ID=FOLDER")
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=int, default=8000, help="port to listen on (default 8000)")
    serve.add_argument("--max-concurrent", type=int, default=8,
                       help="sequences one decoder bundle decodes at once as the rows of one batch "
                            "(continuous batching; default 8; 1: one at a time). Bundles whose state can't be "
                            "batched run one at a time; /v1/models says which and why")
    serve.add_argument("--max-queue", type=int, default=16,
                       help="requests that may wait per bundle; more are answered 429 (default 16)")
    serve.add_argument("--max-tokens", type=int, default=4096,
                       help="the most new tokens a request may ask for (default 4096); a request that names none gets 256, "
                            "or this when lower")
    serve.add_argument("--max-upload-mb", type=float, default=25.0,
                       help="the largest request body, JSON or upload, in MiB; larger ones get 413 (default 25)")
    add_serve_ray_args(serve)
    serve.set_defaults(func=cmd_serve)
    add_batch_parser(sub, _control)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except OnnxpipeError as exc:
        print(f"onnxpipe {args.command}: error ({exc.kind}): {exc.message}", file=sys.stderr)
        return EXIT_CODES.get(exc.kind, 1)


if __name__ == "__main__":
    sys.exit(main())
