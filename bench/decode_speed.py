"""Decode speed on one bundle, side by side in one run: onnxpipe vs onnxruntime-genai.

Both decode the same prompt ids greedily for the same number of new tokens, alternating
runs so machine noise hits both alike; medians and their ratio are printed. ``--busy`` then
measures again while another process keeps one core busy (a Python spin loop), and also
onnxpipe with other thread / spinning settings (``--settings``), so a choice can rest on
figures. A third driver, "bare onnxruntime", is the floor under any orchestration: the same
file on one onnxruntime session (1 thread, no spinning), KV buffers bound in place, argmax
in numpy, nothing else. This is a benchmark, not a test: it never fails on speed.

    PYTHONPATH=py python bench/decode_speed.py BUNDLE [--variant int4] [--tokens 128] [--runs 5] [--busy]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time

import onnxpipe

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def onnxpipe_run(pipe, ids, n):
    result = pipe.generate(input_ids=ids, max_new_tokens=n, do_sample=False, ignore_eos=True)
    assert len(result.tokens) == n, (len(result.tokens), n)
    return result.decode_tokens_per_s, result.tokens


def genai_run(model, ids, n):
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=len(ids) + n, min_length=len(ids) + n)
    gen = og.Generator(model, params)
    start = time.perf_counter()
    gen.append_tokens(ids)
    gen.generate_next_token()
    first = time.perf_counter()
    tokens = [gen.get_next_tokens()[0]]
    while not gen.is_done():
        gen.generate_next_token()
        tokens.append(gen.get_next_tokens()[0])
    end = time.perf_counter()
    return (len(tokens) - 1) / (end - first), tokens


class BareLoop:
    """The bundle's genai decoder on plain onnxruntime, 1 thread: one session, its past/present
    buffers bound in place (the bundle must say past_present_share_buffer, as SmolLM2's does),
    numpy's argmax over the last logits."""

    def __init__(self, bundle: str):
        import numpy as np
        import onnxruntime as ort

        with open(f"{bundle}/genai_config.json", encoding="utf-8") as f:
            config = json.load(f)
        if not config["search"].get("past_present_share_buffer"):
            raise SystemExit(f"{bundle}/genai_config.json: the bare loop needs past_present_share_buffer: true")
        decoder = config["model"]["decoder"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(f"{bundle}/{decoder['filename']}", options,
                                            providers=["CPUExecutionProvider"])
        names = decoder["inputs"]
        outs = decoder["outputs"]
        self.pairs = [(names[kind] % layer, outs[kind.replace("past", "present")] % layer)
                      for layer in range(decoder["num_hidden_layers"])
                      for kind in ("past_key_names", "past_value_names")]
        self.heads, self.head_size = decoder["num_key_value_heads"], decoder["head_size"]
        self.np, self.ort = np, ort

    def run(self, ids, n):
        np, ort = self.np, self.ort
        binding = self.session.io_binding()
        for past, present in self.pairs:
            shape = (1, self.heads, len(ids) + n, self.head_size)   # room for every token: shared in place
            buffer = ort.OrtValue.ortvalue_from_numpy(np.zeros(shape, np.float32))
            binding.bind_ortvalue_input(past, buffer)
            binding.bind_ortvalue_output(present, buffer)
        feed, total, tokens = np.array([ids], np.int64), 0, []
        for step in range(n):
            if step == 1:
                first = time.perf_counter()
            total += feed.shape[1]
            binding.bind_cpu_input("input_ids", feed)
            binding.bind_cpu_input("attention_mask", np.ones((1, total), np.int64))
            binding.bind_output("logits")       # its shape changes after the prompt: a new one each step
            self.session.run_with_iobinding(binding)
            tokens.append(int(binding.get_outputs()[-1].numpy()[0, -1].argmax()))
            feed = np.array([[tokens[-1]]], np.int64)
        return (n - 1) / (time.perf_counter() - first), tokens


BARE = "bare onnxruntime, 1 thread"
SETTINGS = {"default": {}, "spinning": {"spinning": True}, "1 thread": {"threads": 1},
            "1 thread, spinning": {"threads": 1, "spinning": True}}


@contextlib.contextmanager
def busy_core(on: bool):
    """Another process spinning on one core while the block runs."""
    proc = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if on else None
    try:
        time.sleep(0.5 if on else 0)
        yield
    finally:
        if proc is not None:
            proc.kill()
            proc.wait()


def compare(pipes: dict, model, bare: BareLoop, ids, tokens: int, runs: int) -> dict:
    """Median tokens/s of each onnxpipe setting, of onnxruntime-genai and of the bare loop, runs
    interleaved."""
    figures = {name: [] for name in pipes}
    figures["onnxruntime-genai"] = []
    figures[BARE] = []
    same = True
    for _ in range(runs):
        reference = None
        for name, pipe in pipes.items():
            tps, got = onnxpipe_run(pipe, ids, tokens)
            figures[name].append(tps)
            reference = reference or got
        tps, theirs = genai_run(model, ids, tokens)
        figures["onnxruntime-genai"].append(tps)
        tps, bare_tokens = bare.run(ids, tokens)
        figures[BARE].append(tps)
        same = same and list(reference) == [int(t) for t in theirs] == bare_tokens
    medians = {name: statistics.median(v) for name, v in figures.items()}
    return {"tokens_per_s": medians, "same_tokens": same,
            "ratio": {name: medians[name] / medians["onnxruntime-genai"] for name in [*pipes, BARE]}}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--variant", help="the bundle's file for this variant name (e.g. int4: the file "
                    "onnxruntime-genai opens, so both run the same one)")
    ap.add_argument("--busy", action="store_true", help="measure again with one core kept busy")
    ap.add_argument("--settings", default="default", help=f"onnxpipe settings, comma-separated: {', '.join(SETTINGS)} "
                    "(or all)")
    a = ap.parse_args()
    import onnxruntime_genai as og

    from onnxpipe.backends.native import NativeBackend

    names = list(SETTINGS) if a.settings == "all" else a.settings.split(",")
    pipes = {name: onnxpipe.load(a.bundle, backend=NativeBackend(**SETTINGS[name]), variant=a.variant)
             for name in names}
    first = next(iter(pipes.values()))
    ids = first.chat_prompt_ids([{"role": "user", "content": PROMPT}])
    model = og.Model(a.bundle)
    bare = BareLoop(a.bundle)
    for pipe in pipes.values():      # warm-up
        onnxpipe_run(pipe, ids, 8)
    genai_run(model, ids, 8)
    bare.run(ids, 8)
    report = {"bundle": a.bundle, "prompt_tokens": len(ids), "new_tokens": a.tokens, "runs": a.runs}
    for label, on in (("quiet", False), ("one core busy", True)) if a.busy else (("quiet", False),):
        with busy_core(on):
            report[label] = result = compare(pipes, model, bare, ids, a.tokens, a.runs)
        print(f"{label}: decode tokens/s over {a.tokens} new tokens, median of {a.runs} interleaved runs")
        for name, tps in result["tokens_per_s"].items():
            ratio = f"   ratio {result['ratio'][name]:.3f}" if name in result["ratio"] else ""
            print(f"  {'onnxpipe, ' + name if name in pipes else name:<36}{tps:8.1f}{ratio}")
        print(f"  same tokens: {result['same_tokens']}   (target: ratio >= 1.0)")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
