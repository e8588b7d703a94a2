"""The fixed dims of a KV input: from the session, from kv_cache.num_heads / head_size, or
detected in the model graph (onnx_info) when the session leaves them symbolic.

onnxruntime-genai's builder declares past_key_values.N.key as [batch_size, kv_heads,
past_sequence_length, kv_cache_dim]: the head size is a name, not a number. The graph still
fixes it (the attention node's attributes, the key projection's weight shape), so a seven-line
pipeline.json needs no kv_cache.head_size. The model file is read (structure only) on first
need, once per session.
"""

from __future__ import annotations

from ..errors import ConfigError
from ..onnx_info.session import SessionGraph

PATH = "$.pipeline.state.kv_cache"


def resolve(slot, seq: int, spec, graph: SessionGraph, file: str) -> tuple:
    """Dims of ``slot``'s past input: ints where fixed, None for the batch, -1 for ``seq``.

    Heads sit just before the sequence axis, the head size last. A kv_cache value that
    contradicts a dim the session fixes is an error; where the session leaves a dim symbolic,
    the config's value is used as given, else the graph is asked (onnx_info/detect.py).
    """
    name, shape = slot.past.name, list(slot.past.shape)
    dims = [d if isinstance(d, int) else None for d in shape]
    dims[seq] = -1
    axes = {"num_heads": seq - 1, "head_size": len(dims) - 1}
    for key, axis in axes.items():
        value = getattr(spec, key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ConfigError(f"kv_cache.{key}: expected a positive integer, found {value!r}",
                              file=file, path=f"{PATH}.{key}")
        if dims[axis] is not None and dims[axis] != value:
            raise ConfigError(f'kv_cache.{key} is {value}, but the model fixes {dims[axis]} there: '
                              f'KV input "{name}" has dims {shape}', file=file, path=f"{PATH}.{key}")
        dims[axis] = value
    missing = {key: axis for key, axis in axes.items() if dims[axis] is None}
    if missing:
        facts = graph.facts()
        found = facts.kv_dims(name, slot.present) if facts is not None else None
        for key, axis in missing.items():
            hit = found and (found.heads if key == "num_heads" else found.head_size)
            if hit:
                dims[axis] = hit.value
        still = [key for key, axis in missing.items() if dims[axis] is None]
        if still:
            looked = "; ".join(found.looked_at) if found else graph.error
            raise ConfigError(f'KV input "{name}" has dims {shape} and its {" and ".join(still)} could not '
                              f"be found in the model graph (looked at: {looked}). Give "
                              f'{" and ".join("kv_cache." + k for k in still)} in pipeline.json',
                              file=file, path=f"{PATH}.{still[0]}")
    if sum(d is None for d in dims) > 1:
        raise ConfigError(f'KV input "{name}" has dims {shape}: only the batch and sequence dims may be '
                          "symbolic; give the others as kv_cache.num_heads / kv_cache.head_size",
                          file=file, path=PATH)
    return tuple(dims)
