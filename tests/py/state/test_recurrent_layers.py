"""``pipeline.state.recurrent`` with ``{layer}`` patterns (hybrid decoders' conv windows and
linear-attention state) and ``checkpoints``: the states after the last N runs are kept, so a
cut back to one of those lengths is exact and any other is refused."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from onnxpipe.backends.base import TensorInfo
from onnxpipe.backends.native import NativeBackend
from onnxpipe.config.schema import RecurrentSpec
from onnxpipe.errors import ConfigError
from onnxpipe.state.base import StepContext
from onnxpipe.state.recurrent import Recurrent

CONV = RecurrentSpec(input="past.{layer}.conv", output="present.{layer}.conv", checkpoints=2)


def session(layers=(0, 2), shape=("batch_size", 4, 2)):
    inputs = {f"past.{i}.conv": TensorInfo(f"past.{i}.conv", "float32", shape) for i in layers}
    inputs["past_key_values.1.key"] = TensorInfo("past_key_values.1.key", "float32", ("b", 2, "s", 8))
    outputs = {f"present.{i}.conv": TensorInfo(f"present.{i}.conv", "float32", shape) for i in layers}
    return SimpleNamespace(name="decoder", inputs=inputs, outputs=outputs)


def step(comp, backend, past, new, mark):
    """One run: bind (return what was fed), then outputs filled with ``mark``."""
    feeds: dict = {}
    ctx = StepContext(past, new)
    comp.bind("decoder", feeds, {}, ctx)
    fed = {k: float(v.numpy().reshape(-1)[0]) for k, v in feeds.items()}
    comp.update("decoder", {f"present.{i}.conv": backend.tensor([mark] * 8, "float32", (1, 4, 2))
                            for i in (0, 2)}, ctx)
    return fed


def test_one_state_per_layer_the_session_has_zeros_of_its_shape():
    backend = NativeBackend()
    comp = Recurrent(backend, session(), CONV, "p.json", "$.pipeline.state.recurrent[0]")
    assert comp.inputs == {"decoder": {"past.0.conv", "past.2.conv"}}
    assert comp.shapes["past.0.conv"] == (None, 4, 2)   # batch axis: the step's
    feeds: dict = {}
    comp.bind("decoder", feeds, {}, StepContext(0, 5, batch=2))
    assert feeds["past.2.conv"].numpy().shape == (2, 4, 2)
    assert not feeds["past.2.conv"].numpy().any()


def test_rewind_to_a_checkpoint_is_exact_and_inside_a_run_is_refused():
    backend = NativeBackend()
    comp = Recurrent(backend, session(), CONV)
    step(comp, backend, 0, 8, 1.0)          # prefill: state after 8
    step(comp, backend, 8, 1, 2.0)          # after 9
    step(comp, backend, 9, 1, 3.0)          # after 10 (kept: 8, 9)
    assert not comp.rewind(5)               # inside the prefill
    assert comp.rewind(9)
    assert step(comp, backend, 9, 1, 4.0) == {"past.0.conv": 2.0, "past.2.conv": 2.0}
    assert comp.rewind(8)                   # kept: 8, then 9 was taken from it
    assert not comp.rewind(9)               # gone with the cut
    assert "can't be cut back to a position inside a run" in comp.cannot_rewind()
    assert '"past.0.conv", "past.2.conv"' in comp.cannot_rewind()


def test_without_checkpoints_nothing_rewinds():
    backend = NativeBackend()
    comp = Recurrent(backend, session(), RecurrentSpec(input="past.{layer}.conv", output="present.{layer}.conv"))
    step(comp, backend, 0, 8, 1.0)
    step(comp, backend, 8, 1, 2.0)
    assert not comp.rewind(8)
    comp.reset()
    assert step(comp, backend, 0, 3, 5.0) == {"past.0.conv": 0.0, "past.2.conv": 0.0}


@pytest.mark.parametrize("spec, path, message", [
    (RecurrentSpec(input="past.{layer}.conv", output="present.{layer}.conv", layers=(0, 1)),
     "$.s[0].layers", 'layers [0, 1] declared, but session "decoder" has "past.{layer}.conv" inputs for layers [0, 2]'),
    (RecurrentSpec(input="past.{layer}.conv", output="present.conv"),
     "$.s[0].output", '"{layer}" must be in both names or in neither'),
    (RecurrentSpec(input="past.{layer}.conv", output="present.{layer}.conv", shape=(1, 5, 2)),
     "$.s[0].shape", 'shape [1, 5, 2] does not fit session "decoder" input "past.0.conv", which is [?, 4, 2]'),
    (RecurrentSpec(input="past.0.conv", output="present.0.conv", layers=(0,)),
     "$.s[0].layers", 'layers are only for names with "{layer}"'),
])
def test_bad_declarations_name_their_path(spec, path, message):
    with pytest.raises(ConfigError) as err:
        Recurrent(NativeBackend(), session(), spec, "p.json", "$.s[0]")
    assert err.value.path == path and message in str(err.value)


def test_an_open_non_batch_axis_needs_a_declared_shape():
    with pytest.raises(ConfigError, match=r"only its first \(batch\) axis may be open; declare the shape"):
        Recurrent(NativeBackend(), session(shape=("b", "w", 2)), CONV, "p.json", "$.s[0]")
