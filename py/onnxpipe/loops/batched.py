"""Continuous batching: several independent Sequences decode together, one engine call per step.

``BatchedDecoder.add(seq)`` runs the sequence's prefill alone (batch 1, the plain path of
loops/autoregressive.py), picks its first token and moves its KV cache into a new batch row
(state/batched_kv.py); ``step()`` runs ONE decoder pass for every active row (rows of different
lengths and positions) and picks each row's token with that row's own sampler, seed, penalty
history, suppressed ids and grammar (search/batch_pick.py); rows that end (stop id, stop string,
budget, context, cancel) leave between steps. Each response is the ``GenerationStep`` the plain
loop yields for the same token, so a sequence gives the same tokens alone and in a batch (up to
the rounding of the batched kernels: docs/batching.md).

``batchable(pipe)`` says why a bundle's state can't be batched (None when it can): those run
one sequence at a time. The decoder owns the bundle's executor while it runs.
"""

from __future__ import annotations

import time

from ..errors import InputError
from ..search.batch_pick import pick_rows
from ..state.batched_kv import BatchedKV
from ..state.kv_cache import KVCache, SeparateKVCache, SharedBufferKVCache
from ..state.positions import AttentionMask, PositionIds
from .autoregressive import Autoregressive
from .sequence import GenerationStep, Sequence

__all__ = ["BatchedDecoder", "batchable"]


def _loaded(pipe):
    return getattr(pipe, "loaded", pipe)


def _attention_ops(kv: KVCache) -> set[str] | None:
    facts = kv._graph.facts()
    return None if facts is None else {n.op_type for n in facts.graph.nodes}


def batchable(pipe) -> str | None:
    """Why ``pipe`` (a Pipeline or its LoadedPipeline) can't decode several sequences as batch
    rows, or None when it can: a token loop whose only flow is one decoder session fed
    input_ids, a separate or shared-buffer KV cache, attention mask and position ids."""
    loaded = _loaded(pipe)
    loop = loaded.loop
    if loop is not Autoregressive:
        return f'its loop is "{loop.name}", not "autoregressive"'
    executor = loaded.executor
    if executor.plugin is not None:
        return "it has a plugin, whose state is per sequence"
    for phase in ("init", "final"):
        if executor.has_phase(phase):
            return f'it has a flow phase "{phase}", run once per sequence'
    plans = executor.plan.phases["step"]
    if len(plans) != 1:
        return f"its step flow runs {len(plans)} sessions; batching takes one decoder session"
    plan = plans[0]
    step = plan.step
    if step.repeat != 1 or step.loop == "per_image" or step.merge is not None or plan.self_feeds:
        return f'its step session "{step.run}" repeats, runs per image or merges features'
    if len(plan.feeds) != 1 or plan.feeds[0][1:] != ("pipeline", "input_ids"):
        return (f'its step session "{step.run}" takes inputs other than input_ids: '
                f'{", ".join(name for name, _, _ in plan.feeds)}')
    kv = mask = positions = None
    for comp in executor.components:
        if isinstance(comp, KVCache):
            if comp.window is not None:
                return "its KV cache has sliding-window layers, whose buffers evict per sequence"
            if type(comp) not in (SeparateKVCache, SharedBufferKVCache):
                return f'its KV cache format "{comp.format}" has no batch axis to put rows on'
            kv = comp
        elif isinstance(comp, AttentionMask):
            mask = comp
        elif isinstance(comp, PositionIds):
            if any(rank != 2 for rank in comp.rank.values()):
                return "its position ids are mRoPE (3 axes), derived per sequence from image grids"
            positions = comp
        else:
            return (f"its state component {type(comp).__name__} holds per-sequence values (recurrent state, "
                    f"a cross-attention cache or a cache branch) that have no batch rows here")
    if kv is None:
        return "it has no KV cache"
    if mask is None:
        return "its decoder takes no attention_mask, so rows of different lengths can't be padded"
    ops = _attention_ops(kv)
    if ops is None:
        return "its decoder graph could not be read to tell how attention places each row"
    if "GroupQueryAttention" not in ops:
        if kv.format == "shared_buffer":
            return "its shared KV buffer is written in place by an attention op other than GroupQueryAttention"
        if positions is None:   # left-padded rows need their positions given, not derived from the past's length
            return ("its decoder takes no position_ids and its attention is not GroupQueryAttention, so "
                    "left-padded rows can't be given their own positions")
    return None


class BatchedDecoder:
    """Decode several Sequences of one bundle together; see the module docstring.

    ``add(seq)`` -> the first token's responses; ``step()`` -> one response per active row
    (and a "cancelled" one per row whose cancel fired), each as ``(sequence, GenerationStep)``;
    ``remove(seq)`` drops a row without a response. ``max_rows`` bounds the batch."""

    def __init__(self, pipe, max_rows: int = 16):
        loaded = _loaded(pipe)
        why = batchable(loaded)
        if why:
            raise InputError(f"this bundle can't decode sequences as batch rows: {why}; "
                             f"run one sequence at a time")
        if max_rows < 1:
            raise InputError(f"max_rows: expected >= 1, got {max_rows!r}")
        self.executor = executor = loaded.executor
        self.backend = executor.backend
        self.plan = plan = executor.plan.phases["step"][0]
        session = plan.session.name
        self.kv_cache = next(c for c in executor.components if isinstance(c, KVCache))
        gqa = "GroupQueryAttention" in _attention_ops(self.kv_cache)
        self.kv = BatchedKV(self.backend, self.kv_cache.provider, self.kv_cache.slots,
                            "right" if gqa else "left", self.kv_cache.format == "shared_buffer")
        self.ids_input = plan.feeds[0][0]
        self.mask_info = next(c.infos[session] for c in executor.components if isinstance(c, AttentionMask))
        self.position_info = next((c.infos[session] for c in executor.components
                                   if isinstance(c, PositionIds)), None)
        self.logits_output = executor.plan.pipeline_outputs["logits"][1]
        self.max_rows = max_rows
        self.seqs: list[Sequence] = []
        self._next: list[int] = []       # per row: the token to feed next
        self._since: list[float] = []    # per row: when its last token was made

    @property
    def rows(self) -> int:
        return len(self.seqs)

    # ---- rows joining and leaving ------------------------------------------------------------

    def add(self, seq: Sequence) -> list[tuple[Sequence, GenerationStep]]:
        """Prefill ``seq`` alone, pick its first token, and (unless that ends it) make it a row.
        A long prompt is fed in chunks with ``seq.cancel`` read between them (a cancel there
        ends with a tokenless "cancelled" response)."""
        if len(self.seqs) >= self.max_rows:
            raise InputError(f"the batch is full ({self.max_rows} rows): step until a row leaves")
        if seq.ids:
            raise InputError(f"a batched sequence starts with no state: give its {len(seq.ids)} held ids "
                             f"as new_ids")
        if not seq.new_ids:
            raise InputError("a batched sequence needs new_ids (its prompt): got none")
        if seq.drafter is not None or seq.options.num_beams > 1:
            raise InputError("batched decoding makes one token per row per step: call without "
                             "speculative and with num_beams 1")
        executor = self.executor
        executor.reset()
        start = time.perf_counter()
        try:
            # a long prompt goes in chunks with seq.cancel read between them, as in the plain loop
            new_ids = Autoregressive(executor)._prefill_chunks(seq)
            if new_ids is None:
                return [(seq, GenerationStep(None, None, "cancelled", timing=seq.timing))]
            outs = executor.run_phase("step", {"input_ids": (new_ids, (1, len(new_ids)))},
                                      new_length=len(new_ids))
            seq.ids.extend(new_ids)
            token = self._first(outs["logits"], seq)
            response, now = self._advance(seq, token, start)
            if response.finish_reason is None:
                taken = [slot.value for slot in self.kv_cache.slots]
                for slot in self.kv_cache.slots:
                    slot.value = None   # the batch owns them now
                self.kv.join(taken, len(seq.ids), self.backend.shape(taken[0])[2])
                self.seqs.append(seq)
                self._next.append(token)
                self._since.append(now)
        finally:
            executor.reset()
        return [(seq, response)]

    def remove(self, seq: Sequence) -> None:
        """Drop ``seq``'s row (no response); a sequence not in the batch is an error."""
        for i, held in enumerate(self.seqs):
            if held is seq:
                self._leave([i])
                return
        raise InputError("remove: the sequence is not a row of this batch")

    def _leave(self, rows: list[int]) -> None:
        if not rows:
            return
        self.kv.leave(rows)
        drop = set(rows)
        self.seqs = [s for i, s in enumerate(self.seqs) if i not in drop]
        self._next = [t for i, t in enumerate(self._next) if i not in drop]
        self._since = [t for i, t in enumerate(self._since) if i not in drop]

    # ---- one step for every row ----------------------------------------------------------------

    def step(self) -> list[tuple[Sequence, GenerationStep]]:
        """One decoder pass for every active row; rows that end leave."""
        made: list[tuple[Sequence, GenerationStep]] = []
        cancelled = [i for i, seq in enumerate(self.seqs) if seq.cancel is not None and seq.cancel()]
        for i in cancelled:
            seq = self.seqs[i]
            made.append((seq, GenerationStep(None, None, "cancelled", timing=seq.timing)))
        self._leave(cancelled)
        if not self.seqs:
            return made
        backend, kv, plan = self.backend, self.kv, self.plan
        infos = plan.session.inputs
        count = len(self.seqs)
        feeds, bound, own = {}, {}, []
        own.append(backend.tensor(self._next, infos[self.ids_input].dtype, (count, 1)))
        feeds[self.ids_input] = own[-1]
        if self.position_info is not None:
            own.append(backend.tensor(kv.lengths, self.position_info.dtype, (count, 1)))
            feeds[self.position_info.name] = own[-1]
        flat, shape = kv.mask()
        own.append(backend.tensor(flat, self.mask_info.dtype, shape))
        feeds[self.mask_info.name] = own[-1]
        kv.bind(feeds, bound)
        outputs = backend.run(plan.session, feeds, plan.outputs, bound)
        backend.dispose_many(own)
        kv.update(outputs)
        presents = {present for _, present, _ in kv.names}
        logits = outputs[self.logits_output]
        for seq, token in zip(self.seqs, self._next):
            seq.ids.append(token)
        try:
            tokens = pick_rows(backend, self.kv_cache.provider, logits, self.seqs)
        finally:
            backend.dispose_many([v for k, v in outputs.items() if k not in presents])
        ended = []
        for i, (seq, token) in enumerate(zip(self.seqs, tokens)):
            response, self._since[i] = self._advance(seq, token, self._since[i])
            made.append((seq, response))
            if response.finish_reason is not None:
                ended.append(i)
            else:
                self._next[i] = token
        self._leave(ended)
        return made

    def _first(self, logits, seq: Sequence) -> int:
        """The first token, as the plain loop picks it (suppress_tokens_at_start apply)."""
        allowed = None
        if seq.grammar is not None:
            seq.grammar.fill(0)
            allowed = seq.grammar.allowed(self.backend, 1)
        return seq.sampler(logits, seq.ids, start=True, masked=seq.masked() if seq.masking else (),
                           allowed=allowed)

    @staticmethod
    def _advance(seq: Sequence, token: int, start: float) -> tuple[GenerationStep, float]:
        """Count ``token`` into ``seq`` as the plain loop does: grammar, timing, finish, text."""
        if seq.grammar is not None:
            seq.accept(token)
        seq.generated.append(token)
        now = seq.timing.count(start, len(seq.generated) == 1)
        finish = seq.finish_of(token)
        delta, hit = seq.text.push(token, finish is not None) if seq.text is not None else (None, False)
        if finish or hit:   # a stop string alone ends the text, not the model
            return GenerationStep(token, delta, "stop" if hit else finish, {}, timing=seq.timing), now
        return GenerationStep(token, delta), now

    def close(self) -> None:
        """Drop every row (no responses) and give the buffers back."""
        self.kv.reset()
        self.seqs, self._next, self._since = [], [], []
