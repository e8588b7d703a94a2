"""Random-weight models in the exact shapes of Qwen2.5-0.5B, Llama-3.2-1B and Qwen2.5-1.5B.

    PYTHONPATH=py python -m onnxpipe.export.sized_models [NAME ...] [--out build/sized]
        [--layers N] [--dtypes fp16,q8,q4,q4f16] [--no-genai] [--no-gguf] [--force]

Speed, memory and loading depend on shapes, not values, so a model of the real config filled
with seeded random weights (transformers' own initialisation) measures them honestly. For each
NAME (sized_configs.MODELS) it writes, from ONE set of weights:

    build/sized/NAME/                  a transformers.js folder: config.json, generation_config.json,
                                       the synthetic tokenizer of the real vocabulary size
                                       (synthetic_tokenizer.py), onnx/model_fp16.onnx,
                                       model_quantized.onnx (q8), model_q4.onnx, model_q4f16.onnx
                                       (transformers.js's recipes, precision.py) + manifest.json
    build/sized/NAME-genai/            onnxruntime-genai's int4 bundle (its model builder)
    build/sized/NAME.Q4_0.gguf         the same weights for llama.cpp / wllama (gguf_export.py)
    build/sized/NAME.Q8_0.gguf

``--layers N [--vocab V]`` makes a small test version (same widths, N layers, V ids) as NAME-Nl[-vV]. A ``.built``
stamp beside the outputs records the inputs: a second run does nothing. CPython only (torch,
transformers, onnx, onnxruntime-genai, gguf). ``make sized-models`` runs it for the three sizes.
"""

from __future__ import annotations

import argparse
import gc
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

from . import gguf_export, sized_configs, synthetic_tokenizer
from .manifest import write_manifest
from .sized_configs import SizedModel

DEFAULT_OUT = os.path.join("build", "sized")
DTYPES = ("fp16", "q8", "q4", "q4f16")
SEED = 20261201
# Bump when the recipe below changes the files.
RECIPE_VERSION = 1
STAMP = ".built"


def log(msg: str) -> None:
    print(f"[sized] {msg}", flush=True)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def outputs(model: SizedModel, out: str, dtypes, genai: bool, gguf: bool) -> list[str]:
    """Every path the build of ``model`` makes under ``out`` (what the stamp vouches for)."""
    from ..config.transformers_js import DTYPE_SUFFIX

    folder = os.path.join(out, model.name)
    paths = [os.path.join(folder, f) for f in ("config.json", "tokenizer.json", "manifest.json")]
    paths += [os.path.join(folder, "onnx", f"model{DTYPE_SUFFIX[d]}.onnx") for d in dtypes]
    if genai:
        paths += [os.path.join(out, f"{model.name}-genai", f) for f in ("genai_config.json", "model.onnx")]
    if gguf:
        paths += [os.path.join(out, f"{model.name}.{q}.gguf") for q in gguf_export.QUANTS]
    return paths


def stamp_inputs(model: SizedModel, dtypes, genai: bool, gguf: bool) -> dict:
    return {"recipe_version": RECIPE_VERSION, "seed": SEED, "config": model.config, "dtypes": list(dtypes),
            "genai": genai, "gguf": gguf, "tokens": model.tokens, "special_count": model.special_count,
            "versions": {d: _version(d) for d in ("torch", "transformers", "onnx", "onnxruntime",
                                                  "onnxruntime-genai", "gguf")}}


def _stamp_path(model: SizedModel, out: str) -> str:
    return os.path.join(out, f"{model.name}{STAMP}")


def up_to_date(model: SizedModel, out: str, dtypes, genai: bool, gguf: bool) -> bool:
    try:
        with open(_stamp_path(model, out), encoding="utf-8") as f:
            if json.load(f) != stamp_inputs(model, dtypes, genai, gguf):
                return False
    except (OSError, ValueError):
        return False
    return all(os.path.exists(p) for p in outputs(model, out, dtypes, genai, gguf))


def random_model(model: SizedModel):
    """(transformers model in fp32 with seeded random weights, tokenizer)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, GenerationConfig, PreTrainedTokenizerFast

    config = AutoConfig.for_model(**model.config)
    torch.manual_seed(SEED)
    net = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    eos = [model.special[t] for t in model.eos]
    net.generation_config = GenerationConfig(
        bos_token_id=model.special.get(model.bos) if model.bos else None,
        eos_token_id=eos if len(eos) > 1 else eos[0],
        pad_token_id=model.special.get(model.pad) if model.pad else None)
    with tempfile.TemporaryDirectory() as tmp:
        synthetic_tokenizer.write(model, tmp)
        tokenizer = PreTrainedTokenizerFast.from_pretrained(tmp)
    return net, tokenizer


def export_fp32(model: SizedModel, net, tokenizer, folder: str) -> str:
    """``folder`` as a transformers.js folder of ``net`` with its fp32 file (returned). The
    caller frees ``net`` before ``write_variants``: at 1.5B the weights alone are 6 GB, and
    torch's copy and a converter's copy don't fit in memory together."""
    from . import transformers_js

    shutil.rmtree(folder, ignore_errors=True)
    fp32 = transformers_js.export_folder(net, tokenizer, folder, dtypes=("fp32",))["fp32"]
    synthetic_tokenizer.write(model, folder)   # the tokenizer files exactly as written for GGUF
    return fp32


def write_variants(fp32: str, dtypes) -> dict[str, str]:
    """Each of ``dtypes`` made from the fp32 export (removed unless asked for); dtype -> file."""
    written = {"fp32": fp32}
    for dtype in dtypes:
        if dtype != "fp32":
            written[dtype] = variant(fp32, dtype)
            log(f"wrote {dtype}: {written[dtype]}")
    if "fp32" not in dtypes:
        del written["fp32"]
        for path in (fp32, fp32 + "_data"):
            if os.path.exists(path):
                os.remove(path)
    return written


def variant(fp32: str, dtype: str) -> str:
    """Write ``dtype``'s file beside the fp32 export (transformers.js's recipe, precision.py)."""
    from . import precision
    from ..config.transformers_js import DTYPE_SUFFIX

    dst = fp32.replace(".onnx", f"{DTYPE_SUFFIX[dtype]}.onnx")
    # one process per variant: each converter holds the whole model, and what it leaves behind
    # in this process's allocator would add up over four variants of a 6 GB model
    result = subprocess.run([sys.executable, "-m", "onnxpipe.export.precision", fp32, dst, dtype],
                            capture_output=True, text=True, env={**os.environ, "PYTHONPATH": _pythonpath()})
    if result.returncode != 0:
        sys.stderr.write(result.stderr[-4000:])
        raise RuntimeError(f"{precision.__name__} {dtype} of {fp32} failed (exit {result.returncode})")
    return dst


def _pythonpath() -> str:
    here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    return os.pathsep.join(p for p in (here, os.environ.get("PYTHONPATH", "")) if p)


def run_genai_builder(hf_dir: str, out_dir: str, cache_dir: str) -> None:
    cmd = [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", hf_dir, "-o", out_dir,
           "-p", "int4", "-e", "cpu", "-c", cache_dir]
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.stderr.write(result.stdout[-4000:] + result.stderr[-4000:])
        raise RuntimeError(f"onnxruntime-genai builder failed (exit {result.returncode}): {' '.join(cmd)}")


def build(model: SizedModel, out: str, dtypes=DTYPES, genai: bool = True, gguf: bool = True,
          force: bool = False) -> str:
    """Make every file of ``model`` under ``out`` (skips when the stamp matches); returns its folder."""
    folder = os.path.join(out, model.name)
    if not force and up_to_date(model, out, dtypes, genai, gguf):
        log(f"{model.name}: up to date")
        return folder
    started = time.perf_counter()
    os.makedirs(out, exist_ok=True)
    stamp = _stamp_path(model, out)
    if os.path.exists(stamp):
        os.remove(stamp)
    log(f"{model.name}: {sized_configs.parameter_count(model.config) / 1e6:.0f}M parameters, random "
        f"weights (seed {SEED}) in {model.source}'s shapes")
    net, tokenizer = random_model(model)
    if gguf:
        state = net.state_dict()
        for quant in gguf_export.QUANTS:
            path = os.path.join(out, f"{model.name}.{quant}.gguf")
            gguf_export.write_gguf(model, state, path, quant)
            log(f"wrote {path} ({os.path.getsize(path) / 1e6:.0f} MB)")
        del state
    with tempfile.TemporaryDirectory(dir=out) as tmp:
        hf_dir = os.path.join(tmp, "hf")
        if genai:
            net.save_pretrained(hf_dir)
            synthetic_tokenizer.write(model, hf_dir)
        fp32 = export_fp32(model, net, tokenizer, folder)
        del net
        gc.collect()
        write_variants(fp32, dtypes)
        if genai:
            genai_dir = os.path.join(out, f"{model.name}-genai")
            shutil.rmtree(genai_dir, ignore_errors=True)
            log(f"running onnxruntime-genai's model builder (int4, cpu) into {genai_dir}")
            run_genai_builder(hf_dir, genai_dir, os.path.join(tmp, "cache"))
            for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
                shutil.copyfile(os.path.join(hf_dir, name), os.path.join(genai_dir, name))
            write_manifest(genai_dir)
    write_manifest(folder)
    with open(stamp, "w", encoding="utf-8") as f:
        json.dump(stamp_inputs(model, dtypes, genai, gguf), f, indent=1)
    log(f"{model.name}: done in {time.perf_counter() - started:.0f} s")
    return folder


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m onnxpipe.export.sized_models",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", default=list(sized_configs.DEFAULT_NAMES),
                        help=f"which (default {', '.join(sized_configs.DEFAULT_NAMES)}; also "
                             f"{', '.join(n for n in sized_configs.MODELS if n not in sized_configs.DEFAULT_NAMES)})")
    parser.add_argument("--out", default=DEFAULT_OUT)
    parser.add_argument("--layers", type=int, help="decoder layers of a small test version (same widths)")
    parser.add_argument("--vocab", type=int, help="vocabulary size of a small test version")
    parser.add_argument("--dtypes", default=",".join(DTYPES), help="transformers.js dtypes to write")
    parser.add_argument("--no-genai", action="store_true", help="skip the onnxruntime-genai int4 bundle")
    parser.add_argument("--no-gguf", action="store_true", help="skip the GGUF files")
    parser.add_argument("--force", action="store_true", help="rebuild even if the stamp matches")
    args = parser.parse_args(argv)
    dtypes = [d for d in args.dtypes.split(",") if d]
    bad = [d for d in dtypes if d not in ("fp32",) + DTYPES]
    if bad:
        parser.error(f"--dtypes: {', '.join(bad)} unknown; choose from fp32, {', '.join(DTYPES)}")
    if args.layers is not None and args.layers < 1:
        parser.error(f"--layers: expected a positive number of layers, found {args.layers}")
    for name in args.names:
        build(sized_configs.get(name).small(args.layers, args.vocab), args.out, dtypes,
              genai=not args.no_genai, gguf=not args.no_gguf, force=args.force)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
