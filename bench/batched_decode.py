"""Continuous batching, natively: aggregate tokens/s and time to first token at 1, 4, 8 and 16
concurrent sequences, onnxpipe's BatchedDecoder (loops/batched.py) next to onnxruntime-genai's
Engine on the same file, in one run.

Every stream has its own chat prompt and decodes greedily (end ids ignored) for ``--tokens``
new tokens; all streams of a round arrive at once. onnxpipe prefills each alone and then
steps every row per engine call; onnxruntime-genai's Engine schedules the same prompts itself.
Aggregate tokens/s = all new tokens / wall time of the round (prefills included); TTFT = time
from the round's start to a stream's first token (p50 / p95). One stream's tokens are compared
with onnxpipe's plain loop and with onnxruntime-genai's. This is a benchmark, not a test: it never fails on speed.

    PYTHONPATH=py python bench/batched_decode.py [BUNDLE] [--tokens 128] [--streams 1,4,8,16] [--smoke]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import onnxpipe
from onnxpipe.loops import Sequence
from onnxpipe.loops.batched import BatchedDecoder, batchable
from onnxpipe.search.stopping import stop_ids

DEFAULT_BUNDLE = "public/models/smollm2-135m-instruct"
TOPICS = ["a lighthouse keeper", "a lost robot", "the first snow", "a dragon who bakes", "a quiet library",
          "an old map", "a city at night", "a talking cat", "the last train", "a garden on Mars",
          "a clockmaker", "a river spirit", "a broken violin", "a desert storm", "a kite festival",
          "a secret tunnel"]


def prompts(pipe, count: int) -> list[list[int]]:
    return [pipe.chat_prompt_ids([{"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}."}])
            for i in range(count)]


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def onnxpipe_round(pipe, decoder: BatchedDecoder, ids: list[list[int]], tokens: int) -> dict:
    loaded = pipe.loaded
    opts = loaded.options({"do_sample": False, "ignore_eos": True}, tokens)
    seqs = [Sequence([], p, opts, stop_ids(opts, loaded.eos), loaded.sampler(opts)) for p in ids]
    first: dict[int, float] = {}
    made: dict[int, list[int]] = {id(s): [] for s in seqs}
    start = time.perf_counter()

    def take(responses):
        now = time.perf_counter()
        for seq, response in responses:
            if response.token is not None:
                made[id(seq)].append(response.token)
                first.setdefault(id(seq), now - start)

    for seq in seqs:
        take(decoder.add(seq))
    while decoder.rows:
        take(decoder.step())
    wall = time.perf_counter() - start
    return _figures(wall, [first[id(s)] for s in seqs], [made[id(s)] for s in seqs])


def genai_round(engine, ids: list[list[int]], tokens: int) -> dict:
    import numpy as np
    import onnxruntime_genai as og

    requests = []
    start = time.perf_counter()
    for p in ids:
        request = engine.create_request()
        options = og.TurnOptions(request)
        options.set_do_sample(False)
        options.set_max_generated_tokens(tokens)
        options.set_min_generated_tokens(tokens)
        request.begin_turn(np.array(p, np.int32), options)
        requests.append(request)
    first: dict[int, float] = {}
    made: dict[int, list[int]] = {i: [] for i in range(len(requests))}
    index = {id(r): i for i, r in enumerate(requests)}
    buffer = engine.create_event_buffer(max(64, 4 * len(requests)))
    while engine.has_pending_requests():
        events = engine.run(buffer)
        now = time.perf_counter()
        for event in events or []:
            if event.flags & og.EngineEventFlags.TOKEN:
                i = next((index[id(r)] for r in requests if event.request is r), None)
                if i is not None:
                    made[i].append(int(event.token))
                    first.setdefault(i, now - start)
    wall = time.perf_counter() - start
    for request in requests:
        request.close()
    return _figures(wall, [first.get(i, wall) for i in range(len(requests))], [made[i] for i in made])


def _figures(wall: float, ttft: list[float], made: list[list[int]]) -> dict:
    total = sum(len(m) for m in made)
    return {"tokens_per_s": total / wall, "ttft_p50_ms": 1000 * statistics.median(ttft),
            "ttft_p95_ms": 1000 * _percentile(ttft, 0.95), "tokens": total, "first_stream": made[0]}


def genai_engine(bundle: str):
    """onnxruntime-genai's Engine over ``bundle``, or None (said) when it doesn't run here."""
    try:
        import onnxruntime_genai as og
        return og.Engine(og.Model(bundle))
    except Exception as exc:   # an engine that doesn't run here is reported, not fatal
        print(f"onnxruntime-genai Engine not run: {exc}")
        return None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", nargs="?", default=DEFAULT_BUNDLE)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--streams", default="1,4,8,16", help="concurrent streams per round, comma-separated")
    ap.add_argument("--variant", help="the bundle's file for this variant name (e.g. int4)")
    ap.add_argument("--no-genai", action="store_true", help="onnxpipe only")
    ap.add_argument("--smoke", action="store_true", help="a quick run that checks the script works: "
                    "4 tokens at 1 and 2 streams")
    a = ap.parse_args(argv)
    tokens, streams = (4, [1, 2]) if a.smoke else (a.tokens, [int(s) for s in a.streams.split(",")])
    pipe = onnxpipe.load(a.bundle, variant=a.variant)
    why = batchable(pipe)
    if why:
        print(f"{a.bundle}: not batchable: {why}")
        return 1
    decoder = BatchedDecoder(pipe, max_rows=max(streams))
    engine = None if a.no_genai else genai_engine(a.bundle)
    all_ids = prompts(pipe, max(streams))
    onnxpipe_round(pipe, decoder, all_ids[:1], 4)   # warm-up
    if engine is not None:
        genai_round(engine, all_ids[:1], 4)
    report = {"bundle": a.bundle, "new_tokens": tokens, "rounds": []}
    print(f"{'streams':>7}  {'onnxpipe tok/s':>14} {'TTFT p50/p95 ms':>17}  {'genai tok/s':>11} "
          f"{'TTFT p50/p95 ms':>17}  ratio")
    base = None
    for count in streams:
        ids = all_ids[:count]
        ours = onnxpipe_round(pipe, decoder, ids, tokens)
        theirs = genai_round(engine, ids, tokens) if engine is not None else None
        base = base or ours["tokens_per_s"]
        row = {"streams": count, "onnxpipe": ours, "onnxruntime_genai": theirs,
               "speedup_over_one_stream": ours["tokens_per_s"] / base}
        if count == streams[0]:   # batched rows give what the plain loop gives
            plain = pipe.generate(input_ids=ids[0], max_new_tokens=tokens, do_sample=False, ignore_eos=True)
            row["same_as_plain_loop"] = ours["first_stream"] == list(plain.tokens)
        line = (f"{count:>7}  {ours['tokens_per_s']:>14.1f} {ours['ttft_p50_ms']:>8.0f}/{ours['ttft_p95_ms']:<8.0f}")
        if theirs is not None:
            row["ratio"] = ours["tokens_per_s"] / theirs["tokens_per_s"]
            row["same_first_stream_as_genai"] = ours["first_stream"] == theirs["first_stream"]
            line += (f"  {theirs['tokens_per_s']:>11.1f} {theirs['ttft_p50_ms']:>8.0f}/{theirs['ttft_p95_ms']:<8.0f}"
                     f"  {row['ratio']:.3f}")
        print(line + f"   (x{row['speedup_over_one_stream']:.2f} of one stream)")
        for figures in (ours, theirs):
            if figures is not None:
                figures.pop("first_stream")
        report["rounds"].append(row)
    print("targets: 8 streams >= 4x one stream's tokens/s; ratio >= 1.0")
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
