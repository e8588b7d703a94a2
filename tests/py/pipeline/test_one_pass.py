"""One-pass run policy in one place (OnePass.call_options): the CLI and the worker entry only
translate their arguments to it."""

from __future__ import annotations

import json
import shutil

import pytest

import onnxpipe
from onnxpipe.errors import InputError
from tests.fixtures.tiny_models import ensure
from tests.py.engine.test_single_pass import build


def test_options_a_loop_does_not_take_are_refused_in_the_front_ends_spelling(tmp_path):
    build(tmp_path)
    one_pass = onnxpipe.load(tmp_path).one_pass
    with pytest.raises(InputError, match=r'^options: "seed" is not an option of the single_pass loop; it takes none$'):
        one_pass.call_options({"seed": 1})
    with pytest.raises(InputError, match=r"^--steps is not an option of the single_pass loop"):
        one_pass.call_options({"num_steps": 2}, name=lambda k: "--steps")
    assert one_pass.call_options({}) == {}


def test_a_random_seed_is_chosen_only_where_the_bundle_asks_for_one():
    pipe = onnxpipe.load(ensure("tiny_diffusion"))   # generation.denoising.seed 7: kept
    assert pipe.one_pass.call_options({"num_steps": 2}) == {"num_steps": 2}
    with pytest.raises(InputError, match='options: "eta" is not an option of the denoising loop; it takes seed, '):
        pipe.one_pass.call_options({"eta": 0.0})
    given = {"seed": 3}
    assert pipe.one_pass.call_options(given) == {"seed": 3} and given == {"seed": 3}


def test_a_bundle_with_a_random_seed_gets_one_chosen_and_reported(tmp_path):
    bundle = ensure("tiny_diffusion")
    for f in ("text_encoder.onnx", "unet.onnx", "vae_decoder.onnx"):
        shutil.copy(bundle / f, tmp_path / f)
    shutil.copytree(bundle / "scheduler", tmp_path / "scheduler")
    doc = json.loads((bundle / "pipeline.json").read_text())
    doc["generation"]["denoising"]["seed"] = -1
    (tmp_path / "pipeline.json").write_text(json.dumps(doc))
    one_pass = onnxpipe.load(tmp_path).one_pass
    chosen = one_pass.call_options({"num_steps": 2})
    assert set(chosen) == {"num_steps", "seed"} and 0 <= chosen["seed"] < 2 ** 32
    assert one_pass.call_options({"seed": 5}) == {"seed": 5}
