"""Which SmolLM2 file should native runs open? Agreement with fp32 and decode speed, side by side.

The reference is the package's GGUF dequantized to fp32 and run greedily in torch (transformers'
``generate``) on a set of chat prompts until the end-of-turn token. Each candidate file runs the
same prompt ids greedily through onnxpipe on onnxruntime (CPU) for as many tokens as the reference
plus a few, so a file that misses the end-of-turn token shows it:

- ``int4 (bundle)``: the bundle's model.onnx as it is built;
- ``fp32 compute (model.wasm.onnx)``: the browser's file (fp16-stored weights, fp32 compute);
- int4 recipes of onnxruntime-genai's builder made here from the same fp32 folder
  (``--recipes``; accuracy level 1 = fp32 activations instead of int8, the last MatMul in int8,
  llama.cpp-style mixed layers in int8), cached under build/variants/.

Printed per file: prompts whose greedy tokens equal fp32's to the end (end-of-turn included; where
fp32 wrote until the budget, its tokens),
tokens equal before the first split (sum over prompts), prompts that end with the end-of-turn
token within the budget, and decode tokens/s (median of interleaved runs, 128 tokens, ignore_eos).
A benchmark, not a test: it never fails.

    PYTHONPATH=py python bench/native_variants.py [public/models/smollm2-135m-instruct] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile

import onnxpipe
from onnxpipe.export import smollm2
from onnxpipe.export.wasm_variant import agreement

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
CACHE = os.path.join(ROOT, "build", "variants")
# everyday chat turns, each answered in a sentence or a short paragraph by fp32
PROMPTS = [
    "What is the capital of France?",
    "Hi!",
    "Who wrote Romeo and Juliet?",
    "What is 2 + 2?",
    "Name three colors.",
    "Translate 'good morning' into French.",
    "What is the boiling point of water in Celsius?",
    "Give me one tip for sleeping better.",
]
REFERENCE_LIMIT = 256          # fp32 answers well inside this
EXTRA = 16                     # candidates run this far past the reference's end
SPEED_TOKENS = 128
SPEED_RUNS = 3
# builder recipes tried besides the bundle's: name -> (precision, --extra_options). The builder's
# "last MatMul in int8" recipes (matmul_mixed_precision=last_matmul:int8, k_quant_mixed) write a
# graph onnxruntime refuses for this tied-embedding model (lm_head.MatMul.weight_Q8G32 missing).
RECIPES = {
    "int4 acc1": ("int4", ["accuracy_level=1"]),
    "int4 acc1 block16": ("int4", ["accuracy_level=1", "block_size=16"]),
    "int8 acc1": ("int8", ["accuracy_level=1"]),
}


def reference_tokens(prompt_ids: list[list[int]], eos: list[int]) -> list[list[int]]:
    """fp32 torch greedy tokens per prompt, the end-of-turn token included when it came."""
    import torch

    model, _ = smollm2.load_fp32(smollm2.find_gguf())
    out = []
    with torch.no_grad():
        for ids in prompt_ids:
            got = model.generate(torch.tensor([ids]), max_new_tokens=REFERENCE_LIMIT, do_sample=False,
                                 eos_token_id=eos, pad_token_id=eos[0])
            out.append([int(t) for t in got[0, len(ids):]])
    return out


def build_recipes(names: list[str]) -> dict[str, str]:
    """name -> bundle folder holding that recipe's model.onnx (built once, kept in build/variants/)."""
    folders = {}
    hf_dir = os.path.join(CACHE, "hf")
    for name in names:
        folder = os.path.join(CACHE, name.replace(" ", "-"))
        if not os.path.isfile(os.path.join(folder, "model.onnx")):
            if not os.path.isfile(os.path.join(hf_dir, "config.json")):
                smollm2.gguf_to_hf(smollm2.find_gguf(), hf_dir)
            with tempfile.TemporaryDirectory(prefix="onnxpipe-variant-") as tmp:
                precision, options = RECIPES[name]
                smollm2.run_genai_builder(hf_dir, folder, os.path.join(tmp, "cache"), precision,
                                          extra_options=options)
        folders[name] = folder
    return folders


def measure(pipe, prompt_ids, want, eos) -> dict:
    exact = shared = ended = 0
    for ids, ref in zip(prompt_ids, want):
        got = pipe.generate(input_ids=ids, max_new_tokens=len(ref) + EXTRA, do_sample=False).tokens
        ref_ended = bool(ref) and ref[-1] in eos
        exact += got == ref if ref_ended else got[:len(ref)] == ref   # fp32 ran out of budget: its tokens
        shared += agreement(ref, got)
        ended += bool(got) and got[-1] in eos
    return {"exact": exact, "shared_tokens": shared, "ended": ended}


def speed(pipes: dict, ids: list[int]) -> dict[str, float]:
    rates = {name: [] for name in pipes}
    for _ in range(SPEED_RUNS):   # interleaved, so noise hits every file alike
        for name, pipe in pipes.items():
            rates[name].append(pipe.generate(input_ids=ids, max_new_tokens=SPEED_TOKENS, do_sample=False,
                                             ignore_eos=True).decode_tokens_per_s)
    return {name: statistics.median(r) for name, r in rates.items()}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("bundle", nargs="?", default=smollm2.DEFAULT_OUT)
    parser.add_argument("--recipes", default=",".join(RECIPES), help="builder recipes to try (comma-separated)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bundle = os.path.abspath(args.bundle)
    recipes = [r for r in args.recipes.split(",") if r]
    pipes = {"int4 (bundle)": onnxpipe.load(bundle, variant="int4"),
             "fp32 compute (model.wasm.onnx)": onnxpipe.load(bundle, variant="wasm")}
    for name, folder in build_recipes(recipes).items():
        pipes[name] = onnxpipe.load(os.path.join(folder, "genai_config.json"))
    first = next(iter(pipes.values()))
    eos = list(first.loaded.eos)
    prompt_ids = [first.chat_prompt_ids([{"role": "user", "content": p}]) for p in PROMPTS]
    want = reference_tokens(prompt_ids, eos)
    rows = {name: measure(pipe, prompt_ids, want, eos) for name, pipe in pipes.items()}
    for name, rate in speed(pipes, prompt_ids[0]).items():
        rows[name]["decode_tokens_per_s"] = round(rate, 1)
    reference = {"prompts": len(PROMPTS), "tokens": sum(len(w) for w in want),
                 "ended": sum(bool(w) and w[-1] in eos for w in want)}
    if args.json:
        print(json.dumps({"reference": reference, "files": rows}))
        return 0
    print(f"fp32 reference (torch): {reference['prompts']} chat prompts, {reference['tokens']} tokens, "
          f"{reference['ended']} ended with the end-of-turn token")
    print(f"{'file':34} {'same to the end':>16} {'tokens before split':>20} {'ended':>6} {'tokens/s':>9}")
    for name, row in rows.items():
        print(f"{name:34} {row['exact']:>10}/{len(PROMPTS):<5} {row['shared_tokens']:>14}/{reference['tokens']:<5} "
              f"{row['ended']:>4}/{len(PROMPTS)} {row['decode_tokens_per_s']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
