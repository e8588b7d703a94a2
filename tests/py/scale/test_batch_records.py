"""scale/batch_records.py and batch_manifest.py on their own: what a record is made of, every line
refused naming its file, line and field (and the rest kept), the digest that decides "changed",
the manifest's atomic writes and what it counts as done."""

from __future__ import annotations

import json
import os

import pytest

from onnxpipe.errors import InputError
from onnxpipe.scale.batch_manifest import FILE, Manifest, write_atomic
from onnxpipe.scale.batch_records import read_records


def _write(tmp_path, name: str, lines: list) -> str:
    path = tmp_path / name
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return str(path)


def test_speak_text_lines_are_utterances_numbered_by_line(tmp_path):
    records = read_records("speak", _write(tmp_path, "a.txt", ["One.", "", "  Two.  ", '{"text": "as words"}']),
                           "voice", {"noise_scale": 0})
    assert [(r.key, r.source, r.payload) for r in records] == [
        ("line-00001", "a.txt:1", {"text": "One.", "controls": {"noise_scale": 0}}),
        ("line-00003", "a.txt:3", {"text": "Two.", "controls": {"noise_scale": 0}}),
        ("line-00004", "a.txt:4", {"text": '{"text": "as words"}', "controls": {"noise_scale": 0}})]


def test_speak_jsonl_records_and_their_refusals(tmp_path):
    path = _write(tmp_path, "a.jsonl", [
        {"text": "Hi.", "id": "greeting", "noise_scale": 0.5},
        "not json",
        ["a", "list"],
        {"text": ""},
        {"text": "Again.", "id": "greeting"},
        {"text": "Bad id.", "id": "../up"},
        {"text": "Reserved.", "id": "manifest"},
        {"text": "Fine."},
    ])
    records = read_records("speak", path, "voice", {"noise_scale": 0, "noise_w": 0})
    by_source = {r.source: r for r in records}
    assert by_source["a.jsonl:1"].key == "greeting" and by_source["a.jsonl:1"].payload == \
        {"text": "Hi.", "controls": {"noise_scale": 0.5, "noise_w": 0}}   # the record's own value wins
    assert by_source["a.jsonl:2"].error.startswith("a.jsonl:2: not JSON: Expecting value")
    assert by_source["a.jsonl:3"].error == "a.jsonl:3: expected a JSON object, found list"
    assert (by_source["a.jsonl:4"].error, by_source["a.jsonl:4"].field) == \
        ("a.jsonl:4: text: expected the words to speak, found ''", "text")
    assert by_source["a.jsonl:5"].error == "a.jsonl:5: id: 'greeting' is also a.jsonl:1's"
    assert by_source["a.jsonl:6"].error.startswith("a.jsonl:6: id: expected letters, digits")
    assert by_source["a.jsonl:7"].error.startswith("a.jsonl:7: id: names the job's own manifest")
    assert by_source["a.jsonl:8"].error is None and by_source["a.jsonl:8"].key == "line-00008"
    assert len({r.key for r in records}) == len(records), "every record has a key of its own"


def test_generate_records_are_checked_as_the_server_checks_requests(tmp_path):
    path = _write(tmp_path, "g.jsonl", [
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0},
        {"prompt": "Once upon a time", "seed": 3, "temperature": 0.7},
        {"messages": [{"role": "user", "content": "Hi"}], "logprobs": True},
        {"messages": [{"role": "wizard", "content": "Hi"}]},
        {"messages": [{"role": "user", "content": "Hi"}], "stream": True},
        {"messages": [{"role": "user", "content": "Hi"}], "model": "another"},
        {"prompt": "x", "messages": [{"role": "user", "content": "Hi"}]},
        {"messages": [{"role": "user", "content": "Hi"}], "temperature": 5},
    ])
    r = {x.source: x for x in read_records("generate", path, "tiny")}
    assert r["g.jsonl:1"].error is None and r["g.jsonl:1"].payload["model"] == "tiny"
    assert r["g.jsonl:2"].error is None
    assert (r["g.jsonl:3"].field, r["g.jsonl:3"].error.split(" (")[0]) == \
        ("logprobs", "g.jsonl:3: logprobs: not supported by onnxpipe's chat completions")
    assert r["g.jsonl:4"].field == "messages[0].role"
    assert r["g.jsonl:5"].error == "g.jsonl:5: stream: a batch job writes each reply whole; leave it out"
    assert r["g.jsonl:6"].field == "model" and "this job runs 'tiny', found 'another'" in r["g.jsonl:6"].error
    assert "either messages (a chat) or prompt" in r["g.jsonl:7"].error
    assert (r["g.jsonl:8"].field, r["g.jsonl:8"].error) == \
        ("temperature", "g.jsonl:8: temperature: expected a number from 0 to 2, found 5")


def test_wav_records_come_from_a_folder_tree_and_change_with_the_file(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "b.wav").write_bytes(b"x")
    (tmp_path / "sub" / "a.WAV").write_bytes(b"y")
    (tmp_path / "readme.txt").write_text("-")
    records = read_records("transcribe", str(tmp_path), "asr")
    assert [(r.key, r.source) for r in records] == [("b", "b.wav"), ("sub/a", "sub/a.WAV")]
    before = records[0].digest
    (tmp_path / "b.wav").write_bytes(b"xx")
    assert read_records("transcribe", str(tmp_path), "asr")[0].digest != before
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no .wav file in that folder"):
        read_records("transcribe", str(tmp_path / "empty"), "asr")


def test_inputs_that_are_not_there_or_not_text_are_refused(tmp_path):
    with pytest.raises(InputError, match=r"--input .*nope.txt: expected a text or JSONL file, found nothing there"):
        read_records("speak", str(tmp_path / "nope.txt"), "v")
    (tmp_path / "bin.txt").write_bytes(b"\xff\xfe\x00")
    with pytest.raises(InputError, match="not UTF-8 text"):
        read_records("speak", str(tmp_path / "bin.txt"), "v")


JOB = {"command": "speak", "bundle": "/b", "input": "/i"}


def test_manifest_done_means_ok_with_its_output_or_refused_for_the_same_input(tmp_path):
    records = read_records("speak", _write(tmp_path, "a.txt", ["One.", "Two.", "Three."]), "v")
    out = tmp_path / "out"
    manifest = Manifest.open(str(out), JOB)
    write_atomic(str(out / "line-00001.wav"), b"RIFF")
    manifest.put("line-00001", {"digest": records[0].digest, "status": "ok", "output": "line-00001.wav"})
    manifest.put("line-00002", {"digest": records[1].digest, "status": "error", "error": {"kind": "input"}})
    manifest.put("line-00003", {"digest": records[2].digest, "status": "error", "error": {"kind": "engine"}})
    manifest.save()
    manifest.close()
    again = Manifest.open(str(out), JOB)
    assert [again.done(r) for r in records] == [True, True, False]   # an engine failure runs again
    os.unlink(out / "line-00001.wav")
    assert not again.done(records[0]), "an output that went missing is made again"
    changed = read_records("speak", _write(tmp_path, "a.txt", ["One!", "Two.", "Three."]), "v")
    assert not again.done(changed[0]) and again.done(changed[1])
    assert json.loads((out / FILE).read_text())["summary"] == {"ok": 1, "error": 2, "retried": 0}
    assert not list(out.glob(".*.part")), "no temporary file left behind"
    again.close()


def test_one_job_at_a_time_writes_a_folder_and_a_killed_ones_partial_files_are_swept(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / ".x1.part").write_bytes(b"half a wav")
    first = Manifest.open(str(tmp_path), JOB)
    assert not (tmp_path / "sub" / ".x1.part").exists()
    with pytest.raises(InputError, match=rf"another batch job \(pid {os.getpid()}\) is writing there"):
        Manifest.open(str(tmp_path), JOB)
    first.close()
    Manifest.open(str(tmp_path), JOB).close()


def test_a_manifest_of_another_job_or_a_broken_one_is_refused(tmp_path):
    Manifest(str(tmp_path), JOB).save()
    with pytest.raises(InputError, match=r"its manifest.json is another job's \(bundle '/b', this job's '/c'\)"):
        Manifest.open(str(tmp_path), {**JOB, "bundle": "/c"})
    (tmp_path / FILE).write_text("{")
    with pytest.raises(InputError, match="manifest.json cannot be read"):
        Manifest.open(str(tmp_path), JOB)
