"""Does a bundle fit onnxruntime-web's WASM heap? Answered before any large file is fetched.

The heap is one 32-bit WebAssembly memory: 4 GiB at most (onnxruntime-web 1.30 builds no 64-bit
memory). What a decoder needs there, with the heap plan the runtime applies (heap/plan.py:
every weight outside the graph, prepacking off, MatMulNBits expanded to fp32 where it fits):

- weights as they sit after load: fp32 and int8 as stored; fp16 MatMul weights as fp32 (the
  engine computes them in fp32 and keeps only that copy); MatMulNBits weights at 4 bytes each
  when expanded, else as stored plus the largest one's fp32 buffer, made on every call;
- the KV cache at ``context`` tokens, twice (a step's past is copied in while its present is
  written);
- working memory for one prefill chunk (loops/autoregressive.py PREFILL_CHUNK tokens: its
  logits, attention scores over the context, MLP activations) and the engine's own ~0.1 GB.

A session whose graph is here (a small .onnx beside its data file) is measured from the graph
itself (exact); a graph holding its weights inline is not fetched yet, so its weights are
counted from config.json's shapes and the dtype's recipe. tests/e2e/large-models.test.mjs
holds both to the heap measured after load.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, replace

from ..errors import OnnxpipeError
from ..loops.autoregressive import PREFILL_CHUNK

GiB = 1 << 30
HEAP_LIMIT = 4 * GiB          # onnxruntime-web's wasm32 heap: 65536 pages of 64 KiB
ENGINE_BYTES = 96 << 20       # the engine's own heap use besides the weights (measured ~80 MiB)
DEFAULT_CONTEXT = 4096        # tokens of KV cache a load reserves unless it asks otherwise
DEFAULT_HEAPS = 2             # heaps "auto" may spread a decoder over (onnxruntime-web instances, heap/shards.py)
MAX_HEAPS = 4
SPREAD_SLACK = 0.05           # parts are cut at layers: one may hold this much more than the mean
# bytes per stored weight of a transformers.js dtype: (embedding table, MatMul weight as stored,
# MatMul weight in the heap when expanded / widened, MatMulNBits?)
RECIPES = {
    "fp32": (4, 4.0, 4, False),
    "fp16": (2, 2.0, 4, False),       # fp16 MatMul weights are computed (and kept) as fp32
    "q8": (1, 1.0, 1, False),         # int8 MatMulInteger weights, uint8 embedding
    "int8": (1, 1.0, 1, False),
    "uint8": (1, 1.0, 1, False),
    "q4": (4, 0.5 + 4 / 32, 4, True),     # 4-bit blocks of 32 with an fp32 scale; fp32 embedding
    "q4f16": (2, 0.5 + 2 / 32, 4, True),  # the same with fp16 scales; fp16 embedding
}


class HeapError(OnnxpipeError):
    """A bundle that can't fit the WASM heap as asked (said before its weights are fetched)."""

    kind = "memory"


@dataclass(frozen=True)
class Shape:
    """What the estimate needs of a decoder's config."""

    vocab: int
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int | None = None

    @property
    def matmul_weights(self) -> int | None:
        """Weights of every MatMul: the layers' projections and the lm_head (its own matrix in
        an ONNX export even when tied to the embedding)."""
        if self.intermediate is None:
            return None
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = self.hidden * q + 2 * self.hidden * kv + q * self.hidden + 3 * self.hidden * self.intermediate
        return self.layers * per_layer + self.vocab * self.hidden

    @property
    def largest_matmul(self) -> int:
        """Weights of the largest MatMul: the lm_head, or an MLP projection under a small vocabulary."""
        return self.hidden * max(self.vocab, self.intermediate or 0, self.heads * self.head_dim)

    def kv_bytes(self, context: int, element: int) -> int:
        return self.layers * 2 * self.kv_heads * self.head_dim * context * element


def shape_of(bundle_dir: str) -> Shape | None:
    """The decoder's shape from config.json (transformers.js folders) or genai_config.json."""
    def read(name):
        try:
            with open(os.path.join(bundle_dir, name), encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return None
    cfg = read("config.json")
    if isinstance(cfg, dict):
        text = cfg.get("text_config") if isinstance(cfg.get("text_config"), dict) else cfg
        try:
            heads = int(text["num_attention_heads"])
            return Shape(int(text["vocab_size"]), int(text["hidden_size"]), int(text["num_hidden_layers"]), heads,
                         int(text.get("num_key_value_heads") or heads),
                         int(text.get("head_dim") or int(text["hidden_size"]) // heads),
                         int(text["intermediate_size"]) if text.get("intermediate_size") else None)
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            return None
    genai = read("genai_config.json")
    model = genai.get("model") if isinstance(genai, dict) else None
    decoder = model.get("decoder") if isinstance(model, dict) else None
    if isinstance(decoder, dict):
        try:
            return Shape(int(model["vocab_size"]), int(decoder["hidden_size"]), int(decoder["num_hidden_layers"]),
                         int(decoder["num_attention_heads"]), int(decoder["num_key_value_heads"]),
                         int(decoder["head_size"]))
        except (KeyError, TypeError, ValueError):
            return None
    return None


@dataclass
class SessionNeed:
    name: str
    file: str
    stored: int            # bytes of its files
    full: int              # heap bytes with every MatMulNBits expanded (the fast plan)
    least: int             # heap bytes with none expanded (weights as stored + the per-call buffer)
    exact: bool            # read from the graph (else counted from config.json and the dtype)


@dataclass
class Fit:
    sessions: list[SessionNeed]
    context: int
    kv: int
    work: int
    limit: int = HEAP_LIMIT
    engine: int = ENGINE_BYTES
    expand: str = "auto"     # the load's expand_weights (heap/plan.py)
    heaps_asked: int | None = 1   # the load's heaps: that many onnxruntime-web instances, or None: "auto"

    @property
    def spread(self) -> int:
        """Heaps the weights may be spread over: parts of one graph (heap/shards.py), so only a
        bundle with a single wasm session; "auto" spreads over DEFAULT_HEAPS at most."""
        if len(self.sessions) != 1:
            return 1
        return DEFAULT_HEAPS if self.heaps_asked is None else self.heaps_asked

    def _heaps_for(self, weights: int) -> int | None:
        first = 1 if self.heaps_asked is None or len(self.sessions) != 1 else self.spread
        for heaps in range(first, self.spread + 1):
            # each heap holds the engine's own and a chunk's working memory; parts are cut at
            # layers, so one may come out a little fuller than the mean
            room = heaps * self.limit * (1 if heaps == 1 else 1 - SPREAD_SLACK)
            if weights + self.kv + heaps * (self.engine + self.work) <= room:
                return heaps
        return None

    @property
    def weights_full(self) -> int:
        return sum(s.full for s in self.sessions)

    @property
    def weights_least(self) -> int:
        return sum(s.least for s in self.sessions)

    @property
    def heaps_full(self) -> int | None:
        return None if self.expand == "none" else self._heaps_for(self.weights_full)

    @property
    def heaps(self) -> int | None:
        """The heaps the load opens in (None: it can't fit)."""
        if self.expand == "all":
            return self.heaps_full
        full = self.heaps_full
        return full if full is not None else self._heaps_for(self.weights_least)

    @property
    def fits(self) -> bool:
        return self.heaps is not None

    @property
    def fits_full(self) -> bool:
        return self.heaps is not None and self.heaps == self.heaps_full

    @property
    def need(self) -> int:
        """Heap bytes the load takes over all its heaps (the least, when nothing fits)."""
        heaps = self.heaps or self.spread
        weights = self.weights_full if self.fits_full or self.expand == "all" else self.weights_least
        return weights + self.kv + heaps * (self.engine + self.work)

    @property
    def budget(self) -> int:
        """Heap bytes the weights may take in each heap (what each plan expands within)."""
        heaps = self.heaps or 1
        return self.limit - self.engine - self.work - self.kv // heaps

    @property
    def full(self) -> int:
        return self.weights_full + self.kv + self.engine + self.work

    @property
    def least(self) -> int:
        return self.weights_least + self.kv + self.engine + self.work

    def summary(self) -> dict:
        return {"limit_bytes": self.limit, "need_bytes": self.need,
                "full_bytes": self.full, "least_bytes": self.least, "kv_bytes": self.kv,
                "work_bytes": self.work, "engine_bytes": self.engine, "context_length": self.context,
                "weights_exact": all(s.exact for s in self.sessions), "expanded_all": self.fits_full,
                "heaps": self.heaps or 0}


def gb(n: int) -> str:
    return f"{n / GiB:.2f} GiB"


def _graph_need(path: str, rel: str, name: str, stored: int) -> SessionNeed:
    from ..onnx_info import FileSource
    from .plan import plan_file

    source = FileSource(path)
    try:
        everything, nothing = plan_file(source, rel, "all"), plan_file(source, rel, "none")
    finally:
        source.close()
    return SessionNeed(name, rel, stored, everything.heap_bytes, nothing.heap_bytes, True)


def _config_need(name: str, rel: str, stored: int, shape: Shape | None, dtype: str | None) -> SessionNeed:
    recipe = RECIPES.get(dtype or "")
    mm = shape.matmul_weights if shape else None
    if recipe is None or mm is None:
        return SessionNeed(name, rel, stored, stored, stored, False)   # as stored: all that is known
    embed_b, stored_b, heap_b, nbits = recipe
    embedding = shape.vocab * shape.hidden * embed_b
    full = embedding + int(mm * heap_b)
    least = embedding + int(mm * stored_b) + shape.largest_matmul * 4 if nbits else full
    return SessionNeed(name, rel, stored, full, least, False)


def estimate(config, sessions: dict[str, tuple[str, list[str]]], fs_dir: str, sizes: dict[str, int],
             context: int, expand: str = "auto", heaps: int | None = 1) -> Fit:
    """The heap ``config``'s sessions need (``sessions``: name -> (model file, data files), all
    bundle-relative; ``sizes``: bytes of each bundle file) with the KV cache at ``context``."""
    shape = shape_of(fs_dir)
    dtype = config.dtype or _dtype_opened(config, sessions)
    needs = []
    for name, (rel, data) in sessions.items():
        stored = sizes.get(rel, 0) + sum(sizes.get(d, 0) for d in data)
        path = os.path.join(fs_dir, rel)
        if os.path.isfile(path) and os.path.getsize(path) > 0 and data:   # a small graph, fetched already
            needs.append(_graph_need(path, rel, name, stored))
        else:
            needs.append(_config_need(name, rel, stored, shape, dtype))
    kv = work = 0
    if shape is not None and config.spec.pipeline.state.kv_cache is not None:
        element = 2 if dtype in ("fp16", "q4f16") else 4
        kv = 2 * shape.kv_bytes(context, element)
        chunk = min(PREFILL_CHUNK, context)
        work = (chunk * shape.vocab * 4 + chunk * shape.heads * context * 4
                + 3 * chunk * ((shape.intermediate or 4 * shape.hidden) + shape.hidden) * 4)
    return Fit(needs, context, kv, work, expand=expand, heaps_asked=heaps)


def _dtype_opened(config, sessions) -> str | None:
    from ..config import transformers_js

    if not config.dtypes:
        return None
    return transformers_js.dtype_of(config.bundle_dir, [rel for rel, _ in sessions.values()])


def refusal(fit: Fit, what: str, others: dict[str, Fit]) -> HeapError:
    """The error for a ``fit`` that does not fit, with what would (``others``: dtype -> Fit)."""
    weights = fit.weights_full if fit.expand == "all" else fit.weights_least
    heaps = fit.spread
    parts = [f"weights {gb(weights)}" + ("" if all(s.exact for s in fit.sessions) else " (from config.json)"),
             f"KV cache {gb(fit.kv)} at {fit.context} tokens",
             f"working memory {gb(heaps * (fit.work + fit.engine))}"]
    fitting = [f"{d} ({gb(o.need)}{f' in {o.heaps} heaps' if o.heaps > 1 else ''})" for d, o in others.items() if o.fits]
    hint = (f"dtypes that fit: {', '.join(fitting)}" if fitting else "no dtype of it fits")
    least = "" if fit.expand == "all" else " at the least"
    room = f"{gb(fit.limit)} WASM heap" if heaps == 1 else f"{heaps} WASM heaps of {gb(fit.limit)}"
    also = ", with expand_weights \"auto\"" if fit.expand == "all" else ""
    more = " spread over more heaps (heaps)," if heaps < MAX_HEAPS and len(fit.sessions) == 1 else ""
    return HeapError(f"{what} needs {gb(fit.need)}{least}, more than onnxruntime-web's {room} hold "
                     f"({'; '.join(parts)}), so it was not downloaded. {hint}; or load it{also} with a "
                     f"shorter context_length,{more} or on webgpu (its weights then live on the GPU)")


def with_context(config, context: int):
    """``config`` with generation.max_length at most ``context`` (the KV cache the fit reserved)."""
    gen = config.spec.generation
    if gen.max_length <= context:
        return config
    return replace(config, spec=replace(config.spec, generation=replace(gen, max_length=context)))
