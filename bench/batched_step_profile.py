"""Where a batched decode step's time goes: BatchedDecoder (loops/batched.py) on SmolLM2's int4
file at 1, 4, 8 and 16 rows, 30 steps each after 3 warm-up steps; per step, the time inside
engine runs (the decoder pass and the sampler graph) and the rest (Python). Not a test.

    .venv/bin/python bench/batched_step_profile.py
"""
import time

import onnxpipe
from onnxpipe.loops import Sequence
from onnxpipe.loops.batched import BatchedDecoder
from onnxpipe.search.stopping import stop_ids
pipe = onnxpipe.load("public/models/smollm2-135m-instruct", variant="int4")
loaded = pipe.loaded
ex = loaded.executor
runs = {"t": 0.0}
orig = ex.backend.run
def timed(*a, **k):
    t = time.perf_counter(); out = orig(*a, **k); runs["t"] += time.perf_counter() - t; return out
ex.backend.run = timed
prompt = pipe.chat_prompt_ids([{"role": "user", "content": "Tell me about the history of Rome."}])
for B in (1, 4, 8, 16):
    dec = BatchedDecoder(pipe, max_rows=16)
    opts = loaded.options({"do_sample": False, "ignore_eos": True}, 64)
    seqs = [Sequence([], prompt, opts, stop_ids(opts, loaded.eos), loaded.sampler(opts)) for _ in range(B)]
    for s in seqs: dec.add(s)
    for _ in range(3): dec.step()
    runs["t"] = 0.0; t = time.perf_counter(); n = 0
    for _ in range(30):
        dec.step(); n += 1
    wall = time.perf_counter() - t
    print(f"B={B}: step {wall/n*1000:.1f} ms (engine runs {runs['t']/n*1000:.1f} ms, python {(wall-runs['t'])/n*1000:.1f} ms), {B*n/wall:.1f} tok/s")
    dec.close()
