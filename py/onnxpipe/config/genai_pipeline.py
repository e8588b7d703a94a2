"""onnxruntime-genai's "decoder-pipeline" model type: ``model.decoder.pipeline`` stages.

Each stage is one ONNX file that onnxruntime-genai runs in order on every pass; what a stage
outputs feeds the later stages that list the name among their inputs (or the name its
``output_names_forwarder`` gives it), and the decoder's managed tensors (input_ids, position ids,
attention mask, the KV cache, logits) go to and come from the stages that list them. That is a
v2 flow: one session and one step-phase flow step per stage, wired by tensor name, the KV cache
owned by the stages with the past/present names. ``run_on_prompt`` / ``run_on_token_gen`` false
become the flow step's ``"on": "token_gen"`` / ``"prompt"`` (genai's prompt pass is one that feeds
more than one token).

The stage keys and their meaning follow onnxruntime-genai's src/config.cpp (PipelineModel_Element)
and src/models/decoder_only_pipeline.cpp.
"""

from __future__ import annotations

from typing import Any

from ..errors import ConfigError
from .genai_session import session_settings
from .parse import describe

STAGE_KEYS = ("filename", "inputs", "outputs", "session_options", "run_options", "output_names_forwarder",
              "run_on_prompt", "run_on_token_gen", "is_lm_head", "inherit_session_options",
              "reset_session_idx")
PIPELINE_TYPE = "decoder-pipeline"


def _stages(pipeline: Any, file: str) -> list[tuple[str, str, dict[str, Any]]]:
    """(name, JSON path, stage) in run order: the list form [{"name": {...}}, ...] (an element may
    hold several stages) or the object form {"name": {...}, ...}."""
    base = "$.model.decoder.pipeline"
    if isinstance(pipeline, dict):
        groups = [(base, pipeline)]
    elif isinstance(pipeline, list):
        groups = [(f"{base}[{i}]", item) for i, item in enumerate(pipeline)]
    else:
        raise ConfigError(f'expected a list of stages such as [{{"embeddings": {{"filename": ...}}}}], '
                          f"found {describe(pipeline)}", file=file, path=base)
    stages = []
    for path, group in groups:
        if not isinstance(group, dict) or not group:
            raise ConfigError(f'expected an object naming a stage, e.g. {{"embeddings": {{"filename": '
                              f'"embeddings.onnx", ...}}}}, found {describe(group)}', file=file, path=path)
        for name, stage in group.items():
            where = f"{path}.{name}"
            if not isinstance(stage, dict):
                raise ConfigError(f"expected an object, found {describe(stage)}", file=file, path=where)
            stages.append((name, where, stage))
    if not stages:
        raise ConfigError("expected at least one stage", file=file, path=base)
    return stages


def _names(value: Any, file: str, path: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"expected a list of tensor names (the decoder-pipeline stage's), found "
                          f"{describe(value)}", file=file, path=path)
    return value


def _flag(stage: dict, key: str, default: bool, file: str, path: str) -> bool:
    value = stage.get(key, default)
    if not isinstance(value, bool):
        raise ConfigError(f"expected true or false, found {describe(value)}", file=file, path=f"{path}.{key}")
    return value


def _session(stage: dict, decoder_session: dict, file: str, path: str) -> dict[str, Any]:
    """As onnxruntime-genai picks a stage's options: its own session_options (over the decoder's
    when inherit_session_options), else the decoder's."""
    filename = stage.get("filename")
    if not isinstance(filename, str) or not filename:
        raise ConfigError(f'expected the stage\'s ONNX file name, found {describe(filename)}'
                          if "filename" in stage else 'missing "filename" (the decoder-pipeline stage\'s ONNX file)',
                          file=file, path=f"{path}.filename")
    inherit = _flag(stage, "inherit_session_options", False, file, path)
    parent = {k: v for k, v in decoder_session.items() if k != "file"}
    if "session_options" not in stage:
        return {"file": filename, **parent}
    own = session_settings(stage["session_options"], file, f"{path}.session_options")
    if not inherit:
        return {"file": filename, **own}
    merged = dict(parent)
    if "execution_provider" in own:
        merged["execution_provider"] = own["execution_provider"]
    if "session_options" in own:
        merged["session_options"] = {**parent.get("session_options", {}), **own["session_options"]}
    return {"file": filename, **merged}


def _check_stage(name: str, stage: dict, count: int, taken: set[str], file: str, path: str) -> None:
    unknown = sorted(set(stage) - set(STAGE_KEYS))
    if unknown:
        raise ConfigError(f'unknown key "{unknown[0]}" in a decoder-pipeline stage; valid keys: '
                          f'{", ".join(STAGE_KEYS)}', file=file, path=f"{path}.{unknown[0]}")
    if "." in name or name in ("inputs", "outputs") or not name:
        raise ConfigError(f'stage name "{name}": onnxpipe names a session by it, so it may not be empty, '
                          f'contain "." or be "inputs" / "outputs"', file=file, path=path)
    if name in taken:
        raise ConfigError(f'stage name "{name}" is used twice; each stage needs its own name', file=file,
                          path=path)
    if "run_options" in stage:
        raise ConfigError("run_options: per-stage onnxruntime run options (RunOptions config entries) "
                          "are not supported by onnxpipe's decoder-pipeline translation; remove them",
                          file=file, path=f"{path}.run_options")
    for key in ("inputs", "outputs"):
        _names(stage.get(key, []), file, f"{path}.{key}")
    _flag(stage, "is_lm_head", False, file, path)
    reset = stage.get("reset_session_idx", -1)
    if not isinstance(reset, int) or isinstance(reset, bool) or not -1 <= reset < count:
        raise ConfigError(f"expected the index of a decoder-pipeline stage (the session to free) in -1..{count - 1} "
                          f"(-1: none), found {describe(reset)}",
                          file=file, path=f"{path}.reset_session_idx")
    forward = stage.get("output_names_forwarder", {})
    if not isinstance(forward, dict) or not all(isinstance(v, str) for v in forward.values()):
        raise ConfigError(f"expected an object mapping output names to the names later stages read, "
                          f"found {describe(forward)}", file=file, path=f"{path}.output_names_forwarder")


def _kinds(stage: dict) -> set[str]:
    return {k for k, flag in (("prompt", "run_on_prompt"), ("token_gen", "run_on_token_gen"))
            if stage.get(flag, True)}


def _check_passes(stages: list, runs: list, logits_name: str, file: str) -> None:
    """Every pass that reads a stage output (a later stage, or the loop reading logits) has a
    stage making it on that pass, by the stages' own inputs / outputs lists."""
    paths = {name: path for name, path, _ in stages}
    made: list[tuple[str, set[str], set[str]]] = []   # (stage, names it makes, its passes)
    readers = [(name, stage.get("inputs", []), _kinds(stage), f"{paths[name]}.inputs") for name, stage in runs]
    readers.append(("the decoder", [logits_name], {"prompt", "token_gen"}, "$.model.decoder.outputs.logits"))
    for i, (reader, names, kinds, where) in enumerate(readers):
        for tensor in names:
            makers = [(s, k) for s, outs, k in made if tensor in outs]
            missing = sorted(kinds - set().union(*(k for _, k in makers))) if makers else []
            if missing:
                raise ConfigError(f'{reader} reads "{tensor}" on {missing[0]} passes, but the stages that output '
                                  f'it ({", ".join(s for s, _ in makers)}) have run_on_'
                                  f'{"prompt" if missing[0] == "prompt" else "token_gen"} false, so it is not '
                                  f"there on those passes of the decoder-pipeline", file=file, path=where)
        if i < len(runs):
            stage = runs[i][1]
            forward = stage.get("output_names_forwarder", {})
            made.append((reader, {forward.get(o, o) for o in stage.get("outputs", [])}, kinds))


def translate(doc: dict[str, Any], model: dict[str, Any], file: str) -> dict[str, Any]:
    """``doc`` (genai_v1's translation of everything but the decoder's file) with one session and
    flow step per stage of ``model.decoder.pipeline``.

    Accepted as onnxruntime-genai reads them: ``is_lm_head`` (skips the stage on prompt chunks
    other than the last, which only a sliding window's chunked prompt makes: refused here) and
    ``reset_session_idx`` (frees a session's memory while another runs; onnxpipe keeps every
    session open, with the same results). A stage with both run flags false never runs: no session.
    """
    decoder = model["decoder"]
    if "pipeline" not in decoder:
        raise ConfigError(f'missing "pipeline": model.type "{PIPELINE_TYPE}" runs the list of stages there',
                          file=file, path="$.model.decoder.pipeline")
    if decoder.get("sliding_window") is not None:
        raise ConfigError("sliding_window: a decoder-pipeline with a sliding window feeds the prompt in "
                          "window-sized chunks (onnxruntime-genai's QNN path); onnxpipe does not run that",
                          file=file, path="$.model.decoder.sliding_window")
    stages = _stages(decoder["pipeline"], file)
    pipe = doc["pipeline"]
    decoder_session = pipe["sessions"].pop("decoder")
    inputs, outputs = decoder.get("inputs", {}), decoder.get("outputs", {})
    ids_name, logits_name = inputs.get("input_ids", "input_ids"), outputs.get("logits", "logits")
    sessions: dict[str, Any] = {}
    flow: list[dict[str, Any]] = []
    dataflow: list[dict[str, str]] = []
    runs: list[tuple[str, dict]] = []
    seen: set[str] = set()
    for name, path, stage in stages:
        _check_stage(name, stage, len(stages), seen, file, path)
        seen.add(name)
        session = _session(stage, decoder_session, file, path)
        prompt = _flag(stage, "run_on_prompt", True, file, path)
        token = _flag(stage, "run_on_token_gen", True, file, path)
        if not (prompt or token):
            continue   # never run
        sessions[name] = session
        step: dict[str, Any] = {"run": name, "when": "step"}
        if prompt != token:
            step["on"] = "prompt" if prompt else "token_gen"
        flow.append(step)
        runs.append((name, stage))
    if not flow:
        raise ConfigError("no stage runs: every stage has run_on_prompt and run_on_token_gen false",
                          file=file, path="$.model.decoder.pipeline")
    for i, (name, stage) in enumerate(runs):
        for output, alias in stage.get("output_names_forwarder", {}).items():
            for later, other in runs[i + 1:]:
                if alias in other.get("inputs", []):
                    dataflow.append({"from": f"{name}.{output}", "to": f"{later}.{alias}"})
        if ids_name != "input_ids" and ids_name in stage.get("inputs", []):
            dataflow.append({"from": "inputs.input_ids", "to": f"{name}.{ids_name}"})
    _check_passes(stages, runs, logits_name, file)
    if logits_name != "logits":
        makers = [name for name, stage in runs if logits_name in stage.get("outputs", [])]
        if len(makers) != 1:
            raise ConfigError(f'outputs.logits is "{logits_name}", which {len(makers)} stages list among their '
                              f"outputs; onnxpipe reads a renamed logits output from exactly one stage",
                              file=file, path="$.model.decoder.outputs.logits")
        dataflow.append({"from": f"{makers[0]}.{logits_name}", "to": "outputs.logits"})
    pipe["sessions"], pipe["flow"], pipe["dataflow"] = sessions, flow, dataflow
    return doc
