"""`onnxpipe batch` in process (no Ray): each output is what the pipeline call gives for that
record (pipe.chat / pipe.generate with the options the server maps a request to, pipe.speak,
pipe.transcribe; the same files and one thread, so equal by construction), bad records are
refused in the manifest naming line and field while the rest run, a job killed in the middle
resumes where it was (whole files only), a changed record runs again and nothing else does."""

from __future__ import annotations

import json
import signal
import time
from array import array

import pytest

from conftest import JOB_TIMEOUT_S, VOICE, built, onnxpipe, run

CHATS = [
    {"id": "capital", "messages": [{"role": "user", "content": "The capital of France?"}], "max_tokens": 12,
     "temperature": 0},
    {"messages": [{"role": "user", "content": "A bird?"}], "max_tokens": 10, "temperature": 0.8, "seed": 7,
     "top_k": 20},
    {"prompt": "Once upon a time", "max_tokens": 9, "temperature": 0, "stop": ["zzz"]},
    {"messages": [{"role": "user", "content": "Hi"}], "presence_penalty": 1},
    '{"messages": [',
    {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 10 ** 9},
]


def _pipe(bundle):
    import onnxpipe
    from onnxpipe.backends.native import NativeBackend

    return onnxpipe.load(str(bundle), backend=NativeBackend(threads=1))


def _jsonl(path, lines) -> str:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return str(path)


def _manifest(folder) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def test_generate_records_give_the_pipeline_calls_replies(tmp_path, tiny_bundles):
    from onnxpipe.server.chat import chat_call, completion_call

    bundle = tiny_bundles["tjs_llama"]
    source, out = _jsonl(tmp_path / "asks.jsonl", CHATS), tmp_path / "out"
    code, log = run("batch", "generate", str(bundle), "--input", source, "--output", str(out))
    assert code == 1, log
    pipe = _pipe(bundle)
    for key, body in (("capital", CHATS[0]), ("line-00002", CHATS[1]), ("line-00003", CHATS[2])):
        request = {k: v for k, v in body.items() if k != "id"} | {"model": "x"}
        call = (chat_call if "messages" in body else completion_call)(request)
        pipe.reset()
        result = pipe.chat(call.messages, **call.options) if call.messages else pipe.generate(call.prompt, **call.options)
        got = json.loads((out / f"{key}.json").read_text())
        assert (got["tokens"], got["text"], got["finish_reason"]) == (result.tokens, result.text, result.finish_reason)
    records = _manifest(out)["records"]
    assert records["line-00004"]["error"]["field"] == "presence_penalty"
    assert records["line-00005"]["error"]["message"].startswith("asks.jsonl:5: not JSON")
    assert records["line-00006"]["error"]["field"] == "max_tokens"
    assert {k for k, e in records.items() if e["status"] == "ok"} == {"capital", "line-00002", "line-00003"}
    assert all(e["attempts"] == 1 and not e.get("retried") for e in records.values() if e["status"] == "ok")


def test_a_changed_record_runs_again_and_nothing_else_does(tmp_path, tiny_bundles):
    bundle, out = str(tiny_bundles["tjs_llama"]), tmp_path / "out"
    source = _jsonl(tmp_path / "asks.jsonl", CHATS[:3])
    assert run("batch", "generate", bundle, "--input", source, "--output", str(out))[0] == 0
    stamps = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json") if p.name != "manifest.json"}
    _jsonl(tmp_path / "asks.jsonl", [CHATS[0], {**CHATS[1], "seed": 8}, CHATS[2]])
    code, log = run("batch", "generate", bundle, "--input", source, "--output", str(out))
    assert code == 0 and "2 done before, 0 refused, 1 to run" in log, log
    now = {p.name: p.stat().st_mtime_ns for p in out.glob("*.json") if p.name != "manifest.json"}
    assert [n for n in now if now[n] != stamps[n]] == ["line-00002.json"]
    code, log = run("batch", "speak", str(VOICE), "--input", source, "--output", str(out))
    assert code == 3 and "its manifest.json is another job's (command 'generate'" in log, log


def test_a_job_killed_in_the_middle_resumes_with_whole_files(tmp_path):
    voice = built(VOICE)
    texts = [f"Line {i} of the story, read slowly." for i in range(16)]
    source, out = tmp_path / "story.txt", tmp_path / "out"
    source.write_text("\n".join(texts) + "\n")
    args = ("batch", "speak", str(voice), "--input", str(source), "--output", str(out),
            "--set", "noise_scale=0", "--set", "noise_w=0")
    proc, deadline = onnxpipe(*args), time.monotonic() + JOB_TIMEOUT_S
    while len(list(out.glob("*.wav"))) < 4:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stdout.read()
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)   # no clean-up of any kind
    proc.wait(timeout=30)
    made = len(list(out.glob("*.wav")))
    assert made < len(texts), "the job was stopped before its end"
    code, log = run(*args)
    assert code == 0, log
    before = int(log.split(" done before")[0].rsplit(" ", 1)[1])
    assert before >= 1 and f"{len(texts) - before} to run" in log, log
    pipe = _pipe(voice)
    for i, text in enumerate(texts, 1):
        want = pipe.speak(text, noise_scale=0, noise_w=0).wav()
        assert (out / f"line-{i:05d}.wav").read_bytes() == want, f"line {i}"
    assert not list(out.glob(".*.part")), "the killed job's partial file is swept away"


def test_transcribe_outputs_are_pipe_transcribe_results(tmp_path, tiny_bundles):
    from onnxpipe.audio import decode_wav, encode_wav
    from onnxpipe.cli import _mono_wav

    bundle = tiny_bundles["genai_whisper"]
    samples, rate, _ = decode_wav((bundle / "audio.wav").read_bytes())
    folder = tmp_path / "clips"
    folder.mkdir()
    stereo = array("f", (x for s in samples[:9000] for x in (s, s * 0.5)))
    (folder / "mono.wav").write_bytes(encode_wav(array("f", samples), rate))
    (folder / "stereo.wav").write_bytes(encode_wav(stereo, rate, channels=2))
    (folder / "empty.wav").write_bytes(encode_wav(array("f"), rate))
    code, log = run("batch", "transcribe", str(bundle), "--input", str(folder), "--output", str(tmp_path / "out"))
    assert code == 1, log
    pipe = _pipe(bundle)
    for name in ("mono", "stereo"):
        got = json.loads((tmp_path / "out" / f"{name}.json").read_text())
        clip, clip_rate = _mono_wav(str(folder / f"{name}.wav"), "transcribe")   # as `onnxpipe transcribe` reads it
        want = pipe.transcribe(clip, clip_rate)
        assert (got["text"], got["tokens"]) == (want.text, want.tokens)
        assert got["audio_seconds"] == pytest.approx(len(clip) / rate, abs=1e-6)
    refused = _manifest(tmp_path / "out")["records"]["empty"]["error"]
    assert refused == {"kind": "input", "message": "empty.wav: the WAV file holds no samples"}
