"""Whisper as three ONNX graphs (legacy ``torch.onnx.export``, fp32, plain ONNX ops):

- ``mel.onnx``: ``waveform`` f32[1, n] at 16 kHz and ``input_frames`` int64 [1] ->
  ``input_features`` f32[1, mels, input_frames], the first input_frames frames of the log-mel
  spectrogram of transformers' WhisperFeatureExtractor (zero-padded or cut to 30 s, centred
  reflect-padded STFT with a periodic Hann window as a strided Conv, power, Slaney mel filters,
  log10 of at least 1e-10, floor at max - 8, then (x + 4) / 4). Only the frames encoded and
  those that hold audio are computed (``_mel_cut``); 3000 frames is the whole window, exactly.
- ``encoder.onnx``: ``input_features`` [1, mels, frames <= 3000] and ``input_frames`` int64 [1] ->
  ``cross_key_values.{i}.key/value`` [1, heads, input_frames / 2, head]: the encoder AND every
  decoder layer's cross-attention key/value projections, so the decoder never recomputes them.
  Only the first ``input_frames`` frames are encoded, with the positional embeddings of that
  many positions (whisper.cpp's audio_ctx); 3000 of 3000 is transformers' full window, exactly.
- ``decoder.onnx``: ``input_ids`` [1, s], ``past_key_values.{i}.key/value`` [1, heads, past,
  head] and the cross keys/values -> ``logits`` [1, s, vocab], ``present.{i}.key/value``. The
  positions are the past length onwards, read from the past's shape: no position input.

The decoder is written out here (pre-norm layers: self-attention with a causal mask, cross
attention, GELU MLP) over the transformers model's own modules, so the traced graph is plain
MatMul/Softmax with the KV layout above.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

OPSET = 17
SAMPLE_RATE = 16000
N_FFT = 400
HOP = 160
CHUNK_SECONDS = 30
N_SAMPLES = SAMPLE_RATE * CHUNK_SECONDS
CROSS_KEY, CROSS_VALUE = "cross_key_values.{layer}.key", "cross_key_values.{layer}.value"
PAST_KEY, PAST_VALUE = "past_key_values.{layer}.key", "past_key_values.{layer}.value"
PRESENT_KEY, PRESENT_VALUE = "present.{layer}.key", "present.{layer}.value"


def names(pattern_key: str, pattern_value: str, layers: int) -> list[str]:
    return [p.format(layer=i) for i in range(layers) for p in (pattern_key, pattern_value)]


class LogMel(nn.Module):
    """Waveform [1, n] -> Whisper log-mel features [1, mels, frames]."""

    def __init__(self, mel_filters: np.ndarray):   # [n_fft // 2 + 1, mels], as transformers keeps it
        super().__init__()
        bins = N_FFT // 2 + 1
        n = np.arange(N_FFT)
        window = 0.5 - 0.5 * np.cos(2 * np.pi * n / N_FFT)   # periodic Hann
        angle = 2 * np.pi * np.outer(np.arange(bins), n) / N_FFT
        basis = np.concatenate([np.cos(angle) * window, -np.sin(angle) * window])   # [2 * bins, n_fft]
        self.bins = bins
        self.register_buffer("basis", torch.tensor(basis[:, None, :], dtype=torch.float32))
        self.register_buffer("filters", torch.tensor(np.asarray(mel_filters).T, dtype=torch.float32))

    def forward(self, waveform):
        """The whole 30 s window: ``waveform`` zero-padded or cut to it, then ``features``."""
        padded = torch.cat([waveform, torch.zeros(1, N_SAMPLES, dtype=waveform.dtype)], dim=1)
        return self.features(padded[:, :N_SAMPLES])

    def features(self, samples):
        """Log-mel of ``samples`` [1, m] (m > n_fft / 2): m // hop frames, floored at their max - 8."""
        x = F.pad(samples.unsqueeze(1), (N_FFT // 2, N_FFT // 2), mode="reflect")
        spec = F.conv1d(x, self.basis, stride=HOP)                  # [1, 2 * bins, frames + 1]
        re, im = spec[:, :self.bins, :-1], spec[:, self.bins:, :-1]  # the last frame is dropped
        mel = torch.matmul(self.filters, re * re + im * im)
        log = torch.log10(torch.clamp(mel, min=1e-10))
        log = torch.maximum(log, log.max() - 8.0)
        return (log + 4.0) / 4.0


def _heads(x, heads: int):
    b, t, d = x.shape
    return x.view(b, t, heads, d // heads).transpose(1, 2)


class Encoder(nn.Module):
    """input_features -> every decoder layer's cross-attention keys and values.

    Written out over transformers' modules (as the decoder is) so the frame count stays a
    dimension of the graph: the positional embeddings are cut to the frames encoded."""

    def __init__(self, hf):
        super().__init__()
        self.encoder = hf.model.encoder
        self.layers = hf.model.decoder.layers
        self.heads = hf.config.decoder_attention_heads
        self.enc_heads = hf.config.encoder_attention_heads
        self.scale = (hf.config.d_model // self.enc_heads) ** -0.5

    def forward(self, input_features):
        enc = self.encoder
        x = F.gelu(enc.conv1(input_features))
        x = F.gelu(enc.conv2(x)).permute(0, 2, 1)
        hidden = x + enc.embed_positions.weight[:x.shape[1]].unsqueeze(0)
        for layer in enc.layers:
            sa = layer.self_attn
            h = layer.self_attn_layer_norm(hidden)
            q = _heads(sa.q_proj(h) * self.scale, self.enc_heads)
            k, v = _heads(sa.k_proj(h), self.enc_heads), _heads(sa.v_proj(h), self.enc_heads)
            hidden = hidden + sa.out_proj(_merge(_attend(q, k, v)))
            h = layer.final_layer_norm(hidden)
            hidden = hidden + layer.fc2(F.gelu(layer.fc1(h)))
        hidden = enc.layer_norm(hidden)
        out = []
        for layer in self.layers:
            out.append(_heads(layer.encoder_attn.k_proj(hidden), self.heads))
            out.append(_heads(layer.encoder_attn.v_proj(hidden), self.heads))
        return tuple(out)


def _attend(q, k, v, mask=None):
    scores = torch.matmul(q, k.transpose(-1, -2))
    if mask is not None:
        scores = scores + mask
    return torch.matmul(torch.softmax(scores, dim=-1), v)


def _merge(x):
    b, h, t, d = x.shape
    return x.transpose(1, 2).reshape(b, t, h * d)


class Decoder(nn.Module):
    """One decoder pass with explicit self-attention past/present and frozen cross keys/values."""

    def __init__(self, hf):
        super().__init__()
        self.decoder = hf.model.decoder
        # one copy of the tied embedding, stored [d_model, vocab]: a Gather for the input and
        # a MatMul for the logits read the same initializer (a transposed copy would add 100 MB)
        self.register_buffer("embed_t", hf.model.decoder.embed_tokens.weight.detach().T.contiguous())
        self.heads = hf.config.decoder_attention_heads
        self.n = hf.config.decoder_layers
        self.scale = (hf.config.d_model // self.heads) ** -0.5

    def forward(self, input_ids, *kv):
        past, cross = kv[:2 * self.n], kv[2 * self.n:]
        dec = self.decoder
        s = input_ids.shape[1]
        past_len = past[0].shape[2]
        positions = torch.arange(s) + past_len
        tokens = torch.index_select(self.embed_t, 1, input_ids.reshape(-1)).T.unsqueeze(0)
        hidden = tokens + dec.embed_positions.weight[positions].unsqueeze(0)
        rows = positions.unsqueeze(1)
        cols = torch.arange(s + past_len).unsqueeze(0)
        mask = torch.where(cols > rows, torch.tensor(-1e9), torch.tensor(0.0))
        presents = []
        for i, layer in enumerate(dec.layers):
            sa = layer.self_attn
            h = layer.self_attn_layer_norm(hidden)
            q = _heads(sa.q_proj(h) * self.scale, self.heads)
            k = torch.cat([past[2 * i], _heads(sa.k_proj(h), self.heads)], dim=2)
            v = torch.cat([past[2 * i + 1], _heads(sa.v_proj(h), self.heads)], dim=2)
            presents += [k, v]
            hidden = hidden + sa.out_proj(_merge(_attend(q, k, v, mask)))
            ca = layer.encoder_attn
            h = layer.encoder_attn_layer_norm(hidden)
            q = _heads(ca.q_proj(h) * self.scale, self.heads)
            hidden = hidden + ca.out_proj(_merge(_attend(q, cross[2 * i], cross[2 * i + 1])))
            h = layer.final_layer_norm(hidden)
            hidden = hidden + layer.fc2(F.gelu(layer.fc1(h)))
        logits = torch.matmul(dec.layer_norm(hidden), self.embed_t)
        return (logits, *presents)


def _export(module, args, path, inputs, outputs, dynamic) -> None:
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")   # tracer warnings about shapes turned into Python ints
        torch.onnx.export(module, args, str(path), input_names=inputs, output_names=outputs,
                          dynamic_axes=dynamic, opset_version=OPSET, dynamo=False)


class _Features(nn.Module):
    def __init__(self, mel: LogMel):
        super().__init__()
        self.mel = mel

    def forward(self, samples):
        return self.mel.features(samples)


FRAMES_INPUT = "input_frames"   # int64 [1]: how many of input_features' frames are encoded
WINDOW_FRAMES = N_SAMPLES // HOP


def export_mel(mel_filters: np.ndarray, path) -> None:
    """mel.onnx: LogMel.features traced over a dynamic sample count, then ``_mel_cut``."""
    samples = torch.randn(1, SAMPLE_RATE * 3, generator=torch.Generator().manual_seed(0))
    _export(_Features(LogMel(mel_filters)).eval(), (samples,), path, ["samples_cut"], ["log_mel_cut"],
            {"samples_cut": {1: "cut_samples"}, "log_mel_cut": {2: "cut_frames"}})
    _mel_cut(path)


def _mel_cut(path) -> None:
    """mel.onnx takes ``waveform`` and ``input_frames`` and computes the log-mel of only as many
    samples as the frames it returns and the frames holding audio need.

    Frame t reads samples [t * hop - n_fft / 2, t * hop + n_fft / 2). With A = max(input_frames,
    ceil((audio + n_fft / 2) / hop)) (audio = the waveform's samples, at most 30 s) frames t < A
    hold every sample of audio and every frame returned. The waveform is zero-padded (or cut) to
    L = min(30 s, (A + 3) * hop + n_fft / 2) samples: every frame t < A then lies inside L and reads
    the same samples as in the whole window, and the reflect padding past L mirrors only zeros
    (L - n_fft / 2 - 1 > audio). So the frames computed are the window's frames t < A, equal, plus
    frames of zeros only; every other frame of the window is zeros only too, and a frame of zeros
    is log10(1e-10) = -10, the least any frame can be: the max (and the max - 8 floor) is the
    window's. L = 30 s is the window's own computation. The result is then sliced to
    input_frames."""
    import onnx
    from onnx import TensorProto, helper

    half = N_FFT // 2
    model = onnx.load(str(path))
    g = model.graph
    consts = {"mel_zero": [0], "mel_one": [1], "mel_two": [2], "mel_hop": [HOP], "mel_hop_less_one": [HOP - 1],
              "mel_half": [half], "mel_window": [N_SAMPLES], "mel_pads": [0, 0, 0, N_SAMPLES],
              "mel_spare": [3 * HOP + half]}
    g.initializer.extend(helper.make_tensor(k, TensorProto.INT64, [len(v)], v) for k, v in consts.items())
    node = helper.make_node
    nodes = [
        node("Pad", ["waveform", "mel_pads"], ["mel_padded"]),                     # + 30 s of zeros
        node("Shape", ["waveform"], ["mel_n"], start=1, end=2),
        node("Min", ["mel_n", "mel_window"], ["mel_audio"]),
        node("Add", ["mel_audio", "mel_half"], ["mel_reach"]),
        node("Add", ["mel_reach", "mel_hop_less_one"], ["mel_reach_up"]),
        node("Div", ["mel_reach_up", "mel_hop"], ["mel_audio_frames"]),           # ceil((audio + half) / hop)
        node("Max", ["mel_audio_frames", FRAMES_INPUT], ["mel_frames"]),
        node("Mul", ["mel_frames", "mel_hop"], ["mel_frames_samples"]),
        node("Add", ["mel_frames_samples", "mel_spare"], ["mel_cut_wanted"]),
        node("Min", ["mel_cut_wanted", "mel_window"], ["mel_cut"]),
        node("Slice", ["mel_padded", "mel_zero", "mel_cut", "mel_one"], ["samples_cut"], name="cut_samples"),
    ]
    g.input.pop(0)
    g.input.extend([helper.make_tensor_value_info("waveform", TensorProto.FLOAT, [1, "samples"]),
                    helper.make_tensor_value_info(FRAMES_INPUT, TensorProto.INT64, [1])])
    for i, n in enumerate(nodes):
        g.node.insert(i, n)
    g.node.append(node("Slice", ["log_mel_cut", "mel_zero", FRAMES_INPUT, "mel_two"], ["input_features"],
                       name="cut_to_input_frames"))
    g.output.pop(0)
    g.output.append(helper.make_tensor_value_info("input_features", TensorProto.FLOAT, [1, "mels", "frames"]))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def export_encoder(hf, path) -> None:
    n = hf.config.decoder_layers
    feats = torch.zeros(1, hf.config.num_mel_bins, 2 * hf.config.max_source_positions)
    outputs = names(CROSS_KEY, CROSS_VALUE, n)
    dynamic = {"input_features": {2: "frames"}}
    dynamic.update({name: {2: "encoded_frames"} for name in outputs})
    _export(Encoder(hf).eval(), (feats,), path, ["input_features"], outputs, dynamic)
    _cut_input(path, "input_features")


def _cut_input(path, name: str) -> None:
    """The graph's ``name`` input ([1, mels, frames] for any frames up to the window's) gets
    ``input_frames`` beside it: a Slice keeps the first input_frames frames, a no-op when mel.onnx
    computed just those, and the cut when it is given a whole window's features."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(path))
    g = model.graph
    inner = name + "_encoded"
    for node in g.node:
        node.input[:] = [inner if i == name else i for i in node.input]
    features = next(i for i in g.input if i.name == name)   # [1, mels, frames <= 3000]
    features.type.tensor_type.shape.dim[2].dim_param = "frames"
    g.input.append(helper.make_tensor_value_info(FRAMES_INPUT, TensorProto.INT64, [1]))
    g.initializer.extend([helper.make_tensor("input_frames_start", TensorProto.INT64, [1], [0]),
                          helper.make_tensor("input_frames_axis", TensorProto.INT64, [1], [2])])
    g.node.insert(0, helper.make_node("Slice", [name, "input_frames_start", FRAMES_INPUT, "input_frames_axis"],
                                      [inner], name="cut_to_input_frames"))
    onnx.checker.check_model(model)
    onnx.save(model, str(path))


def export_decoder(hf, path) -> None:
    cfg = hf.config
    n, heads = cfg.decoder_layers, cfg.decoder_attention_heads
    head = cfg.d_model // heads
    gen = torch.Generator().manual_seed(0)
    past_len, seq = 3, 2   # a non-empty past, so no length is baked in
    past = [torch.randn(1, heads, past_len, head, generator=gen) for _ in range(2 * n)]
    cross = [torch.randn(1, heads, cfg.max_source_positions, head, generator=gen) for _ in range(2 * n)]
    ids = torch.tensor([[cfg.decoder_start_token_id] * seq])
    past_names, cross_names = names(PAST_KEY, PAST_VALUE, n), names(CROSS_KEY, CROSS_VALUE, n)
    present_names = names(PRESENT_KEY, PRESENT_VALUE, n)
    dynamic = {"input_ids": {1: "sequence_length"}, "logits": {1: "sequence_length"}}
    dynamic.update({name: {2: "past_sequence_length"} for name in past_names})
    dynamic.update({name: {2: "total_sequence_length"} for name in present_names})
    dynamic.update({name: {2: "encoded_frames"} for name in cross_names})   # the audio context
    _export(Decoder(hf).eval(), (ids, *past, *cross), path, ["input_ids", *past_names, *cross_names],
            ["logits", *present_names], dynamic)


__all__ = ["CHUNK_SECONDS", "FRAMES_INPUT", "N_SAMPLES", "SAMPLE_RATE", "WINDOW_FRAMES", "export_decoder",
           "export_encoder", "export_mel"]
