"""pipeline.json's ``preprocessing`` section (text, phonemes, audio, image, speech) and the
tool-call syntax, as frozen dataclasses; schema.py re-exports every name, so
``from .schema import ...`` keeps working.
"""

from __future__ import annotations

from dataclasses import dataclass

from .fields import DTYPES, SAMPLE_RATE, TOKEN_ID, Range, spec
from .registry import PHONEMIZERS

TOOL_CALL_KEYS = ("name", "function")          # what a call's JSON names the function under
TOOL_ARGUMENT_KEYS = ("arguments", "parameters")   # ... and its arguments (Hermes/Qwen; Llama 3.x)


@dataclass(frozen=True)
class ToolCallFormat:
    """How the model writes a tool call: ``begin {"name": ..., "arguments": {...}} end``
    (grammar/tools.py). Absent: detected from the chat template's text."""

    begin: str = spec(None, "text before each call's JSON (\"\": the reply is the JSON alone)",
                      required=True)
    end: str = spec("", "text after each call's JSON")
    name_key: str = spec("name", "key of the function's name in the call's JSON", choices=TOOL_CALL_KEYS)
    arguments_key: str = spec("arguments", "key of the arguments object in the call's JSON",
                              choices=TOOL_ARGUMENT_KEYS)
    parallel: bool = spec(True, "several calls in one reply (the template renders them)")
    separator: str = spec("\n", "text between two calls (parallel)")


@dataclass(frozen=True)
class TextPreprocessing:
    tokenizer: str | None = spec(None, "tokenizer.json")
    config: str | None = spec(None, "tokenizer_config.json")
    chat_template: str | None = spec(None, "chat template file")
    tool_calls: ToolCallFormat | None = spec(None, "the model's tool-call syntax (detected from the "
                                                   "chat template when absent)")


UNICODE_FORMS = ("NFD", "NFC", "none")


@dataclass(frozen=True)
class PhonemesPreprocessing:
    """Text -> phoneme ids, fed as the pipeline inputs ``phoneme_ids`` [1, n] and
    ``phoneme_lengths`` [1]. Defaults follow Piper's rules."""

    engine: str = spec("espeak-ng", "phonemizer", choices=PHONEMIZERS)
    voice: str = spec(None, "phonemizer voice / language, e.g. en-us", required=True)
    id_map: str = spec(None, "JSON file (with #key for a member) mapping phonemes to ids "
                             "(a list of ids or one id each)", required=True)
    data: str | None = spec(None, "phonemizer data folder in the bundle (native runs)")
    bos: str | tuple[int, ...] | None = spec("^", "symbol put first, or its ids ([0])", range=TOKEN_ID)
    eos: str | tuple[int, ...] | None = spec("$", "symbol put last, or its ids", range=TOKEN_ID)
    pad: str | tuple[int, ...] | None = spec("_", "symbol put after every phoneme, or its ids (null: none)",
                                             range=TOKEN_ID)
    clause_punctuation: str = spec(",;:", "kept, followed by a space")
    sentence_punctuation: str = spec(".!?", "kept; ends a sentence")
    normalize: str = spec("NFD", "Unicode normalization of the phonemes", choices=UNICODE_FORMS)
    unknown: str = spec("drop", "phonemes missing from the map", choices=("drop", "error"))
    max_ids: int = spec(0, "most ids one run takes (0: no limit); longer sentences are cut between "
                           "clauses, a longer clause is an input error", range=Range(0, 2 ** 20, "ids"))


CENTER_PADS = ("zero", "reflect")


@dataclass(frozen=True)
class LogMelFeatures:
    """Whisper-style log-mel features the runtime computes from the waveform (ops/log_mel.py)."""

    n_fft: int = spec(400, "FFT size and window length (periodic Hann)", range=Range(2, 2 ** 16, "samples"))
    hop_length: int = spec(160, "samples between frames", range=Range(1, 2 ** 16, "samples"))
    n_mels: int = spec(80, "mel bands (Slaney scale and normalisation, 0 Hz to half the sample rate)",
                       range=Range(1, 1024, "bands"))
    frames: int = spec(3000, "frames the model takes: shorter audio is padded with the floor value "
                             "(or, with pad_waveform, with frames of silence)", range=Range(1, 2 ** 20, "frames"))
    center_pad: str = spec("zero", "the n_fft / 2 samples the STFT adds before the first and after the last "
                                   "sample: zeros (onnxruntime-extensions) or the signal mirrored, as "
                                   "transformers' WhisperFeatureExtractor does (needs pad_waveform)",
                           choices=CENTER_PADS)
    pad_waveform: bool = spec(False, "cut or zero-pad the waveform to frames * hop_length samples before the "
                                     "STFT, so every frame is computed (transformers); false: frames past the "
                                     "audio hold the floor value (onnxruntime-extensions)")


CONTEXT_ENCODE = ("speech", "window")


@dataclass(frozen=True)
class AudioContext:
    """How much of each window the encoder takes (whisper.cpp's audio_ctx; pipeline/audio_context.py)."""

    frames_input: str = spec(None, "pipeline input that takes how many feature frames the encoder "
                                   "encodes, int64 [1]", required=True)
    encode: str = spec("speech", "speech: the frames that hold the audio, rounded up to bucket_seconds; "
                                 "window: every frame of the window (the reference)", choices=CONTEXT_ENCODE)
    frames_per_second: int = spec(100, "feature frames per second of audio", range=Range(1, 100_000, "frames"))
    bucket_seconds: float = spec(1.0, "the encoded length is the audio's (plus margin_seconds) rounded up "
                                      "to a multiple of this, so few lengths are ever run",
                                 range=Range(0, 3600, "seconds", open_low=True))
    margin_seconds: float = spec(0.0, "silence encoded after the audio's last sample",
                                 range=Range(0, 3600, "seconds"))
    frame_multiple: int = spec(2, "the frame count is a multiple of this (Whisper's stride-2 convolution)",
                               range=Range(1, 1024, "frames"))
    fallback_compression_ratio: float = spec(2.4, "a window whose text compresses more than this (zlib: "
                                                   "a repetition loop), or that ran to max_length, is decoded "
                                                   "again over the whole window; 0: never",
                                             range=Range(0, 1000, "a ratio"))
    fallback_repeat_tokens: int = spec(3, "a window whose tokens say a run of at least this many tokens twice "
                                          "in a row (\"What time is it? What time is it?\") is decoded again over "
                                          "the whole window; 0: never", range=Range(0, 1000, "tokens"))
    fallback_tokens_per_second: float = spec(12.0, "a window's decode stops after this many tokens per second "
                                                   "of its audio (plus 16) and is decoded again over the whole "
                                                   "window: a loop costs that much, not max_length; 0: no budget",
                                             range=Range(0, 1000, "tokens per second"))
    on_loop: str = spec("cut", "a decode that read the speech again (it ran to its budget repeating one "
                               "period, or its whole text is said twice or more): cut, its first reading is "
                               "the text (a loop's up to its last sentence end); window: decoded again over "
                               "the whole window", choices=("cut", "window"))


@dataclass(frozen=True)
class AudioPreprocessing:
    """A waveform pipeline input: the caller's samples are resampled to ``sample_rate`` and
    given in windows of at most ``window_seconds`` (pipeline/transcription.py)."""

    sample_rate: int = spec(None, "samples per second the pipeline takes", required=True, range=SAMPLE_RATE)
    input: str = spec(None, "pipeline input that takes the waveform, float32 [1, samples]",
                      required=True)
    window_seconds: float = spec(30.0, "longest audio one pass takes; longer audio is cut into "
                                       "windows at quiet points", range=Range(0, 3600, "seconds", open_low=True))
    log_mel: LogMelFeatures | None = spec(None, "the input takes log-mel features made from the "
                                                "waveform (absent: the waveform itself)")
    context: AudioContext | None = spec(None, "encode only the frames that hold the audio (absent: the "
                                              "encoder takes whole windows and no frame count)")


@dataclass(frozen=True)
class ExpectedTensor:
    rank: int | None = spec(None, "rank of the session input it feeds", range=Range(0, 64, "dimensions"))
    dtype: str | None = spec(None, "element type of that input", choices=DTYPES)


IMAGE_FORMATS = ("transformers", "ort-extensions")


@dataclass(frozen=True)
class ImagePreprocessing:
    """Images in, Qwen2-VL-style pixel rows and grids out (docs/vision-language.md)."""

    config: str = spec(None, "the processor's JSON in the bundle (transformers' "
                             "preprocessor_config.json keys)", required=True)
    format: str = spec("transformers", "the key set of that file (ort-extensions' "
                                       "image_processor.json uses the same keys)", choices=IMAGE_FORMATS)
    pixel_values: str = spec("pixel_values", "pipeline input that takes each image's rows")
    grid_thw: str = spec("image_grid_thw", "pipeline input that takes each image's [1, 3] grid")
    attention_mask: str | None = spec(None, "pipeline input that takes each image's crop masks "
                                            "[1, crops, 32, 32] (Phi-4-multimodal)")
    expected_outputs: dict[str, ExpectedTensor] = spec(
        doc="checked at load against the session inputs those outputs feed", factory=dict)


@dataclass(frozen=True)
class SpeechPreprocessing:
    """Clips in, Phi-4-multimodal audio features and token counts out (audio/phi4_features.py)."""

    config: str = spec(None, "ort-extensions feature-extraction file in the bundle (AudioDecoderEx + "
                             "Phi4AudioEmbed)", required=True)
    audio_embeds: str = spec("audio_embeds", "pipeline input that takes each clip's features [1, frames, mels]")
    audio_sizes: str = spec("audio_sizes", "pipeline input that takes each clip's audio token count [1]")
    projection_mode: str = spec("audio_projection_mode", "pipeline input that takes each clip's projection "
                                                         "mode [1] (2: speech without an image)")
    attention_mask: str = spec("audio_attention_mask", "pipeline input that takes each clip's frame mask "
                                                       "[1, frames] (all true), where a session reads it")


@dataclass(frozen=True)
class Preprocessing:
    text: TextPreprocessing | None = spec(None, "tokenizer and chat template")
    image: ImagePreprocessing | None = spec(None, "images -> pixel rows and grids (image/)")
    audio: AudioPreprocessing | None = spec(None, "waveform input: sample rate and windows")
    speech: SpeechPreprocessing | None = spec(None, "audio clips in a prompt -> speech session inputs "
                                                    "(Phi-4-multimodal)")
    phonemes: PhonemesPreprocessing | None = spec(None, "text -> phoneme ids")
