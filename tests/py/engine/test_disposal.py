"""No engine tensor is leaked over many generations: every output the runtime gets from the
engine is disposed once replaced (in the browser, dispose() frees wasm / GPU memory).

A counting wrapper around the native backend plays the browser's part: it can't bind outputs
(so shared KV buffers are fed as growing caches, as in onnxruntime-web) and it records every
output handed out and every dispose.
"""

from __future__ import annotations

import pytest

import onnxpipe
from onnxpipe.backends.native import NativeBackend
from tests.fixtures import tiny_models


class CountingBackend(NativeBackend):
    supports_bound_outputs = False

    def __init__(self):
        super().__init__()
        self.live: dict[int, object] = {}

    def run(self, session, feeds, outputs, bound=None):
        result = super().run(session, feeds, outputs, bound)
        for value in result.values():
            self.live[id(value)] = value
        return result

    def dispose(self, tensor):
        self.live.pop(id(tensor), None)

    def dispose_many(self, tensors):
        for tensor in tensors:
            self.dispose(tensor)


@pytest.mark.parametrize("name", ["genai_llama", "novel_two_stage", "novel_recurrent"])
def test_outputs_are_disposed_across_generations(name):
    bundle = tiny_models.ensure(name)
    ids = tiny_models.load_expected(bundle)["input_ids"]
    backend = CountingBackend()
    pipe = onnxpipe.load(bundle, backend=backend)
    counts = []
    for i in range(12):
        pipe.generate(input_ids=ids, max_new_tokens=8 + i % 3, ignore_eos=True, do_sample=i % 2 == 1,
                      random_seed=i)
        counts.append(len(backend.live))
    # what is still live is what the state holds now (KV cache, last logits), not a pile
    assert max(counts[2:]) == min(counts[2:]) == counts[-1]
    pipe.reset()
    assert len(backend.live) == 0
