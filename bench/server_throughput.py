"""`onnxpipe serve` under concurrent load: aggregate tokens/s and p50/p95 time to first token at 1,
4, 8 and 16 concurrent streaming clients (the official `openai` client against a real server on
this machine, --max-concurrent = the most streams: continuous batching, server/batch_scheduler.py),
next to onnxruntime-genai's Engine generating the same prompts as one batch, in one run.

Every stream asks its own chat prompt (bench/batched_decode.py's), greedy (temperature 0), for
``--tokens`` new tokens; all streams of a round start at once. A reply may end early at the
model's end token (the server takes no ignore_eos): aggregate tokens/s = all tokens the round
made / its wall time, from the first request sent to the last stream's end (HTTP, SSE and the
client's parsing included); TTFT = from the round's start to a stream's first content chunk.
onnxruntime-genai's figures come from bench/batched_decode.py's ``genai_round`` (in process, no
HTTP). Goals (issue 28): 8 streams >= 4x one stream's tokens/s, and >= onnxruntime-genai's
batched throughput. A benchmark, not a test: it never fails on speed.

    PYTHONPATH=py python bench/server_throughput.py [BUNDLE] [--variant int4] [--tokens 128]
        [--streams 1,4,8,16] [--no-genai] [--smoke] [--json]
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import batched_decode  # noqa: E402 - its prompts and onnxruntime-genai's round

DEFAULT_BUNDLE = batched_decode.DEFAULT_BUNDLE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(bundle: str, variant: str | None, streams: int, tokens: int):
    """A real server (uvicorn in a thread) over ``bundle``; returns (base URL, uvicorn server, app, thread)."""
    import uvicorn

    import onnxpipe
    from onnxpipe.server.app import Limits, build

    limits = Limits(max_concurrent=streams, max_queue=streams, max_tokens=max(tokens, 1))
    asgi, app = build([bundle], limits, load=lambda path: onnxpipe.load(path, variant=variant))
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(asgi, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    return f"http://127.0.0.1:{port}", server, app, thread


def _stream(api, model: str, content: str, tokens: int, start: float) -> tuple[float, int]:
    """(seconds to the first content chunk, tokens made) of one streamed request."""
    first, made = None, 0
    for chunk in api.chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                             max_tokens=tokens, temperature=0, stream=True):
        if not chunk.choices:
            continue
        if first is None and chunk.choices[0].delta.content:
            first = time.perf_counter() - start
        if chunk.choices[0].finish_reason:
            made = len(chunk.model_extra["onnxpipe"]["token_ids"])
    return (first if first is not None else time.perf_counter() - start), made


def server_round(api, model: str, count: int, tokens: int) -> dict:
    contents = [f"Write a short story about {batched_decode.TOPICS[i % len(batched_decode.TOPICS)]}."
                for i in range(count)]
    with ThreadPoolExecutor(count) as pool:
        start = time.perf_counter()
        done = list(pool.map(lambda c: _stream(api, model, c, tokens, start), contents))
        wall = time.perf_counter() - start
    ttft = [d[0] for d in done]
    total = sum(d[1] for d in done)
    return {"tokens_per_s": total / wall, "ttft_p50_ms": 1000 * statistics.median(ttft),
            "ttft_p95_ms": 1000 * batched_decode._percentile(ttft, 0.95), "tokens": total}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", nargs="?", default=DEFAULT_BUNDLE)
    ap.add_argument("--variant", default="int4", help="the bundle's file for this variant name (default int4: "
                    "the file onnxruntime-genai opens, so both run the same one)")
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--streams", default="1,4,8,16", help="concurrent streams per round, comma-separated")
    ap.add_argument("--no-genai", action="store_true", help="the server only")
    ap.add_argument("--smoke", action="store_true", help="a quick run that checks the script works: "
                    "4 tokens at 1 and 2 streams")
    ap.add_argument("--json", action="store_true", help="also print the report as JSON")
    a = ap.parse_args(argv)
    import openai

    tokens, streams = (4, [1, 2]) if a.smoke else (a.tokens, [int(s) for s in a.streams.split(",")])
    base, server, app, thread = start_server(a.bundle, a.variant, max(streams), tokens)
    model = next(iter(app.state.registry.models.values()))
    if not model.scheduler.batching:
        print(f"note: {model.id} is not batched: {model.scheduler.batching_reason}")
    api = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600)
    engine = None if a.no_genai else batched_decode.genai_engine(a.bundle)
    try:
        server_round(api, model.id, 1, 4)   # warm-up
        all_ids = batched_decode.prompts(model.pipe, max(streams)) if engine is not None else []   # server idle
        if engine is not None:
            batched_decode.genai_round(engine, all_ids[:1], 4)
        report = {"bundle": a.bundle, "variant": a.variant, "new_tokens": tokens, "rounds": []}
        print(f"{'streams':>7}  {'server tok/s':>12} {'TTFT p50/p95 ms':>17}  {'genai tok/s':>11} "
              f"{'TTFT p50/p95 ms':>17}  ratio")
        base_rate = None
        for count in streams:
            ours = server_round(api, model.id, count, tokens)
            theirs = batched_decode.genai_round(engine, all_ids[:count], tokens) if engine is not None else None
            base_rate = base_rate or ours["tokens_per_s"]
            row = {"streams": count, "server": ours, "onnxruntime_genai": theirs,
                   "speedup_over_one_stream": ours["tokens_per_s"] / base_rate}
            line = f"{count:>7}  {ours['tokens_per_s']:>12.1f} {ours['ttft_p50_ms']:>8.0f}/{ours['ttft_p95_ms']:<8.0f}"
            if theirs is not None:
                theirs.pop("first_stream")
                row["ratio"] = ours["tokens_per_s"] / theirs["tokens_per_s"]
                line += (f"  {theirs['tokens_per_s']:>11.1f} {theirs['ttft_p50_ms']:>8.0f}/"
                         f"{theirs['ttft_p95_ms']:<8.0f}  {row['ratio']:.3f}")
            print(line + f"   (x{row['speedup_over_one_stream']:.2f} of one stream)")
            report["rounds"].append(row)
        eight = next((r for r in report["rounds"] if r["streams"] == 8), None)
        print("goals: 8 streams >= 4x one stream's tokens/s"
              + (f" (x{eight['speedup_over_one_stream']:.2f}: {'met' if eight['speedup_over_one_stream'] >= 4 else 'not met'})"
                 if eight else " (no 8-stream round)")
              + "; server >= onnxruntime-genai's batched tokens/s"
              + (f" (8 streams: ratio {eight['ratio']:.3f}: {'met' if eight['ratio'] >= 1 else 'not met'})"
                 if eight and "ratio" in eight else ""))
        if a.json:
            print(json.dumps(report))
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        app.state.registry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
