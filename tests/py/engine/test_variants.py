"""Per-provider file variants: the runtime opens the file made for the provider it got, and
``variant=`` / ``--variant`` forces another provider's file (to compare one file everywhere)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import onnx_builders as ob
import pytest

import onnxpipe
from onnxpipe.errors import InputError

ROOT = Path(__file__).resolve().parents[3]


def bundle(tmp_path: Path) -> Path:
    ob.save(ob.decoder_model(vocab=16), tmp_path / "cpu.onnx")   # next id: (t + 1) % 16
    ob.save(ob.decoder_model(vocab=12), tmp_path / "wasm.onnx")  # next id: (t + 1) % 12
    config = ob.decoder_config()
    config["pipeline"]["sessions"] = {"decoder": {"file": {"cpu": "cpu.onnx", "wasm": "wasm.onnx"}}}
    ob.write_json(tmp_path / "pipeline.json", config)
    return tmp_path


def test_the_provider_it_got_picks_the_file(tmp_path):
    pipe = onnxpipe.load(bundle(tmp_path))
    assert pipe.sessions["decoder"].provider == "cpu"
    assert pipe.generate(input_ids=[10], max_new_tokens=3).tokens == [11, 12, 13]


def test_variant_forces_another_providers_file(tmp_path):
    pipe = onnxpipe.load(bundle(tmp_path), variant="wasm")
    assert pipe.sessions["decoder"].provider == "cpu"          # still runs on what the engine has
    assert pipe.generate(input_ids=[10], max_new_tokens=3).tokens == [11, 0, 1]


def test_cli_variant(tmp_path):
    out = subprocess.run([sys.executable, "-m", "onnxpipe", "run", str(bundle(tmp_path)), "--input-ids", "10",
                          "--max-new-tokens", "3", "--greedy", "--json", "--variant", "wasm"],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert json.loads(out.stdout)["tokens"] == [11, 0, 1]


def test_each_variant_names_only_its_own_data_files(tmp_path):
    from onnxpipe.config import load_config
    from onnxpipe.engine.build import session_files

    folder = bundle(tmp_path)
    config = json.loads((folder / "pipeline.json").read_text())
    config["pipeline"]["sessions"]["decoder"]["external_data"] = {"cpu": ["cpu.data"], "wasm": ["wasm.data"]}
    (folder / "pipeline.json").write_text(json.dumps(config))

    class Engine:
        providers = ("wasm",)

    loaded = load_config(folder)
    assert session_files(loaded, Engine()) == ["wasm.onnx", "wasm.data"]
    assert session_files(loaded, Engine(), variant="cpu") == ["cpu.onnx", "cpu.data"]


def test_a_named_variant_beside_the_providers(tmp_path):
    # a bundle may name a variant that is no provider (SmolLM2's "int4": the file onnxruntime-genai
    # opens); only a forced variant opens it
    folder = bundle(tmp_path)
    config = json.loads((folder / "pipeline.json").read_text())
    config["pipeline"]["sessions"]["decoder"]["file"] = {"cpu": "cpu.onnx", "int4": "wasm.onnx"}
    (folder / "pipeline.json").write_text(json.dumps(config))
    assert onnxpipe.load(folder).generate(input_ids=[10], max_new_tokens=3).tokens == [11, 12, 13]
    assert onnxpipe.load(folder, variant="int4").generate(input_ids=[10], max_new_tokens=3).tokens == [11, 0, 1]


def test_an_unknown_variant_is_refused_with_the_names_there_are(tmp_path):
    folder = bundle(tmp_path)
    with pytest.raises(InputError, match=r'variant "int5": .*pipeline.json names no such file variant; '
                                         r'it names cpu, wasm'):
        onnxpipe.load(folder, variant="int5")
    out = subprocess.run([sys.executable, "-m", "onnxpipe", "run", str(folder), "--input-ids", "10",
                          "--variant", "int5"], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "py")})
    assert out.returncode == 3 and 'variant "int5"' in out.stderr
