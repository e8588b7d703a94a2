"""The vision-language flow on the tiny random Qwen2-VL (tests/fixtures/qwen2_vl.py): image
preprocessing graph -> vision per image -> features merged at the image tokens -> decoder with
mRoPE positions and a KV cache; greedy tokens equal transformers' generate (expected.json)."""

from __future__ import annotations

import io
import json
import shutil
from contextlib import redirect_stdout
from pathlib import Path

import pytest

import onnxpipe
from onnxpipe.errors import ConfigError, InputError
from onnxpipe.image import Image
from onnxpipe.state.positions import PositionIds
from tests.fixtures import tiny_models


@pytest.fixture(scope="module")
def bundle() -> Path:
    return tiny_models.ensure("qwen2_vl")


@pytest.fixture(scope="module")
def expected(bundle) -> dict:
    return json.loads((bundle / "expected.json").read_text())


@pytest.fixture(scope="module")
def pipe(bundle):
    return onnxpipe.load(bundle)


def _images(bundle, expected) -> list[Image]:
    return [Image((bundle / i["file"].replace(".png", ".rgb")).read_bytes(), i["width"], i["height"])
            for i in expected["images"]]


def _generate(pipe, expected, images, **kw):
    return pipe.generate(input_ids=expected["input_ids"], images=images,
                         max_new_tokens=expected["max_new_tokens"], do_sample=False, **kw)


def test_two_images_give_the_transformers_tokens(pipe, bundle, expected):
    result = _generate(pipe, expected, _images(bundle, expected))
    assert result.tokens == expected["greedy_tokens"]
    assert result.prompt_tokens == len(expected["expanded_input_ids"])


def test_a_prompt_already_expanded_is_kept(pipe, bundle, expected):
    result = pipe.generate(input_ids=expected["expanded_input_ids"], images=_images(bundle, expected),
                           max_new_tokens=expected["max_new_tokens"], do_sample=False)
    assert result.tokens == expected["greedy_tokens"]


def test_the_image_positions_decide_the_tokens(pipe, bundle, expected, monkeypatch):
    """Without the 3-D layout (text positions for the image tokens) the tokens differ: the
    test above can fail when mRoPE is wrong."""
    monkeypatch.setattr(PositionIds, "_grids", lambda self, ctx: (_ for _ in ()).throw(AssertionError))
    comp = next(c for c in pipe.executor.components if isinstance(c, PositionIds))
    monkeypatch.setattr(comp, "image_token", None)
    assert _generate(pipe, expected, _images(bundle, expected)).tokens != expected["greedy_tokens"]


def test_images_in_the_wrong_order_for_an_expanded_prompt(pipe, bundle, expected):
    with pytest.raises(InputError, match="has 26 image token\\(s\\) \\(id 300\\) for 2 image"):
        pipe.generate(input_ids=expected["expanded_input_ids"], images=_images(bundle, expected)[::-1],
                      max_new_tokens=2)


def test_text_only_prompt_skips_the_vision_session(pipe):
    result = pipe.generate(input_ids=[1, 17, 42, 99], max_new_tokens=4, do_sample=False)
    assert len(result.tokens) == 4


def test_image_count_must_match_the_image_tokens(pipe, bundle, expected):
    with pytest.raises(InputError, match="2 image token\\(s\\) \\(id 300\\) for 1 image"):
        _generate(pipe, expected, _images(bundle, expected)[:1])
    with pytest.raises(InputError, match="2 image token\\(s\\) \\(id 300\\) but no image was given"):
        _generate(pipe, expected, [])
    with pytest.raises(InputError, match="expected onnxpipe.image.Image"):
        _generate(pipe, expected, [b"png bytes"])


def test_cli_run_with_png_images(bundle, expected):
    from onnxpipe.cli import main

    out = io.StringIO()
    args = ["run", str(bundle), "--input-ids", ",".join(map(str, expected["input_ids"])), "--greedy", "--json",
            "--max-new-tokens", str(expected["max_new_tokens"])]
    for image in expected["images"]:
        args += ["--image", str(bundle / image["file"])]
    with redirect_stdout(out):
        assert main(args) == 0
    assert json.loads(out.getvalue())["tokens"] == expected["greedy_tokens"]


# ---- load-time checks ----------------------------------------------------------------------


def _variant(bundle, tmp_path, edit=None, processor=None) -> Path:
    dest = tmp_path / "vl"
    shutil.copytree(bundle, dest)
    spec = json.loads((dest / "pipeline.json").read_text())
    if edit:
        edit(spec)
    (dest / "pipeline.json").write_text(json.dumps(spec))
    if processor:
        config = json.loads((dest / "preprocessor_config.json").read_text())
        config.update(processor)
        (dest / "preprocessor_config.json").write_text(json.dumps(config))
    return dest


def test_grid_source_reads_the_grids_from_a_session_output(bundle, expected, tmp_path):
    """position_ids.grid_source: the grids come from the vision session's own output."""
    import onnx
    from onnx import helper

    def edit(spec):
        spec["pipeline"]["state"]["position_ids"]["grid_source"] = "vision.grid_out"
        del spec["preprocessing"]["image"]["expected_outputs"]

    dest = _variant(bundle, tmp_path, edit)
    model = onnx.load(str(dest / "vision.onnx"))
    model.graph.node.append(helper.make_node("Identity", ["image_grid_thw"], ["grid_out"]))
    model.graph.output.append(helper.make_tensor_value_info("grid_out", onnx.TensorProto.INT64, [1, 3]))
    onnx.save(model, str(dest / "vision.onnx"))
    pipe = onnxpipe.load(dest)
    comp = next(c for c in pipe.executor.components if isinstance(c, PositionIds))
    comp.grid_input = "nothing"   # only the session output can give them now
    assert _generate(pipe, expected, _images(dest, expected)).tokens == expected["greedy_tokens"]


def test_spatial_merge_size_sets_the_grid_cells_per_token(bundle, expected, tmp_path):
    def merge(size):
        return lambda s: s["pipeline"]["state"]["position_ids"].update(spatial_merge_size=size)

    same = onnxpipe.load(_variant(bundle, tmp_path / "2", merge(2)))
    assert _generate(same, expected, _images(bundle, expected)).tokens == expected["greedy_tokens"]
    other = onnxpipe.load(_variant(bundle, tmp_path / "1", merge(1)))   # 4x the tokens per image
    with pytest.raises(InputError, match="image 1 has a 1x4x6 grid: 24 image tokens expected"):
        _generate(other, expected, _images(bundle, expected))


def _merges(*entries):
    """An edit: the vision-language preset's flow with the embedding step's ``merge`` set to
    ``entries`` (one value, or a list when several)."""
    import copy

    from onnxpipe.config.presets import PRESETS

    def edit(spec):
        flow = copy.deepcopy(PRESETS["vision-language"]["pipeline"]["flow"])
        flow[1]["merge"] = entries[0] if len(entries) == 1 else list(entries)
        spec["pipeline"]["flow"] = flow
    return edit


_MERGE = {"from": "vision.image_features", "into": "inputs_embeds", "token": "image_token"}


def test_a_merge_list_of_one_is_the_merge(bundle, expected, tmp_path):
    """``merge`` as a list (several sources, each at its own token; one here) runs as the object."""
    pipe = onnxpipe.load(_variant(bundle, tmp_path, _merges([_MERGE])))
    assert _generate(pipe, expected, _images(bundle, expected)).tokens == expected["greedy_tokens"]


@pytest.mark.parametrize("edit,path,message", [
    (_merges([]), "$.pipeline.flow[1].merge", "expected a merge object or a list of at least one, found an empty list"),
    (_merges(5), "$.pipeline.flow[1].merge", "expected an object, found integer 5"),
    (_merges(_MERGE, 5), "$.pipeline.flow[1].merge[1]", "expected an object, found integer 5"),
    (_merges(_MERGE, {"from": "vision.image_features"}), "$.pipeline.flow[1].merge[1].into",
     'missing required key "into"'),
    (_merges(_MERGE, dict(_MERGE, **{"from": "decoder.logits", "token": "audio_token"})),
     "$.pipeline.flow[1].merge[1].from", 'session "decoder" must run before "embedding"'),
    (_merges(_MERGE, _MERGE), "$.pipeline.flow[1].merge[1].token",
     "tokens.extra.image_token is merged at already by $.pipeline.flow[1].merge[0]"),
    (lambda s: (_merges(_MERGE, dict(_MERGE, into="nope", token="audio_token"))(s),
                s["tokens"]["extra"].update(audio_token=301)),
     "$.pipeline.flow[1].merge[1].into", 'session "embedding" has no output or input "nope"'),
    (lambda s: s["preprocessing"]["image"]["expected_outputs"]["pixel_values"].update(rank=4),
     "$.preprocessing.image.expected_outputs.pixel_values.rank", "makes \"pixel_values\" with rank 2, not 4"),
    (lambda s: s["preprocessing"]["image"]["expected_outputs"]["image_grid_thw"].update(dtype="float32"),
     "$.preprocessing.image.expected_outputs.image_grid_thw.dtype", "with dtype int64, not float32"),
    (lambda s: s["preprocessing"]["image"]["expected_outputs"].update(image_sizes={"rank": 2}),
     "$.preprocessing.image.expected_outputs.image_sizes", "not an output of the image preprocessing"),
    (lambda s: s["pipeline"]["state"]["position_ids"].update(strategy="windowed"),
     "$.pipeline.state.position_ids.strategy", 'strategy "windowed" is not supported'),
    (lambda s: s["pipeline"]["state"]["position_ids"].update(strategy="default"),
     "$.pipeline.state.position_ids.strategy", 'strategy "default" makes rank-2 position ids'),
    (lambda s: s["pipeline"]["state"]["position_ids"].update(spatial_merge_size=0),
     "$.pipeline.state.position_ids.spatial_merge_size", "expected a positive integer, found 0"),
    (lambda s: s["pipeline"]["state"]["position_ids"].update(grid_source="vision"),
     "$.pipeline.state.position_ids.grid_source", 'expected "session.output"'),
    (lambda s: s["pipeline"]["state"]["position_ids"].update(grid_source="vision.nope"),
     "$.pipeline.state.position_ids.grid_source", 'session "vision" has no output "nope"'),
    (lambda s: s["tokens"]["extra"].update(image_token="<|image_pad|>"),
     "$.pipeline.flow[1].merge.token", "expected that id (an integer) in tokens.extra"),
    (lambda s: s["preprocessing"]["image"].update(config="missing.json"),
     "$.preprocessing.image.config", 'image processor config "missing.json" does not exist'),
    (lambda s: s["preprocessing"]["image"].update(format="pil"),
     "$.preprocessing.image.format", 'unknown image format "pil"'),
])
def test_bad_config_is_refused_at_load(bundle, tmp_path, edit, path, message):
    with pytest.raises(ConfigError) as exc:
        onnxpipe.load(_variant(bundle, tmp_path, edit))
    assert f"{path}: " in exc.value.message and message in exc.value.message, exc.value.message


@pytest.mark.parametrize("processor,path,message", [
    ({"crop_size": 224}, "$.crop_size", 'unknown key "crop_size"'),
    ({"resample": 2}, "$.resample", "only 3 (bicubic) is implemented"),
    ({"image_processor_type": "SiglipImageProcessor"}, "$.image_processor_type", "Valid options: Qwen2VL"),
    ({"image_std": [0.5, 0.5]}, "$.image_std", "expected 3 values"),
])
def test_bad_processor_config_names_its_file_and_key(bundle, tmp_path, processor, path, message):
    with pytest.raises(ConfigError) as exc:
        onnxpipe.load(_variant(bundle, tmp_path, processor=processor))
    assert f"preprocessor_config.json: {path}: " in exc.value.message and message in exc.value.message, \
        exc.value.message


def test_images_for_a_bundle_without_image_preprocessing(tiny_bundles):
    pipe = onnxpipe.load(tiny_bundles["torch_llama"])
    with pytest.raises(InputError, match="takes no images"):
        pipe.generate(input_ids=[1, 2], images=[Image(bytes(12), 2, 2)], max_new_tokens=1)
