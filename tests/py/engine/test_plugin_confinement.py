"""A bundle's plugin is loaded only from inside its bundle folder (docs/security.md): a path
that leaves it (../, absolute, a URL, a symlink pointing out) is refused at load, and the
outside file never runs. The browser's copy of the same checks: tests/e2e/security.test.mjs."""

from __future__ import annotations

import json

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError
from tests.py.engine.test_controls import build
from tests.py.engine.test_plugin import PLUGIN


@pytest.fixture
def layout(tmp_path):
    """A bundle folder and, beside it, a plugin that records that it was imported."""
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    build(bundle)
    marker = tmp_path / "imported"
    (tmp_path / "outside.py").write_text(f"open({str(marker)!r}, 'w').close()\n{PLUGIN}")
    return bundle, tmp_path / "outside.py", marker


def declare(bundle, module: str) -> None:
    doc = json.loads((bundle / "pipeline.json").read_text())
    doc["pipeline"]["plugin"] = {"module": module}
    (bundle / "pipeline.json").write_text(json.dumps(doc))


@pytest.mark.parametrize("how", ["parent", "absolute", "url", "symlinked file", "symlinked folder"])
def test_a_plugin_path_leaving_the_bundle_is_refused(layout, how):
    bundle, outside, marker = layout
    if how == "parent":
        module = "../outside.py"
    elif how == "absolute":
        module = str(outside)
    elif how == "url":
        module = "https://example.com/outside.py"
    elif how == "symlinked file":
        (bundle / "glue.py").symlink_to(outside)
        module = "glue.py"
    else:
        (bundle / "code").symlink_to(outside.parent, target_is_directory=True)
        module = "code/outside.py"
    declare(bundle, module)
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(bundle)
    assert info.value.path == "$.pipeline.plugin.module", info.value.message
    assert "inside" in info.value.message and module in info.value.message, info.value.message
    assert not marker.exists(), "the outside plugin was imported"


def test_a_symlink_inside_the_bundle_is_loaded(layout):
    bundle, outside, marker = layout
    (bundle / "real.py").write_text(outside.read_text())
    (bundle / "glue.py").symlink_to(bundle / "real.py")
    declare(bundle, "glue.py")
    assert onnxpipe.load(bundle).structure == "plugin"
    assert marker.exists()
