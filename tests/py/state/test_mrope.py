"""mRoPE 3-D positions (state/mrope.py) against transformers' Qwen2-VL ``get_rope_index``."""

from __future__ import annotations

import types

import pytest

from onnxpipe.errors import InputError
from onnxpipe.state.mrope import layout

torch = pytest.importorskip("torch")
IMAGE = 9


def _reference(ids, grids, merge):
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLModel

    model = types.SimpleNamespace(config=types.SimpleNamespace(vision_config=types.SimpleNamespace(
        spatial_merge_size=merge)))
    model.get_vision_position_ids = lambda *a, **k: Qwen2VLModel.get_vision_position_ids(model, *a, **k)
    input_ids = torch.tensor([ids])
    positions, deltas = Qwen2VLModel.get_rope_index(model, input_ids, (input_ids == IMAGE).int(),
                                                    torch.tensor(grids) if grids else None)
    return positions[:, 0].tolist(), int(deltas[0, 0])


def _prompt(parts, grids, merge):
    ids, images = [], iter(grids)
    for part in parts:
        if part == "img":
            t, h, w = next(images)
            ids += [IMAGE] * (t * (h // merge) * (w // merge))
        else:
            ids += list(range(20, 20 + part))
    return ids


@pytest.mark.parametrize("parts,grids,merge", [
    ([3, "img", 2, "img", 4], [(1, 4, 6), (1, 8, 10)], 2),
    (["img", 1], [(1, 6, 4)], 2),
    ([2, "img"], [(1, 2, 2)], 2),
    ([2, "img", 3], [(2, 4, 4)], 2),                       # t > 1 (a video-like grid)
    ([5], [], 2),
    ([1, "img", 2], [(1, 6, 9)], 3),
])
def test_layout_equals_get_rope_index(parts, grids, merge):
    ids = _prompt(parts, grids, merge)
    axes, next_position = layout(ids, IMAGE, grids, merge)
    positions, delta = _reference(ids, grids, merge)
    assert axes == positions
    assert next_position - len(ids) == delta   # transformers' rope_deltas for the decode steps


def test_a_chunk_after_history_starts_at_the_given_position():
    axes, nxt = layout([1, IMAGE, IMAGE, IMAGE, IMAGE, 2], IMAGE, [(1, 4, 4)], 2, start=10)
    assert axes[0] == [10, 11, 11, 11, 11, 13] and axes[1] == [10, 11, 11, 12, 12, 13]
    assert axes[2] == [10, 11, 12, 11, 12, 13] and nxt == 14


def test_token_and_grid_counts_must_agree():
    with pytest.raises(InputError, match="4 image tokens expected at position 1, found fewer"):
        layout([1, IMAGE, IMAGE, 2], IMAGE, [(1, 4, 4)], 2)
    with pytest.raises(InputError, match="2 image\\(s\\) given but the prompt's image tokens fill 1"):
        layout([1, IMAGE, 2], IMAGE, [(1, 2, 2), (1, 2, 2)], 2)
    with pytest.raises(InputError, match="more image tokens"):
        layout([IMAGE], IMAGE, [], 2)
