"""`onnxpipe batch --ray` on a real local multi-node cluster (a head and two workers, one CPU
each, made here): a few dozen transcriptions (the tiny Whisper fixture) and syntheses (the Piper
voice), and a few chat replies (the tiny Llama), give byte for byte the files the in-process run
gives, with the same per-record errors;
a worker node killed in the middle of a job loses nothing (every output there and the same, the
manifest saying which records ran again); a re-run of a finished job runs nothing.

Exact equality holds by construction: the same files, engine and thread count (1) in both runs,
noise-free speech (noise_scale = noise_w = 0), and outputs that hold nothing timed."""

from __future__ import annotations

import json
import time
from array import array
from pathlib import Path

import pytest

from conftest import JOB_TIMEOUT_S, VOICE, built, onnxpipe, ray_cluster, run
from test_batch_local import CHATS

SENTENCES = ["The cat sat on the mat.", "Rain falls on the hills.", "A ship sails at dawn.",
             "Bread is baked in the morning.", "The river runs to the sea.", "Stars shine over the town."]


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster(head_cpus=1, worker_cpus=[1, 1]) as c:
        yield c


@pytest.fixture(scope="module")
def lines(tmp_path_factory) -> Path:
    """30 utterances to speak, one bad JSON line and one unknown control among them."""
    out = tmp_path_factory.mktemp("speak") / "lines.jsonl"
    records = [json.dumps({"text": f"Record {i}. {SENTENCES[i % len(SENTENCES)]}"}) for i in range(30)]
    records[7] = '{"text": "no closing brace"'
    records[11] = json.dumps({"text": "An unknown control.", "noise_scal": 0.3})
    out.write_text("\n".join(records) + "\n")
    return out


@pytest.fixture(scope="module")
def wavs(tmp_path_factory, tiny_bundles) -> Path:
    """24 WAV files cut from the tiny Whisper fixture's clip (other lengths and gains, two in a
    sub-folder), a file that is not a WAV inside, and a text file beside them."""
    from onnxpipe.audio import decode_wav, encode_wav

    folder = tmp_path_factory.mktemp("wavs")
    clip = tiny_bundles["genai_whisper"] / "audio.wav"
    samples, rate, _ = decode_wav(clip.read_bytes())
    (folder / "more").mkdir()
    for i in range(24):
        start, length, gain = (i * 701) % 8000, 8000 + (i * 977) % 16000, 0.4 + (i % 5) * 0.15
        piece = array("f", (x * gain for x in samples[start:start + length]))
        (folder / ("more" if i >= 22 else "") / f"clip-{i:02d}.wav").write_bytes(encode_wav(piece, rate))
    (folder / "broken.wav").write_bytes(b"ID3 an mp3 named .wav")
    (folder / "notes.txt").write_text("not audio")
    return folder


@pytest.fixture(scope="module")
def whisper(tiny_bundles) -> Path:
    return tiny_bundles["genai_whisper"]


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != "manifest.json" and not p.name.startswith(".")}


def _manifest(folder: Path) -> dict:
    return json.loads((folder / "manifest.json").read_text())


def _statuses(manifest: dict) -> dict[str, tuple]:
    return {k: (e["status"], e.get("error", {}).get("message")) for k, e in manifest["records"].items()}


def _job(command: str, bundle: Path, source: Path, out: Path, *extra: str) -> tuple[int, str]:
    speak = ["--set", "noise_scale=0", "--set", "noise_w=0"] if command == "speak" else []
    return run("batch", command, str(bundle), "--input", str(source), "--output", str(out), *speak, *extra)


@pytest.fixture(scope="module")
def local_speech(lines, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("speak-local")
    code, log = _job("speak", built(VOICE), lines, out)
    assert code == 1, log   # two records refused: the job says so, and goes on
    return out


@pytest.fixture(scope="module")
def local_text(wavs, whisper, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("transcribe-local")
    code, log = _job("transcribe", whisper, wavs, out)
    assert code == 1, log   # broken.wav
    return out


def test_transcription_on_ray_equals_in_process(cluster, wavs, whisper, local_text, tmp_path):
    out = tmp_path / "ray"
    code, log = _job("transcribe", whisper, wavs, out, "--ray", "--address", cluster.address, "--concurrency", "2")
    assert code == 1, log
    assert len(_files(local_text)) == 24 and _files(out) == _files(local_text)
    manifest = _manifest(out)
    assert _statuses(manifest) == _statuses(_manifest(local_text))
    assert "broken.wav: not a WAV file" in manifest["records"]["broken"]["error"]["message"]
    assert "1 file(s)" in log and "not .wav: left out" in log
    nodes = {e["where"].split(" node ")[1] for e in manifest["records"].values() if e["status"] == "ok"}
    assert len(nodes) == 2, f"the pool's two actors ran on two nodes: {nodes}"


def test_synthesis_on_ray_equals_in_process_and_a_rerun_does_nothing(cluster, lines, local_speech, tmp_path):
    out = tmp_path / "ray"
    args = ("--ray", "--address", cluster.address, "--concurrency", "2")
    code, log = _job("speak", VOICE, lines, out, *args)
    assert code == 1, log
    assert len(_files(local_speech)) == 28 and _files(out) == _files(local_speech)
    manifest = _manifest(out)
    assert _statuses(manifest) == _statuses(_manifest(local_speech))
    refused = manifest["records"]["line-00012"]["error"]
    assert refused["field"] == "noise_scal" and refused["message"].startswith("lines.jsonl:12: unknown control")
    assert manifest["records"]["line-00008"]["error"]["message"].startswith("lines.jsonl:8: not JSON")

    stamps = {p: p.stat().st_mtime_ns for p in out.glob("*.wav")}
    code, log = _job("speak", VOICE, lines, out, *args)
    assert code == 1 and "28 done before, 2 refused, 0 to run" in log, log
    assert {p: p.stat().st_mtime_ns for p in out.glob("*.wav")} == stamps, "no output is written again"


def test_generation_on_ray_equals_in_process(cluster, tiny_bundles, tmp_path):
    bundle = str(tiny_bundles["tjs_llama"])
    source = tmp_path / "asks.jsonl"
    source.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in CHATS) + "\n")
    local, on_ray = tmp_path / "local", tmp_path / "ray"
    assert run("batch", "generate", bundle, "--input", str(source), "--output", str(local))[0] == 1
    code, log = run("batch", "generate", bundle, "--input", str(source), "--output", str(on_ray), "--ray",
                    "--address", cluster.address, "--concurrency", "2")
    assert code == 1, log
    assert len(_files(local)) == 3 and _files(on_ray) == _files(local)
    assert _statuses(_manifest(on_ray)) == _statuses(_manifest(local))


def test_a_worker_node_killed_mid_job_loses_nothing(cluster, lines, local_speech, tmp_path):
    out = tmp_path / "ray"
    proc = onnxpipe("batch", "speak", str(VOICE), "--input", str(lines), "--output", str(out), "--set",
                    "noise_scale=0", "--set", "noise_w=0", "--ray", "--address", cluster.address, "--concurrency", "2")
    workers = {node.node_id[:12]: node for node in cluster.worker_nodes}
    log, killed, deadline = [], None, time.monotonic() + JOB_TIMEOUT_S
    for line in proc.stdout:
        log.append(line)
        done = [x for x in log if x.startswith("[") and " ok (" in x]
        busy = [n for n in workers if any(f" node {n}" in x for x in done)]
        if killed is None and len(done) >= 6 and busy:
            killed = busy[0]
            cluster.remove_node(workers[killed], allow_graceful=False)   # its raylet and every worker on it
        assert time.monotonic() < deadline, "".join(log)
    assert proc.wait(timeout=60) == 1, "".join(log)
    text = "".join(log)
    assert killed is not None, text
    assert _files(out) == _files(local_speech), text
    manifest = _manifest(out)
    assert _statuses(manifest) == _statuses(_manifest(local_speech))
    retried = {k: e["attempts"] for k, e in manifest["records"].items() if e.get("retried")}
    assert retried and all(n >= 2 for n in retried.values()), text
    assert manifest["summary"]["retried"] == len(retried)
    after = {k for k, e in manifest["records"].items() if e["status"] == "ok" and f" node {killed}" not in e["where"]}
    assert set(retried) <= after, "a retried record finished on a node that lived"
    cluster.add_node(num_cpus=1)   # the cluster as it was, for whatever runs next


def test_a_bundle_the_actors_cannot_load_stops_the_job_with_its_error(cluster, tmp_path):
    bad = tmp_path / "voice"
    bad.mkdir()
    for name in ("pipeline.json", "en_US-joe-medium.onnx.json"):
        (bad / name).write_bytes((built(VOICE) / name).read_bytes())
    for name in ("en_US-joe-medium.onnx", "en_US-joe-medium.wasm.onnx"):
        (bad / name).write_bytes(b"not a model")
    (tmp_path / "lines.txt").write_text("Hello.\n")
    code, log = run("batch", "speak", str(bad), "--input", str(tmp_path / "lines.txt"), "--output",
                    str(tmp_path / "out"), "--ray", "--address", cluster.address)
    assert code == 4, log
    assert log.rstrip().splitlines()[-1].startswith(
        'onnxpipe batch: error (engine): the Ray Data job stopped: its actors could not load the bundle: '
        'onnxpipe.errors.EngineError: session "voice": onnxruntime could not open'), log
