"""Decode speed on one bundle, side by side in one run: onnxpipe vs onnxruntime-genai.

Both decode the same prompt ids greedily for the same number of new tokens, alternating
runs so machine noise hits both alike; medians and their ratio are printed. This is a
benchmark, not a test: it never fails on speed.
"""

from __future__ import annotations

import argparse
import json
import statistics
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("bundle")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    import onnxruntime_genai as og

    pipe = onnxpipe.load(a.bundle)
    ids = pipe.chat_prompt_ids([{"role": "user", "content": PROMPT}])
    model = og.Model(a.bundle)
    ours, theirs = [], []
    onnxpipe_run(pipe, ids, 8)     # warm-up both
    genai_run(model, ids, 8)
    same = True
    for _ in range(a.runs):
        tps, t1 = onnxpipe_run(pipe, ids, a.tokens)
        ours.append(tps)
        tps, t2 = genai_run(model, ids, a.tokens)
        theirs.append(tps)
        same = same and list(t1) == [int(t) for t in t2]
    o, g = statistics.median(ours), statistics.median(theirs)
    report = {"bundle": a.bundle, "prompt_tokens": len(ids), "new_tokens": a.tokens, "runs": a.runs,
              "onnxpipe_decode_tokens_per_s": round(o, 1), "onnxruntime_genai_tokens_per_s": round(g, 1),
              "ratio": round(o / g, 3), "same_tokens": same}
    print(f"decode tokens/s over {a.tokens} new tokens, median of {a.runs} alternating runs")
    print(f"  onnxpipe           {o:8.1f}")
    print(f"  onnxruntime-genai  {g:8.1f}")
    print(f"  ratio              {o / g:8.3f}   (target >= 0.95)   same tokens: {same}")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
