"""Past one machine, measured on this one (docs/scale-out.md): batch synthesis and transcription
throughput (seconds of audio per second) in process and on Ray Data with 1 and 2 worker processes,
and Ray Serve's aggregate tokens/s with 1 and 2 replicas at 8 concurrent clients next to
`onnxpipe serve` without Ray; the overhead Ray adds on one machine and the scaling from 1 to 2.

Everything runs as a user runs it: `python -m onnxpipe batch ...` and `... serve ...` in
subprocesses. Ray is one local node made here (ray.cluster_utils, 2 CPUs, no dashboard) that the
jobs and servers join with --address, so a job's time holds connecting and loading the pool,
not starting Ray. Each batch run is made on all its records and on their first quarter: "whole"
= the audio / the whole command's wall time (start-up, model loads, every record), "steady" =
the audio the other three quarters add / the wall time they add (the fixed costs cancel out):
what a long job tends to. Every pipeline holds 1 thread (batch --threads 1, one replica = 1 thread), but for the
"2 threads" rows of the runs without Ray. Serve: each of 8 clients sends its own chat prompts
one after another (greedy, `--tokens` new tokens at most, not streamed); tokens/s = completion
tokens of every reply / the wall time of the load. A benchmark, not a test: it never fails on speed.

    PYTHONPATH=py python bench/scale_out.py [--voice DIR] [--asr DIR] [--chat DIR] [--lines 32]
        [--clips 12] [--tokens 64] [--requests 4] [--smoke] [--json] [--only batch|serve]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "public" / "models"
ENV = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0",
       "PYTHONPATH": os.pathsep.join([str(ROOT / "py"), *filter(None, [os.environ.get("PYTHONPATH")])])}
SENTENCES = ["The morning train left the station on time.", "She planted tomatoes along the garden wall.",
             "Thunder rolled across the valley before the rain.", "The library opens at nine every weekday.",
             "He fixed the old bicycle with a borrowed wrench.", "A flock of geese flew south over the lake.",
             "The baker sold the last loaf before noon.", "Children built a snowman in the park."]
TOPICS = ["rivers", "bread", "trains", "owls", "glass", "maps", "bees", "ships"]


def onnxpipe(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "onnxpipe", *args], cwd=ROOT, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- batch ---------------------------------------------------------------------------------------

def make_inputs(folder: Path, voice: str, lines: int, clips: int) -> dict:
    """For each command, (all its records, the first quarter of them): ``lines`` utterances to
    speak; ``clips`` WAVs of two sentences each (the Piper voice, 22050 Hz: Whisper's resampling
    graph runs too)."""
    import onnxpipe

    said = [f"{SENTENCES[i % 8]} Line {i}." for i in range(lines)]
    inputs = {}
    for part, count in (("all", lines), ("quarter", max(1, lines // 4))):
        (folder / f"lines-{part}.txt").write_text("\n".join(said[:count]) + "\n")
    inputs["speak"] = (folder / "lines-all.txt", folder / "lines-quarter.txt")
    pipe = onnxpipe.load(voice)
    for part in ("all", "quarter"):
        (folder / f"clips-{part}").mkdir()
    for i in range(clips):
        wav = pipe.speak(f"{SENTENCES[i % 8]} {SENTENCES[(i + 3) % 8]}", noise_scale=0, noise_w=0).wav()
        for part, count in (("all", clips), ("quarter", max(1, clips // 4))):
            if i < count:
                (folder / f"clips-{part}" / f"clip-{i:02d}.wav").write_bytes(wav)
    inputs["transcribe"] = (folder / "clips-all", folder / "clips-quarter")
    return inputs


def batch_run(command: str, bundle: str, source: Path, out: Path, *extra: str) -> dict:
    """One `onnxpipe batch` job: its wall time and the seconds of audio it made or read."""
    speak = ["--set", "noise_scale=0", "--set", "noise_w=0"] if command == "speak" else []
    start = time.perf_counter()
    proc = onnxpipe("batch", command, bundle, "--input", str(source), "--output", str(out), *speak, *extra)
    log, _ = proc.communicate(timeout=3600)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"batch {command} {' '.join(extra)} failed ({proc.returncode}):\n{log[-3000:]}")
    records = json.loads((out / "manifest.json").read_text())["records"]
    return {"wall_s": wall, "audio_s": sum(e["audio_seconds"] for e in records.values()), "records": len(records)}


def batch_table(name: str, command: str, bundle: str, sources: tuple[Path, Path], work: Path, address: str) -> dict:
    """Each run on all the records and on a quarter of them: "whole" = audio / wall of the whole
    job; "steady" = the audio the other three quarters add / the time they add (start-up, pool and
    model loads cancel out)."""
    runs = {"in process, 1 thread": ("--threads", "1"), "in process, 2 threads": ("--threads", "2"),
            "Ray, 1 worker": ("--ray", "--address", address, "--concurrency", "1"),
            "Ray, 2 workers": ("--ray", "--address", address, "--concurrency", "2")}
    rows = {}
    for i, (label, args) in enumerate(runs.items()):
        whole = batch_run(command, bundle, sources[0], work / f"{command}-{i}-all", *args)
        part = batch_run(command, bundle, sources[1], work / f"{command}-{i}-quarter", *args)
        added = whole["wall_s"] - part["wall_s"]
        rows[label] = {**whole, "whole": whole["audio_s"] / whole["wall_s"], "quarter_wall_s": part["wall_s"],
                       "steady": (whole["audio_s"] - part["audio_s"]) / added if added > 0 else None}
    first = next(iter(rows.values()))
    print(f"\nbatch {name} ({first['records']} records, {first['audio_s']:.1f} s of audio; audio seconds per second)")
    print(f"  {'run':<24} {'wall s':>7} {'whole':>7} {'steady':>7}   (a quarter of the records: wall s)")
    for label, r in rows.items():
        steady = f"{r['steady']:.2f}" if r["steady"] else "-"
        print(f"  {label:<24} {r['wall_s']:>7.1f} {r['whole']:>7.2f} {steady:>7}   {r['quarter_wall_s']:.1f}")
    return rows


def ratios(rows: dict, base: str, ray1: str, ray2: str, key: str) -> dict:
    def over(a, b):
        return rows[a][key] / rows[b][key] if rows[a][key] and rows[b][key] else None
    return {"ray_over_in_process": over(ray1, base), "two_over_one": over(ray2, ray1)}


# ---- serve ---------------------------------------------------------------------------------------

class Server:
    """`onnxpipe serve chat=BUNDLE ARGS` until stopped (SIGINT); ready once /health answers."""

    def __init__(self, bundle: str, port: int, *args: str):
        self.base = f"http://127.0.0.1:{port}"
        self.proc = onnxpipe("serve", f"chat={bundle}", "--port", str(port), "--max-concurrent", "8", *args)
        self.out: list[str] = []
        threading.Thread(target=lambda: self.out.extend(self.proc.stdout), daemon=True).start()

    def __enter__(self):
        import httpx

        deadline = time.monotonic() + 600
        while True:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the server did not start:\n" + "".join(self.out)[-3000:])
            try:
                if httpx.get(f"{self.base}/health", timeout=5).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)

    def __exit__(self, *exc):
        self.proc.send_signal(signal.SIGINT)
        self.proc.wait(timeout=120)


def serve_load(base: str, clients: int, requests: int, tokens: int) -> dict:
    import openai

    api = openai.OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0, timeout=600)

    def ask(i: int) -> int:
        reply = api.chat.completions.create(model="chat", max_tokens=tokens, temperature=0, messages=[
            {"role": "user", "content": f"Write a short story about {TOPICS[i % len(TOPICS)]}, number {i}."}])
        return reply.usage.completion_tokens

    ask(0)   # warm-up: the first requests allocate (and reach every replica's first decode soon after)
    with ThreadPoolExecutor(clients) as pool:
        start = time.perf_counter()
        made = list(pool.map(lambda c: sum(ask(c * requests + r) for r in range(requests)), range(clients)))
        wall = time.perf_counter() - start
    return {"tokens": sum(made), "wall_s": wall, "tokens_per_s": sum(made) / wall}


def serve_table(bundle: str, address: str, clients: int, requests: int, tokens: int) -> dict:
    ray_port = free_port()   # Serve's proxy keeps the port of its first start on the cluster
    runs = {"onnxpipe serve, 1 thread": (free_port(), "--threads", "1"),
            "onnxpipe serve, 2 threads": (free_port(), "--threads", "2"),
            "Ray Serve, 1 replica": (ray_port, "--ray", "--address", address, "--replicas", "1"),
            "Ray Serve, 2 replicas": (ray_port, "--ray", "--address", address, "--replicas", "2")}
    rows = {}
    for label, (port, *args) in runs.items():
        with Server(bundle, port, *args) as server:
            rows[label] = serve_load(server.base, clients, requests, tokens)
    print(f"\nserve ({clients} concurrent clients x {requests} requests, up to {tokens} new tokens each)")
    print(f"  {'run':<26} {'tokens':>7} {'wall s':>7} {'tokens/s':>9}")
    for label, r in rows.items():
        print(f"  {label:<26} {r['tokens']:>7} {r['wall_s']:>7.1f} {r['tokens_per_s']:>9.1f}")
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--voice", default=str(MODELS / "piper-en-us-joe"))
    ap.add_argument("--asr", default=str(MODELS / "whisper-base"))
    ap.add_argument("--chat", default=str(MODELS / "smollm2-135m-instruct"))
    ap.add_argument("--lines", type=int, default=32, help="utterances the synthesis job speaks")
    ap.add_argument("--clips", type=int, default=12, help="WAV clips (two sentences each) the transcription job reads")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per chat request at most")
    ap.add_argument("--requests", type=int, default=4, help="requests per client, one after another")
    ap.add_argument("--smoke", action="store_true", help="a quick run that checks the script works")
    ap.add_argument("--json", action="store_true", help="also print the report as JSON")
    ap.add_argument("--only", choices=("batch", "serve"), help="run one half of the benchmark")
    a = ap.parse_args(argv)
    if a.smoke:
        a.lines, a.clips, a.tokens, a.requests = 4, 2, 8, 1
    from ray.cluster_utils import Cluster

    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 2, "include_dashboard": False})
    report = {}
    try:
        with tempfile.TemporaryDirectory(prefix="onnxpipe-scale-") as tmp:
            work = Path(tmp)
            if a.only != "serve":
                inputs = make_inputs(work, a.voice, a.lines, a.clips)
                for name, command, bundle in (("synthesis", "speak", a.voice), ("transcription", "transcribe", a.asr)):
                    rows = batch_table(name, command, bundle, inputs[command], work, cluster.address)
                    report[name] = {"runs": rows, **{k: ratios(rows, "in process, 1 thread", "Ray, 1 worker",
                                                                "Ray, 2 workers", k) for k in ("whole", "steady")}}
            if a.only != "batch":
                serve = serve_table(a.chat, cluster.address, 8, a.requests, a.tokens)
                report["serve"] = {"runs": serve, "ray_over_in_process": serve["Ray Serve, 1 replica"]["tokens_per_s"]
                                   / serve["onnxpipe serve, 1 thread"]["tokens_per_s"],
                                   "two_over_one": serve["Ray Serve, 2 replicas"]["tokens_per_s"]
                                   / serve["Ray Serve, 1 replica"]["tokens_per_s"]}
    finally:
        cluster.shutdown()
    print("\nRay on one machine: 1 worker / in process at 1 thread (the overhead), 2 workers / 1 worker (the scaling)")
    for name in ("synthesis", "transcription"):
        if name not in report:
            continue
        r = report[name]
        print(f"  batch {name:<14} whole x{r['whole']['ray_over_in_process']:.2f} / x{r['whole']['two_over_one']:.2f}"
              f"   steady x{(r['steady']['ray_over_in_process'] or 0):.2f} / x{(r['steady']['two_over_one'] or 0):.2f}")
    if "serve" in report:
        print(f"  serve tokens/s       x{report['serve']['ray_over_in_process']:.2f} / x{report['serve']['two_over_one']:.2f}")
    if a.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
