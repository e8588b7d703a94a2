"""Loop strategies are objects in a registry: each declares what it supplies and reads."""

from __future__ import annotations

import json

import pytest

import onnxpipe
from onnxpipe.config.schema import GENERATION_LOOPS
from onnxpipe.errors import ConfigError
from onnxpipe.loops import LOOPS, Autoregressive, Denoising, SinglePass, Streaming, loop_for
from tests.py.engine.test_single_pass import build


def test_every_strategy_is_registered_under_its_own_name():
    assert LOOPS == {"autoregressive": Autoregressive, "single_pass": SinglePass, "streaming": Streaming,
                     "denoising": Denoising}
    assert set(LOOPS) == set(GENERATION_LOOPS)   # every loop the schema names is implemented
    for name, cls in LOOPS.items():
        assert cls.name == name and name in GENERATION_LOOPS
        assert isinstance(cls.supplies, tuple) and isinstance(cls.reads, tuple)
    assert Autoregressive.makes_tokens and not SinglePass.makes_tokens and not Streaming.makes_tokens
    assert "logits" in Autoregressive.reads and "input_ids" in Autoregressive.supplies


def test_a_loop_without_its_settings_is_refused_at_load(tmp_path):
    build(tmp_path)
    doc = json.loads((tmp_path / "pipeline.json").read_text())
    doc["generation"]["loop"] = "denoising"    # no generation.denoising: refused, not ignored
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))
    with pytest.raises(ConfigError) as err:
        onnxpipe.load(tmp_path)
    text = str(err.value)
    assert "$.generation.denoising" in text and "pipeline.json" in text


def test_loop_for_names_the_known_ones():
    assert loop_for("single_pass") is SinglePass
    with pytest.raises(ConfigError, match="autoregressive, single_pass, streaming"):
        loop_for("beam_of_light")
