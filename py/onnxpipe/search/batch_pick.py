"""One token per batch row, each row with its own sampler (loops/batched.py).

Rows whose samplers build the same graph with the same scalar inputs (strategy, temperature,
top-k, top-p, min-p, repetition penalty, suppressed ids) share one sampler graph call: each row
takes the next uniform of its OWN seeded RNG and its own penalty history, so a row draws
exactly what it would alone. Rows that differ (or follow a grammar, whose bitmask is the row's
own) get their own call on their logits rows. Correctness first: the graphs take their scalars
as [1] inputs shared by all rows, so a group never mixes options.
"""

from __future__ import annotations

from ..ops import kv_rows
from .sampler import penalty_rows


def _key(seq, masked: tuple[int, ...]) -> tuple:
    o, sampler = seq.options, seq.sampler
    own = id(seq) if seq.grammar is not None else None
    return (own, o.do_sample, o.temperature, o.top_k, o.top_p, o.min_p, o.repetition_penalty,
            tuple(dict.fromkeys(sampler.suppress[False] + masked)))


def pick_rows(backend, provider: str, logits, seqs: list) -> list[int]:
    """The next token of every row of ``logits`` [B, S, V] (last position) or [B, V]; row i
    belongs to ``seqs[i]`` (a loops.sequence.Sequence past its first token)."""
    groups: dict[tuple, list[int]] = {}
    masked_of = []
    for i, seq in enumerate(seqs):
        masked = seq.masked() if seq.masking else ()
        masked_of.append(masked)
        groups.setdefault(_key(seq, masked), []).append(i)
    tokens = [0] * len(seqs)
    for rows in groups.values():
        part = logits
        if len(rows) != len(seqs):
            shape = backend.shape(logits)
            dtype = seqs[rows[0]].sampler.dtype
            graph = backend.open_graph(kv_rows.gather_rows_graph(dtype, len(shape)), provider)
            index = backend.tensor(rows, "int64", (len(rows),))
            part = backend.run(graph, {"x": logits, "index": index}, ["y"])["y"]
            backend.dispose(index)
        picked = _pick_group(backend, part, [seqs[i] for i in rows], masked_of[rows[0]])
        if part is not logits:
            backend.dispose(part)
        for i, token in zip(rows, picked):
            tokens[i] = token
    return tokens


def _pick_group(backend, logits, seqs: list, masked: tuple[int, ...]) -> list[int]:
    """One sampler graph call for rows that share every scalar input (the first row's sampler
    holds them; each row draws from its own). Reads the samplers' cached inputs and graphs."""
    lead = seqs[0].sampler
    if lead.fixed is None:
        lead.fixed = lead._fixed_inputs(logits)
    feeds = dict(lead.fixed)
    feeds["logits"] = logits
    made = []
    count = len(seqs)
    if lead.options.do_sample:
        draws = [seq.sampler._draw(1)[0] for seq in seqs]
        made.append(backend.tensor(draws, "float32", (count,)))
        feeds["uniform"] = made[-1]
    if lead.penalty:
        padded, shape = penalty_rows([seq.ids for seq in seqs])
        made.append(backend.tensor(padded, "int64", shape))
        feeds["prev_tokens"] = made[-1]
    suppress = lead._suppressed(False, masked)
    if suppress is not None:
        feeds["suppress_ids"] = suppress
    allowed = None
    if seqs[0].grammar is not None:   # a grammar row is a group of its own
        grammar = seqs[0].grammar
        grammar.fill(0)
        allowed = feeds["allowed"] = grammar.allowed(backend, 1)
    graph = lead._graph(suppress is not None, False, allowed is not None)
    out = backend.run(graph, feeds, ["next_tokens"])["next_tokens"]
    tokens = backend.to_list(out)
    backend.dispose_many(made + [out])
    return [int(t) for t in tokens]
