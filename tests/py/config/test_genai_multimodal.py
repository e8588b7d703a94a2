"""genai_config.json multimodal sections (model.vision / model.embedding / model.speech):
each model type onnxpipe can't run yet is refused naming the file, the JSON path in it,
model.type and the missing feature."""

import copy
import json

import pytest

from onnxpipe.config import genai_v1
from onnxpipe.config.load import resolve_document
from onnxpipe.config.validate import validate_spec
from onnxpipe.errors import ConfigError

GENAI = {"model": {"type": "llama", "context_length": 128, "vocab_size": 32, "eos_token_id": 2,
                   "decoder": {"filename": "model.onnx", "num_key_value_heads": 2, "head_size": 8}},
         "search": {"max_length": 64}}

EMBEDDING = {"filename": "embedding.onnx",
             "inputs": {"input_ids": "input_ids", "image_features": "image_features"},
             "outputs": {"inputs_embeds": "inputs_embeds"}}
VISION = {"filename": "vision.onnx", "config_filename": "processor_config.json",
          "spatial_merge_size": 2, "patch_size": 14,
          "inputs": {"pixel_values": "pixel_values", "image_grid_thw": "image_grid_thw"},
          "outputs": {"image_features": "image_features"}}
SPEECH = {"filename": "speech.onnx", "config_filename": "audio_processor_config.json",
          "inputs": {"audio_embeds": "audio_embeds", "audio_sizes": "audio_sizes"},
          "outputs": {"audio_features": "audio_features"}}


def bundle(kind, **sections):
    g = copy.deepcopy(GENAI)
    g["model"]["type"] = kind
    g["model"]["decoder"]["inputs"] = {"inputs_embeds": "inputs_embeds"}
    g["model"].update(copy.deepcopy(sections))
    return g


def refusal(g, file="genai_config.json"):
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g, file)
    exc = info.value
    assert exc.file == file
    assert "write a pipeline.json v2 for this bundle instead" in exc.message
    return exc


@pytest.mark.parametrize("kind, path, text", [
    ("videochat_flash_qwen", "$.model.vision", "VideoChat-Flash video frames"),
    ("qwen3vl", "$.model.vision", "Qwen3-VL under the name onnxruntime-genai 0.18's builder writes"),
])
def test_vision_types_name_their_feature(kind, path, text):
    exc = refusal(bundle(kind, embedding=EMBEDDING, vision=VISION))
    assert exc.path == path
    assert f'model.type "{kind}": {text}' in exc.message


def test_mistral3_reads_pixel_values_only_and_the_img_token(tmp_path):
    """mistral3 (config/genai_mistral3.py): a vision input genai's Pixtral state doesn't feed is
    refused by name; [IMG] (and the row markers) come from tokenizer.json, as genai finds them."""
    exc = refusal(bundle("mistral3", embedding=EMBEDDING, vision=VISION))
    assert exc.path == "$.model.vision.inputs.image_grid_thw"
    assert 'model.type "mistral3": the key "image_grid_thw" in model.vision.inputs (onnxpipe reads ' \
           "pixel_values)" in exc.message
    vision = {**VISION, "inputs": {"pixel_values": "pixel_values"}}
    with pytest.raises(ConfigError, match=r"model.type \"mistral3\": images take the \[IMG\] id from "
                                          r"tokenizer.json's added_tokens .* found no \[IMG\] there") as info:
        genai_v1.translate(bundle("mistral3", embedding=EMBEDDING, vision=vision), str(tmp_path / "genai_config.json"))
    assert info.value.path == "$.model.type"


def test_phi4mm_speech_is_read_and_needs_its_files(tmp_path):
    """phi4mm: model.speech and its processor file are read (config/genai_phi4_speech.py); a
    missing processor file, or no model.vision (onnxruntime-genai 0.18 loads a vision session for
    every phi4mm bundle), is refused naming the key."""
    from tests.fixtures.genai_phi4mm_speech import SPEECH_PROCESSOR

    with pytest.raises(ConfigError, match=r'the audio processor file "audio_processor_config.json" is '
                                          r"missing") as info:
        genai_v1.translate(bundle("phi4mm", embedding=EMBEDDING, vision=VISION, speech=SPEECH),
                           str(tmp_path / "genai_config.json"))
    assert info.value.path == "$.model.speech.config_filename"
    (tmp_path / "audio_processor_config.json").write_text(json.dumps(SPEECH_PROCESSOR))
    with pytest.raises(ConfigError, match=r'model.type "phi4mm": expected a model.vision object with a '
                                          r'"filename" \(onnxruntime-genai loads one for every phi4mm bundle\)') as info:
        genai_v1.translate(bundle("phi4mm", embedding=EMBEDDING, speech=SPEECH), str(tmp_path / "genai_config.json"))
    assert info.value.path == "$.model.vision"


def test_phi4mm_with_qwen_vision_keys_names_the_first():
    """phi4mm images are translated (below): a Qwen-VL vision key is named, not the type."""
    exc = refusal(bundle("phi4mm", embedding=EMBEDDING, vision=VISION))
    assert exc.path == "$.model.vision.spatial_merge_size"
    assert 'model.type "phi4mm": the key "spatial_merge_size"' in exc.message


@pytest.mark.parametrize("section", ["vision", "speech"])
def test_adapters_are_named_by_their_key(section):
    body = dict(VISION if section == "vision" else SPEECH, adapter_filename="adapter.onnx_adapter")
    exc = refusal(bundle("phi4mm", embedding=EMBEDDING, **{section: body}))
    assert exc.path == f"$.model.{section}.adapter_filename"
    assert "a LoRA adapter applied to the decoder" in exc.message


def test_vision_pipeline_stages_are_named():
    vision = dict(VISION, pipeline=[{"patch_embed": {"filename": "patch_embed.onnx"}}])
    exc = refusal(bundle("qwen2_5_vl", embedding=EMBEDDING, vision=vision))
    assert exc.path == "$.model.vision.pipeline"
    assert "a vision pipeline of several sessions" in exc.message


def test_unknown_type_with_vision_or_embedding_only():
    exc = refusal(bundle("llama", vision=VISION), file="bundle/genai_config.json")
    assert exc.path == "$.model.vision"
    assert 'model.type "llama": images (a model.vision section) for this model type' in exc.message
    exc = refusal(bundle("llama", embedding=EMBEDDING))
    assert exc.path == "$.model.embedding"
    assert "a separate embedding session (model.embedding)" in exc.message


def test_type_section_missing_falls_back_to_the_present_one():
    exc = refusal(bundle("videochat_flash_qwen", embedding=EMBEDDING))   # no vision section
    assert exc.path == "$.model.embedding"


# ---- model.type "qwen2_5_vl": translated onto the vision-language flow

def qwen25(kind="qwen2_5_vl", **model):
    g = bundle(kind, embedding=EMBEDDING, vision=VISION)
    g["model"].update(image_token_id=151655, **model)
    return g


def translated(g):
    doc = genai_v1.translate(g)
    spec = resolve_document(doc, "genai_config.json")
    validate_spec(spec, "genai_config.json")
    return doc


@pytest.mark.parametrize("kind", ["qwen2_5_vl", "qwen3_vl", "qwen3_5", "qwen3_5_moe", "fara"])   # one, as in genai
def test_qwen25_vl_translation(kind):
    doc = translated(qwen25(kind))
    pipeline = doc["pipeline"]
    assert pipeline["sessions"] == {"vision": {"file": "vision.onnx"}, "embedding": {"file": "embedding.onnx"},
                                    "decoder": {"file": "model.onnx"}}
    assert pipeline["flow"] == [
        {"run": "vision", "when": "init", "loop": "per_image", "loop_over": "pixel_values"},
        {"run": "embedding", "when": "step",
         "merge": {"from": "vision.image_features", "into": "image_features", "token": "image_token"}},
        {"run": "decoder", "when": "step"}]
    assert pipeline["dataflow"] == []
    assert pipeline["state"]["position_ids"] == {"input_name": "position_ids", "strategy": "mrope_3d",
                                                 "spatial_merge_size": 2}
    assert doc["tokens"]["extra"] == {"image_token": 151655}
    assert doc["preprocessing"]["image"] == {"config": "processor_config.json", "format": "ort-extensions",
                                             "pixel_values": "pixel_values", "grid_thw": "image_grid_thw"}


@pytest.mark.parametrize("kind", ["qwen3_5_moe", "fara"])
def test_qwen_vl_family_without_a_vision_section(kind):
    exc = refusal(bundle(kind, embedding=EMBEDDING))
    assert exc.path == "$.model"
    assert f'model.type "{kind}": image input without a model.vision section' in exc.message


def test_qwen25_vl_renamed_tensors_become_wires_and_names():
    g = qwen25()
    model = g["model"]
    model["vision"]["inputs"] = {"pixel_values": "pv", "image_grid_thw": "thw"}
    model["vision"]["outputs"] = {"image_features": "feats"}
    model["vision"]["config_filename"] = "vision_processor.json"
    model["embedding"]["inputs"] = {"input_ids": "ids", "image_features": "img"}
    model["embedding"]["outputs"] = {"inputs_embeds": "embeds"}
    model["embedding"]["session_options"] = {"log_id": "x", "provider_options": [{"cpu": {}}]}
    doc = translated(g)
    pipeline = doc["pipeline"]
    assert pipeline["flow"][0]["loop_over"] == "pv"
    assert pipeline["flow"][1]["merge"] == {"from": "vision.feats", "into": "img", "token": "image_token"}
    assert pipeline["dataflow"] == [{"from": "inputs.input_ids", "to": "embedding.ids"},
                                    {"from": "embedding.embeds", "to": "decoder.inputs_embeds"}]
    assert pipeline["sessions"]["embedding"] == {"file": "embedding.onnx", "execution_provider": ["cpu"]}
    assert doc["preprocessing"]["image"] == {"config": "vision_processor.json", "format": "ort-extensions",
                                             "pixel_values": "pv", "grid_thw": "thw"}


@pytest.mark.parametrize("section, key, path", [
    ("vision", {"inputs": {"pixel_values": "pixel_values", "image_sizes": "image_sizes"}},
     "$.model.vision.inputs.image_sizes"),
    ("vision", {"num_visual_tokens": 64}, "$.model.vision.num_visual_tokens"),
    ("vision", {"run_options": {}}, "$.model.vision.run_options"),
    ("embedding", {"inputs": {"input_ids": "input_ids", "audio_features": "audio_features"}},
     "$.model.embedding.inputs.audio_features"),
    ("embedding", {"outputs": {"inputs_embeds": "e", "per_layer_inputs": "p"}},
     "$.model.embedding.outputs.per_layer_inputs"),
])
def test_qwen25_vl_keys_onnxpipe_does_not_run_are_named(section, key, path):
    g = qwen25()
    g["model"][section].update(key)
    exc = refusal(g)
    assert exc.path == path
    assert f'model.type "qwen2_5_vl": the key "{path.rsplit(".", 1)[1]}" in {path[2:].rsplit(".", 1)[0]}' \
        in exc.message


def test_qwen25_vl_needs_the_image_token_id():
    g = qwen25()
    del g["model"]["image_token_id"]
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g)
    assert info.value.path == "$.model.image_token_id"
    assert "expected the image token id (an integer), found" in info.value.message


def test_qwen25_vl_speech_is_still_refused():
    exc = refusal(qwen25(speech=SPEECH))
    assert exc.path == "$.model.speech"


GEMMA3_VISION = {"filename": "vision.onnx", "config_filename": "processor_config.json",
                 "inputs": {"pixel_values": "pixel_values"}, "outputs": {"image_features": "image_features"}}


def gemma3(**extra):
    g = bundle("gemma3", embedding=EMBEDDING, vision=GEMMA3_VISION, image_token_id=262144, **extra)
    g["model"]["vocab_size"] = 262208
    return g


def test_gemma3_translation():
    """Gemma 3: the Qwen2.5-VL flow without mrope (ordinary positions) or a grid input."""
    doc = genai_v1.translate(gemma3())
    pipeline = doc["pipeline"]
    assert pipeline["flow"] == [
        {"run": "vision", "when": "init", "loop": "per_image", "loop_over": "pixel_values"},
        {"run": "embedding", "when": "step",
         "merge": {"from": "vision.image_features", "into": "image_features", "token": "image_token"}},
        {"run": "decoder", "when": "step"}]
    assert pipeline["state"]["position_ids"].get("strategy") != "mrope_3d"
    assert doc["tokens"]["extra"] == {"image_token": 262144}
    assert doc["preprocessing"]["image"] == {"config": "processor_config.json", "format": "ort-extensions",
                                             "pixel_values": "pixel_values"}


@pytest.mark.parametrize("key, path", [
    ({"inputs": {"pixel_values": "pixel_values", "image_sizes": "image_sizes"}},
     "$.model.vision.inputs.image_sizes"),
    ({"spatial_merge_size": 2}, "$.model.vision.spatial_merge_size"),
])
def test_gemma3_vision_keys_onnxpipe_does_not_run_are_named(key, path):
    g = gemma3()
    g["model"]["vision"].update(key)
    exc = refusal(g)
    assert exc.path == path
    assert f'model.type "gemma3": the key "{path.rsplit(".", 1)[1]}"' in exc.message


def test_gemma3_image_token_from_the_tokenizer(tmp_path):
    """Without model.image_token_id the <image_soft_token> id comes from tokenizer.json, as
    onnxruntime-genai's gemma_image_processor finds it; absent there too, refused."""
    import json

    g = gemma3()
    del g["model"]["image_token_id"]
    file = str(tmp_path / "genai_config.json")
    (tmp_path / "tokenizer.json").write_text(json.dumps(
        {"added_tokens": [{"id": 262144, "content": "<image_soft_token>"}]}))
    assert genai_v1.translate(g, file)["tokens"]["extra"] == {"image_token": 262144}
    (tmp_path / "tokenizer.json").write_text(json.dumps({"added_tokens": []}))
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g, file)
    assert (info.value.file, info.value.path) == (file, "$.model.image_token_id")
    assert "found neither model.image_token_id nor that token in tokenizer.json" in info.value.message


PHI3V_VISION = {"filename": "vision.onnx", "config_filename": "processor_config.json",
                "inputs": {"pixel_values": "pixel_values", "image_sizes": "image_sizes"},
                "outputs": {"image_features": "image_features"}}


def test_phi3v_translation():
    """Phi-3-vision: ordinary positions, image_sizes beside the pixels, the -1 placeholder id."""
    doc = genai_v1.translate(bundle("phi3v", embedding=EMBEDDING, vision=PHI3V_VISION))
    assert doc["pipeline"]["flow"][0] == {"run": "vision", "when": "init", "loop": "per_image",
                                          "loop_over": "pixel_values"}
    assert doc["pipeline"]["state"]["position_ids"].get("strategy") != "mrope_3d"
    assert doc["tokens"]["extra"] == {"image_token": -1}
    assert doc["preprocessing"]["image"] == {"config": "processor_config.json", "format": "ort-extensions",
                                             "pixel_values": "pixel_values", "grid_thw": "image_sizes"}


@pytest.mark.parametrize("extra, path, text", [
    ({"image_token_id": 5}, "$.model.image_token_id", "model.image_token_id (Phi-3-vision marks image"),
    ({"vision": {**PHI3V_VISION, "spatial_merge_size": 2}}, "$.model.vision.spatial_merge_size",
     'the key "spatial_merge_size"'),
    ({"vision": {**PHI3V_VISION, "inputs": {"image_grid_thw": "g"}}}, "$.model.vision.inputs.image_grid_thw",
     'the key "image_grid_thw"'),
])
def test_phi3v_keys_onnxpipe_does_not_run_are_named(extra, path, text):
    exc = refusal(bundle("phi3v", **{"embedding": EMBEDDING, "vision": PHI3V_VISION, **extra}))
    assert exc.path == path
    assert f'model.type "phi3v": {text}' in exc.message


# ---- model.type "phi4mm" (Phi-4-multimodal) images

PHI4_VISION = {"filename": "vision.onnx", "config_filename": "processor_config.json",
               "inputs": {"pixel_values": "pixel_values", "image_sizes": "image_sizes",
                          "attention_mask": "image_attention_mask"},
               "outputs": {"image_features": "image_features"}}
PHI4_EMBEDDING = {"filename": "embedding.onnx",
                  "inputs": {"input_ids": "input_ids", "image_features": "image_features",
                             "audio_features": "audio_features"},
                  "outputs": {"inputs_embeds": "inputs_embeds"}}
CLEARED = {"filename": "", "config_filename": ""}


def phi4mm(**model):
    g = bundle("phi4mm", embedding=PHI4_EMBEDDING, vision=PHI4_VISION, speech=CLEARED)
    g["model"]["decoder"]["hidden_size"] = 16
    g["model"].update(copy.deepcopy(model))
    return g


def test_phi4mm_translation():
    """phi3v's flow with the crop masks as a third per-image input, the 200010 image token and
    the embedding's audio_features fed [0, hidden] (no speech session)."""
    doc = translated(phi4mm())
    assert doc["pipeline"]["flow"][0] == {"run": "vision", "when": "init", "loop": "per_image",
                                          "loop_over": "pixel_values"}
    assert doc["pipeline"]["state"]["position_ids"].get("strategy") != "mrope_3d"
    assert doc["tokens"]["extra"] == {"image_token": 200010}
    assert doc["preprocessing"]["image"] == {"config": "processor_config.json", "format": "ort-extensions",
                                             "pixel_values": "pixel_values", "grid_thw": "image_sizes",
                                             "attention_mask": "image_attention_mask"}
    assert doc["pipeline"]["inputs"]["audio_features"]["shape"] == [0, 16]
    assert {"from": "inputs.audio_features", "to": "embedding.audio_features"} in doc["pipeline"]["dataflow"]


@pytest.mark.parametrize("extra, path, text", [
    ({"vision": {**PHI4_VISION, "inputs": {"image_grid_thw": "g"}}}, "$.model.vision.inputs.image_grid_thw",
     'the key "image_grid_thw"'),
    ({"embedding": {**PHI4_EMBEDDING, "inputs": {"per_layer_inputs": "p"}}},
     "$.model.embedding.inputs.per_layer_inputs", 'the key "per_layer_inputs"'),
])
def test_phi4mm_keys_onnxpipe_does_not_run_are_named(extra, path, text):
    exc = refusal(phi4mm(**extra))
    assert exc.path == path
    assert f'model.type "phi4mm": {text}' in exc.message


@pytest.mark.parametrize("speech, path", [({"filename": "", "config_filename": "speech.json"}, "$.model.speech.filename"),
                                          ({"filename": "speech.onnx", "config_filename": ""},
                                           "$.model.speech.config_filename")])
def test_phi4mm_speech_block_not_cleared_is_read_as_audio(speech, path):
    """Only the fully cleared block means "no audio"; a half-cleared one is a speech section,
    read by config/genai_phi4_speech.py and refused at the key that is empty."""
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(phi4mm(speech=speech), "genai_config.json")
    assert (info.value.file, info.value.path) == ("genai_config.json", path)


def test_phi4mm_image_token_is_genai_s_fixed_id():
    assert translated(phi4mm(image_token_id=200010))["tokens"]["extra"] == {"image_token": 200010}
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(phi4mm(image_token_id=5), "genai_config.json")
    assert (info.value.file, info.value.path) == ("genai_config.json", "$.model.image_token_id")
    assert ('onnxruntime-genai marks image tokens with id 200010 (<|endoftext10|>) whatever '
            "model.image_token_id says; expected 200010 or no key, found integer 5") in info.value.message


def test_phi4mm_audio_features_need_the_hidden_size():
    g = phi4mm()
    del g["model"]["decoder"]["hidden_size"]
    with pytest.raises(ConfigError) as info:
        genai_v1.translate(g, "genai_config.json")
    assert info.value.path == "$.model.decoder.hidden_size"
    assert 'the embedding session\'s "audio_features" is fed [0, hidden_size] without audio' in info.value.message


# ---- model.type "gemma4" images

GEMMA4_VISION = {"filename": "vision.onnx", "config_filename": "processor_config.json",
                 "inputs": {"pixel_values": "pixel_values", "pixel_position_ids": "pixel_position_ids"},
                 "outputs": {"image_features": "image_features"}}


def gemma4(**extra):
    """A gemma4 bundle as onnxruntime-genai 0.18 loads it: speech.config_filename emptied (no audio)."""
    sections = {"embedding": EMBEDDING, "vision": GEMMA4_VISION, "image_token_id": 258880,
                "speech": {"config_filename": ""}}
    g = bundle("gemma4", **{**sections, **extra})
    g["model"]["vocab_size"] = 262144
    return g


def test_gemma4_translation():
    """Gemma 4: Gemma 3's flow with pixel_position_ids beside the pixels and no global KV dims
    (the full-attention layers' differ); the emptied speech section is no audio."""
    doc = genai_v1.translate(gemma4())
    assert doc["pipeline"]["flow"][1]["merge"] == {"from": "vision.image_features", "into": "image_features",
                                                   "token": "image_token"}
    assert doc["pipeline"]["state"]["position_ids"].get("strategy") != "mrope_3d"
    assert "num_heads" not in doc["pipeline"]["state"]["kv_cache"]
    assert doc["preprocessing"]["image"] == {"config": "processor_config.json", "format": "ort-extensions",
                                             "pixel_values": "pixel_values", "grid_thw": "pixel_position_ids"}


@pytest.mark.parametrize("speech", [SPEECH, {"config_filename": "audio_processor_config.json"}])
def test_gemma4_speech_is_refused(speech):
    exc = refusal(gemma4(speech=speech))
    assert exc.path == "$.model.speech"
    assert 'model.type "gemma4": audio input: a speech session' in exc.message


@pytest.mark.parametrize("section, key", [("decoder", "inputs"), ("embedding", "outputs")])
def test_gemma4_per_layer_inputs_are_named(section, key):
    g = gemma4()
    g["model"][section].setdefault(key, {})["per_layer_inputs"] = "per_layer_inputs"
    exc = refusal(g)
    assert exc.path == f"$.model.{section}.{key}.per_layer_inputs"
    assert 'model.type "gemma4": per-layer inputs (an embedding output per_layer_inputs' in exc.message


def test_gemma4_vision_keys_onnxpipe_does_not_run_are_named():
    g = gemma4()
    g["model"]["vision"]["spatial_merge_size"] = 2
    exc = refusal(g)
    assert exc.path == "$.model.vision.spatial_merge_size"
    assert 'model.type "gemma4": the key "spatial_merge_size"' in exc.message

