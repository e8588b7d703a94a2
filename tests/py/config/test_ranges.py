"""Every numeric pipeline.json key declares its range next to its default (schema.py), and one
check (config/ranges.py) enforces them at load with the JSON path, the range and its unit."""

import copy
import json
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.config.load import load_config, resolve_document
from onnxpipe.config.ranges import check_ranges, unranged_fields
from onnxpipe.config.schema import PipelineSpec, Range
from onnxpipe.config.validate import validate_spec
from onnxpipe.errors import ConfigError
from onnxpipe.image.config import ImageProcessorConfig

ROOT = Path(__file__).resolve().parents[3]
FILE = "bundle/pipeline.json"
BASE = {
    "version": 2,
    "pipeline": {"extends": "autoregressive-decoder", "sessions": {"decoder": {"file": "model.onnx"}}},
}


def test_every_numeric_field_declares_a_range():
    missing = unranged_fields(PipelineSpec) + unranged_fields(ImageProcessorConfig)
    assert not missing, ("numeric fields without range=Range(low, high, unit) (or numbers=... naming what "
                         f"checks a free-form field's numbers): {', '.join(missing)}")


def test_unranged_fields_finds_a_number_without_a_range():
    from dataclasses import dataclass

    from onnxpipe.config.schema import spec

    @dataclass(frozen=True)
    class Inner:
        sizes: tuple[int, ...] = spec(())

    @dataclass(frozen=True)
    class Outer:
        rate: float | None = spec(None)
        name: str = spec("x")
        ranged: int = spec(1, range=Range(0, 2, "things"))
        inner: Inner | None = spec(None)

    assert unranged_fields(Outer) == ["Outer.rate", "Inner.sizes"]


def _fails(edit, path, message):
    document = copy.deepcopy(BASE)
    edit(document)
    spec = resolve_document(document, FILE)
    with pytest.raises(ConfigError) as info:
        validate_spec(spec, FILE)   # the stages' checks first, as onnxpipe.load makes them
        check_ranges(spec, FILE)
    assert info.value.path == path, info.value.message
    assert info.value.message == f"{FILE}: {path}: {message}"


def _generation(key, value):
    return lambda d: d.setdefault("generation", {}).__setitem__(key, value)


def test_an_integer_out_of_range_names_the_path_the_range_and_the_unit():
    _fails(_generation("max_length", 2 ** 40), "$.generation.max_length",
           f"expected an integer in 1..{2 ** 24} (tokens), found {2 ** 40}")


def test_an_open_end_is_written_as_an_interval():
    _fails(_generation("sampling", {"repetition_penalty": 2000.0}), "$.generation.sampling.repetition_penalty",
           "expected a number in (0, 1000] (a logit divisor), found 2000")


@pytest.mark.parametrize("value, shown", [(float("nan"), "NaN"), (float("inf"), "Infinity"),
                                          (float("-inf"), "-Infinity")])
def test_nan_and_infinities_are_refused(value, shown):
    def edit(d):
        d["pipeline"]["inputs"] = {"x": {"min": value}}
    _fails(edit, "$.pipeline.inputs.x.min",
           f"expected a number in -{2 ** 53}..{2 ** 53} (a value JavaScript holds exactly), found {shown}")


def test_each_item_of_a_list_is_checked_with_its_index():
    _fails(_generation("stop", {"token_ids": [3, -1]}), "$.generation.stop.token_ids[1]",
           "expected an integer in 0..2147483647 (a token id), found -1")


def test_a_shape_is_bounded_in_all():
    def edit(d):
        d["pipeline"]["inputs"] = {"x": {"shape": [4096, 4096, 4096]}}
    _fails(edit, "$.pipeline.inputs.x.shape",
           f"expected at most {2 ** 24} values in all (the product of the sizes), found [4096, 4096, 4096]: "
           f"{4096 ** 3}")


def test_numbers_in_a_free_form_value_are_checked_too():
    def edit(d):
        d["pipeline"]["inputs"] = {"x": {"default": 2 ** 60}}
    _fails(edit, "$.pipeline.inputs.x.default",
           f"expected a number in -{2 ** 53}..{2 ** 53} (a value JavaScript holds exactly), found {2 ** 60}")


def test_a_stage_check_keeps_its_own_message():
    """Stages check first (their messages say more); the declared range agrees with them."""
    _fails(_generation("sampling", {"num_beams": 0}), "$.generation.sampling.num_beams",
           "num_beams must be >= 1, found 0")


def test_ranges_hold_for_the_defaults():
    check_ranges(PipelineSpec(), FILE)
    check_ranges(ImageProcessorConfig(), FILE)


def _bundles():
    roots = (ROOT / "public" / "models", ROOT / "tests" / "fixtures" / ".cache", ROOT / "bundles")
    names = ("pipeline.json", "genai_config.json", "config.json")
    return sorted(p for root in roots if root.is_dir() for p in root.iterdir()
                  if p.is_dir() and any((p / n).is_file() for n in names))


@pytest.mark.parametrize("bundle", _bundles(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_bundle_is_within_the_declared_ranges(bundle):
    """The ranges refuse nothing today's bundles use (whatever else a bundle lacks here)."""
    try:
        loaded = load_config(str(bundle))
    except ConfigError as exc:
        assert "expected an integer in" not in exc.message and "expected a number in" not in exc.message, exc
        return
    except onnxpipe.errors.BundleError:
        return   # no model files here (a layout this test does not load)
    check_ranges(loaded.spec, loaded.file)


# ---- the fuzz's leaks from Piper's pipeline.output.audio: each a ConfigError at load now ----

PIPER = ROOT / "public" / "models" / "piper-en-us-joe"


@pytest.mark.parametrize("key, value, message", [
    ("sentence_silence", 9007199254740993, "expected a number in 0..10 (seconds), found 9007199254740992"),
    ("sentence_silence", 68444, "expected a number in 0..10 (seconds), found 68444"),
    ("sentence_silence", -1, "expected a number in 0..10 (seconds), found -1"),
    ("sample_rate", 0, "expected an integer in 1..384000 (samples per second), found 0"),
])
def test_piper_audio_settings_out_of_range_fail_at_load(tmp_path, key, value, message):
    if not PIPER.is_dir():
        pytest.skip("the Piper bundle is not built (make models)")
    for entry in PIPER.iterdir():
        if entry.name != "pipeline.json":
            (tmp_path / entry.name).symlink_to(entry.resolve())
    document = json.loads((PIPER / "pipeline.json").read_text())
    document["pipeline"]["output"]["audio"][key] = value
    (tmp_path / "pipeline.json").write_text(json.dumps(document))
    with pytest.raises(ConfigError) as info:
        onnxpipe.load(tmp_path)
    assert info.value.path == f"$.pipeline.output.audio.{key}"
    assert message in info.value.message
