"""transformers.js / Optimum folders read as pipeline.json v2: translation, dtype defaults and
choice, and the error paths. Folders are the tjs_* fixtures, or made in tmp_path with
placeholder .onnx files (translation never opens them)."""

from __future__ import annotations

import json
import shutil

import pytest

from onnxpipe.config import transformers_js as tjs
from onnxpipe.config.load import load_config
from onnxpipe.errors import BundleError, ConfigError
from tests.fixtures import tiny_models

CONFIG = {"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
          "max_position_embeddings": 256, "eos_token_id": 2, "bos_token_id": 1}


def folder(tmp_path, files, config=CONFIG, generation=None, name="tjs"):
    out = tmp_path / name
    out.mkdir()
    (out / "config.json").write_text(json.dumps(config))
    if generation is not None:
        (out / "generation_config.json").write_text(json.dumps(generation))
    for rel in files:
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_bytes(b"placeholder")
    return out


def decoder(doc):
    return doc["pipeline"]["sessions"]["decoder"]


def test_fixture_folder_translates(tjs_bundle):
    exp = tiny_models.load_expected(tjs_bundle)
    doc = tjs.translate(str(tjs_bundle))
    gen_cfg = json.loads((tjs_bundle / "generation_config.json").read_text())
    assert doc["tokens"]["eos"] == [exp["eos_token_id"]]
    assert (doc["tokens"]["bos"], doc["tokens"]["pad"]) == (gen_cfg["bos_token_id"], gen_cfg["pad_token_id"])
    assert doc["generation"]["max_length"] == len(exp["input_ids"]) + exp["max_new_tokens"]
    assert doc["preprocessing"]["text"] == {"tokenizer": "tokenizer.json", "config": "tokenizer_config.json",
                                            "chat_template": "chat_template.jinja"}
    assert doc["metadata"]["model_type"] == exp["model_type"]
    # dtype None: each provider gets its variant (fp16, wasm's first choice, where offered: every
    # fixture but tjs_qwen35, whose fp16 export onnxruntime's CPU fusions get wrong)
    files = {d: v["file"] for d, v in exp["variants"].items()}
    assert decoder(doc)["file"]["cpu"] == files["fp32"]
    assert decoder(doc)["file"]["wasm"] == files.get("fp16", files["fp32"])
    assert decoder(doc)["file"]["webgpu"] == files.get("q4f16", files.get("fp16", files.get("q4")))
    config = load_config(tjs_bundle)
    assert config.dtype is None and config.dtypes == tuple(exp["variants"])
    assert config.file == str(tjs_bundle / "config.json")


def test_external_data_is_listed():
    bundle = tiny_models.ensure("tjs_qwen2")
    doc = tjs.translate(str(bundle), "fp16")
    assert decoder(doc) == {"file": "onnx/model_fp16.onnx", "external_data": ["onnx/model_fp16.onnx_data"]}
    per_ep = decoder(tjs.translate(str(bundle)))["external_data"]
    assert per_ep["cpu"] == ["onnx/model.onnx_data"]
    assert load_config(bundle, dtype="q4f16").spec.pipeline.sessions["decoder"].data_for("wasm") == (
        "onnx/model_q4f16.onnx_data",)


def test_optimum_split_data_and_root_layout(tmp_path):
    # Optimum puts model.onnx beside config.json and splits large weights: _data, _data_1, ...
    out = folder(tmp_path, ["model.onnx", "model.onnx_data", "model.onnx_data_1", "model.onnx_data_2"])
    assert decoder(tjs.translate(str(out), "fp32")) == {
        "file": "model.onnx", "external_data": ["model.onnx_data", "model.onnx_data_1", "model.onnx_data_2"]}


def test_defaults_per_provider(tmp_path):
    out = folder(tmp_path, [f"onnx/model{s}.onnx" for s in ("", "_fp16", "_quantized", "_q4", "_q4f16")])
    assert tjs.offered_dtypes(str(out)) == ["fp32", "fp16", "q8", "q4", "q4f16"]
    assert tjs.chosen_dtypes(str(out), None) == {"cpu": "fp32", "wasm": "fp16", "webgpu": "q4f16"}
    spec = load_config(out).spec.pipeline.sessions["decoder"]
    assert spec.file_for("webgpu") == "onnx/model_q4f16.onnx"
    assert spec.file_for("cuda") == "onnx/model.onnx"      # any other provider: the cpu choice
    only_q4 = folder(tmp_path, ["onnx/model_q4.onnx"], name="q4only")
    assert tjs.chosen_dtypes(str(only_q4), None) == {"cpu": "q4", "wasm": "q4", "webgpu": "q4"}


def test_dtype_choice(tmp_path):
    out = folder(tmp_path, ["onnx/model.onnx", "onnx/model_int8.onnx", "onnx/model_bnb4.onnx"])
    config = load_config(out, dtype="int8")
    assert config.dtype == "int8" and config.dtypes == ("fp32", "int8", "bnb4")
    assert config.spec.pipeline.sessions["decoder"].file == "onnx/model_int8.onnx"


def test_merged_decoder_is_found():
    bundle = tiny_models.ensure("tjs_qwen3_merged")
    assert decoder(tjs.translate(str(bundle), "q4"))["file"] == "onnx/decoder_model_merged_q4.onnx"


def test_model_preferred_over_merged(tmp_path):
    out = folder(tmp_path, ["onnx/decoder_model_merged.onnx", "onnx/model.onnx", "onnx/decoder_model_merged_fp16.onnx"])
    assert tjs.dtype_files(str(out)) == {"fp32": "onnx/model.onnx", "fp16": "onnx/decoder_model_merged_fp16.onnx"}


def test_generation_config_defaults(tmp_path):
    gen = {"do_sample": True, "temperature": 0.7, "top_k": 20, "top_p": 0.8, "repetition_penalty": 1.1,
           "max_new_tokens": 128, "eos_token_id": [2, 7], "bos_token_id": 1, "pad_token_id": None}
    out = folder(tmp_path, ["onnx/model.onnx"], generation=gen)
    spec = load_config(out).spec
    s = spec.generation.sampling
    assert (s.do_sample, s.temperature, s.top_k, s.top_p, s.repetition_penalty) == (True, 0.7, 20, 0.8, 1.1)
    assert spec.tokens.eos == (2, 7) and spec.tokens.bos == 1 and spec.tokens.pad is None   # null: none
    assert spec.generation.max_length == CONFIG["max_position_embeddings"]   # no max_length: the context
    assert spec.metadata["max_new_tokens"] == 128


def test_eos_falls_back_to_config_json(tmp_path):
    out = folder(tmp_path, ["onnx/model.onnx"])
    assert load_config(out).spec.tokens.eos == (2,)
    nulls = folder(tmp_path, ["onnx/model.onnx"], generation={"eos_token_id": None}, name="nulls")
    assert load_config(nulls).spec.tokens.eos == (2,)


def test_folder_with_no_onnx_file(tmp_path):
    out = folder(tmp_path, ["onnx/readme.txt", "tokenizer.json"])
    with pytest.raises(BundleError) as info:
        load_config(out)
    assert str(out / "onnx") in info.value.message
    assert "onnx/model.onnx" in info.value.message


def test_missing_dtype_lists_the_offered_ones(tmp_path):
    out = folder(tmp_path, ["onnx/model.onnx", "onnx/model_q4.onnx"])
    with pytest.raises(BundleError) as info:
        load_config(out, dtype="fp16")
    assert 'dtype "fp16" is not in this folder' in info.value.message
    assert "it has fp32, q4" in info.value.message
    with pytest.raises(BundleError) as info:
        load_config(out, dtype="fp8")
    assert "transformers.js dtypes: fp32, fp16, q8" in info.value.message


def test_dtype_for_a_bundle_without_a_choice(torch_llama):
    with pytest.raises(BundleError) as info:
        load_config(torch_llama, dtype="fp16")
    assert str(torch_llama / "pipeline.json") in info.value.message
    assert "offers no dtype choice" in info.value.message
    assert load_config(torch_llama).dtypes == ()


def test_pipeline_json_wins_over_the_layout(tmp_path, torch_llama):
    out = tmp_path / "both"
    shutil.copytree(torch_llama, out)
    (out / "config.json").write_text(json.dumps(CONFIG))
    assert load_config(out).file == str(out / "pipeline.json")


# ---- encoder-decoder (Whisper) and vision-language folders -----------------------------------

WHISPER = {"model_type": "whisper", "d_model": 64, "decoder_attention_heads": 4, "max_target_positions": 448,
           "decoder_start_token_id": 50258, "eos_token_id": 50257, "suppress_tokens": [1, 2],
           "begin_suppress_tokens": [220, 50257]}
ENC_DEC = ["onnx/encoder_model.onnx", "onnx/decoder_model_merged.onnx", "onnx/encoder_model_fp16.onnx",
           "onnx/decoder_model_merged_fp16.onnx", "onnx/decoder_model_merged_q4.onnx"]


def test_encoder_decoder_folder_translates(tmp_path):
    gen = {"decoder_start_token_id": 50258, "lang_to_id": {"<|de|>": 50261, "<|en|>": 50259},
           "task_to_id": {"transcribe": 50359, "translate": 50358}, "no_timestamps_token_id": 50363,
           "forced_decoder_ids": [[1, None], [2, 50359]], "suppress_tokens": [1, 2, 7],
           "begin_suppress_tokens": [220, 50257], "max_length": 448}
    out = folder(tmp_path, ENC_DEC, config=WHISPER, generation=gen)
    assert tjs.layout(str(out)) == "encoder-decoder"
    assert tjs.offered_dtypes(str(out)) == ["fp32", "fp16"]   # q4 has no encoder
    doc = tjs.translate(str(out))
    sessions = doc["pipeline"]["sessions"]
    assert sessions["encoder"]["file"] == {"cpu": "onnx/encoder_model.onnx", "wasm": "onnx/encoder_model_fp16.onnx",
                                           "webgpu": "onnx/encoder_model_fp16.onnx"}
    assert sessions["decoder"]["file"]["wasm"] == "onnx/decoder_model_merged_fp16.onnx"
    assert doc["tokens"] == {"eos": [50257], "decoder_prefix": [50258, 50259, 50359, 50363]}
    assert doc["generation"]["suppress_tokens"] == {"always": [1, 2, 7], "at_start": [220, 50257]}
    state = doc["pipeline"]["state"]
    assert state["kv_cache"]["past_key_pattern"] == "past_key_values.{layer}.decoder.key"
    assert (state["kv_cache"]["num_heads"], state["kv_cache"]["head_size"]) == (4, 16)
    assert state["cross_kv"] == {"past_pattern": "past_key_values.{layer}.encoder.{kv}",
                                 "present_pattern": "present.{layer}.encoder.{kv}"}
    config = load_config(out, dtype="fp16")
    assert config.spec.pipeline.sessions["encoder"].file == "onnx/encoder_model_fp16.onnx"
    assert config.dtypes == ("fp32", "fp16")


@pytest.mark.parametrize("gen,prefix", [
    ({"forced_decoder_ids": [[2, 9], [1, 8]], "no_timestamps_token_id": 10}, [50258, 8, 9, 10]),   # older export
    ({"no_timestamps_token_id": 10}, [50258, 10]),                                                  # English-only
])
def test_whisper_prompt_without_lang_to_id(tmp_path, gen, prefix):
    out = folder(tmp_path, ENC_DEC[:2], config=WHISPER, generation=gen)
    assert tjs.translate(str(out))["tokens"]["decoder_prefix"] == prefix


def test_whisper_prompt_refusals(tmp_path):
    out = folder(tmp_path, ENC_DEC[:2], config=WHISPER, generation={"lang_to_id": {"<|de|>": 5}, "task_to_id": {}})
    with pytest.raises(ConfigError) as info:
        tjs.translate(str(out))
    assert info.value.path == "$.lang_to_id" and '"<|en|>"' in info.value.detail
    assert info.value.file == str(out / "generation_config.json")
    bad = folder(tmp_path, ENC_DEC[:2], config=WHISPER, generation={"forced_decoder_ids": [[3, 9]]}, name="bad")
    with pytest.raises(ConfigError) as info:
        tjs.translate(str(bad))
    assert info.value.path == "$.forced_decoder_ids[0]" and "[3, 9]" in info.value.detail


def test_encoder_decoder_refusals(tmp_path):
    marian = folder(tmp_path, ENC_DEC[:2], config={**WHISPER, "model_type": "marian"}, name="marian")
    with pytest.raises(BundleError) as info:
        load_config(marian)
    assert 'model_type "marian"' in info.value.message and 'for model_type "whisper"' in info.value.message
    unpaired = folder(tmp_path, ["onnx/encoder_model.onnx", "onnx/decoder_model_merged_fp16.onnx"],
                      config=WHISPER, name="unpaired")
    with pytest.raises(BundleError) as info:
        load_config(unpaired)
    assert "encoder_model<suffix>.onnx and decoder_model_merged<suffix>.onnx of the same dtype" in info.value.message
    assert "found decoder_model_merged_fp16.onnx, encoder_model.onnx" in info.value.message


VL_FILES = ["onnx/vision_encoder.onnx", "onnx/embed_tokens.onnx", "onnx/decoder_model_merged.onnx",
            "onnx/vision_encoder_fp16.onnx", "onnx/embed_tokens_fp16.onnx", "onnx/decoder_model_merged_fp16.onnx",
            "onnx/decoder_model_merged_q4.onnx", "preprocessor_config.json"]


def test_vision_language_folder_translates(tmp_path):
    # transformers 4.x configs (transformers.js's exports) keep the text dims at the top level
    config = {**CONFIG, "model_type": "qwen2_vl", "image_token_id": 151655, "vision_config": {"spatial_merge_size": 2}}
    out = folder(tmp_path, VL_FILES, config=config, generation={"eos_token_id": [151645, 151643]})
    assert tjs.layout(str(out)) == "vision-language"
    assert tjs.offered_dtypes(str(out)) == ["fp32", "fp16"]   # q4 has only the decoder
    doc = tjs.translate(str(out), "fp16")
    pipe = doc["pipeline"]
    assert pipe["extends"] == "vision-language"
    assert {n: s["file"] for n, s in pipe["sessions"].items()} == {
        "vision": "onnx/vision_encoder_fp16.onnx", "embedding": "onnx/embed_tokens_fp16.onnx",
        "decoder": "onnx/decoder_model_merged_fp16.onnx"}
    assert pipe["dataflow"] == [{"from": "inputs.image_grid_thw", "to": "vision.grid_thw"}]
    assert pipe["state"]["position_ids"] == {"strategy": "mrope_3d", "spatial_merge_size": 2}
    assert (pipe["state"]["kv_cache"]["num_heads"], pipe["state"]["kv_cache"]["head_size"]) == (2, 16)
    assert doc["tokens"] == {"eos": [151645, 151643], "extra": {"image_token": 151655}, "bos": 1}
    assert doc["preprocessing"]["image"]["config"] == "preprocessor_config.json"


def test_vision_language_refusals(tmp_path):
    smolvlm = folder(tmp_path, VL_FILES, config={**CONFIG, "model_type": "idefics3", "image_token_id": 5})
    with pytest.raises(BundleError) as info:
        load_config(smolvlm)
    msg = info.value.message
    assert str(smolvlm) in msg and 'model_type "idefics3"' in msg and "for model_type qwen2_vl" in msg
    partial = folder(tmp_path, ["onnx/vision_encoder.onnx", "onnx/decoder_model_merged.onnx"],
                     config={**CONFIG, "model_type": "qwen2_vl"}, name="partial")
    with pytest.raises(BundleError) as info:
        load_config(partial)
    assert "vision_encoder<suffix>.onnx, embed_tokens<suffix>.onnx and decoder_model_merged<suffix>.onnx" \
        in info.value.message
    assert "found decoder_model_merged.onnx, vision_encoder.onnx" in info.value.message
    no_image_token = folder(tmp_path, VL_FILES, config={**CONFIG, "model_type": "qwen2_vl"}, name="no_token")
    with pytest.raises(ConfigError) as info:
        load_config(no_image_token)
    assert info.value.path == "$.image_token_id" and info.value.file == str(no_image_token / "config.json")


QWEN35 = {"model_type": "qwen3_5", "image_token_id": 248056, "text_config": {
    "model_type": "qwen3_5_text", "hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2,
    "head_dim": 32, "max_position_embeddings": 256, "eos_token_id": 2,
    "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"]}}


def test_qwen35_folder_runs_its_text_sessions(tmp_path):
    # as transformers.js's text-generation pipeline: embed_tokens + decoder_model_merged, the
    # vision encoder beside them not run; q4 has no embed_tokens_q4, so no q4 pair
    out = folder(tmp_path, VL_FILES, config=QWEN35, generation={"eos_token_id": [2, 5], "max_length": 100})
    assert tjs.offered_dtypes(str(out)) == ["fp32", "fp16"]
    doc = tjs.translate(str(out), "fp16")
    pipe = doc["pipeline"]
    assert "extends" not in pipe and [s["run"] for s in pipe["flow"]] == ["embedding", "decoder"]
    assert {n: s["file"] for n, s in pipe["sessions"].items()} == {
        "embedding": "onnx/embed_tokens_fp16.onnx", "decoder": "onnx/decoder_model_merged_fp16.onnx"}
    assert pipe["state"]["position_ids"] == {"strategy": "mrope_3d"}
    assert pipe["state"]["kv_cache"] == {"format": "separate", "num_heads": 2, "head_size": 32}   # head_dim
    assert [(e["input"], e["output"], e["layers"]) for e in pipe["state"]["recurrent"]] == [
        ("past_conv.{layer}", "present_conv.{layer}", [0, 2]),
        ("past_recurrent.{layer}", "present_recurrent.{layer}", [0, 2])]
    assert doc["tokens"] == {"eos": [2, 5]} and doc["generation"]["max_length"] == 100
    # without the vision encoder (a text-only export), the same pair
    text = folder(tmp_path, ["onnx/embed_tokens.onnx", "onnx/decoder_model_merged.onnx"],
                  config={**QWEN35["text_config"]}, name="text")
    assert tjs.chosen_dtypes(str(text), None) == {"cpu": "fp32", "wasm": "fp32", "webgpu": "fp32"}
    assert decoder(tjs.translate(str(text)))["file"]["wasm"] == "onnx/decoder_model_merged.onnx"


def test_qwen35_refusals_name_the_files_and_keys(tmp_path):
    alone = folder(tmp_path, ["onnx/embed_tokens.onnx", "onnx/vision_encoder.onnx"], config=QWEN35, name="alone")
    with pytest.raises(BundleError) as info:
        load_config(alone)
    assert "needs embed_tokens<suffix>.onnx and decoder_model_merged<suffix>.onnx of the same dtype" \
        in info.value.message
    bad = folder(tmp_path, ["onnx/embed_tokens.onnx", "onnx/decoder_model_merged.onnx"],
                 config={**QWEN35, "text_config": {**QWEN35["text_config"], "head_dim": 0}}, name="bad")
    with pytest.raises(ConfigError) as info:
        tjs.translate(str(bad))
    assert info.value.path == "$.text_config.head_dim" and info.value.file == str(bad / "config.json")
    # Qwen2-VL without its vision encoder is still refused (its flow runs the vision session)
    no_vision = folder(tmp_path, ["onnx/embed_tokens.onnx", "onnx/decoder_model_merged.onnx"],
                       config={**CONFIG, "model_type": "qwen2_vl", "image_token_id": 5}, name="no_vision")
    with pytest.raises(BundleError, match="vision_encoder<suffix>.onnx, embed_tokens<suffix>.onnx"):
        load_config(no_vision)
