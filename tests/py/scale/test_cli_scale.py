"""The scale-out flags as a user types them: every bad combination is refused before anything
starts, naming the flag, what was expected and what was found; `--ray` without Ray installed
says how to install it; importing onnxpipe (its CLI, its server) never imports Ray, and an
in-process batch job runs without it; `serve --threads N` loads every session on N threads."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ENV, ROOT, VOICE, built, run

NO_RAY = "import sys; sys.modules['ray'] = None; from onnxpipe.cli import main; sys.exit(main(sys.argv[1:]))"


@pytest.mark.parametrize("args, says", [
    (["--ray", "--replicas", "2", "--autoscale", "1:2"],
     "--replicas 2 and --autoscale 1:2: give one (a fixed count, or MIN:MAX to autoscale), found both"),
    (["--address", "127.0.0.1:6379"], "--address: only with --ray"),
    (["--replicas", "2"], "--replicas: only with --ray"),
    (["--autoscale", "1:2"], "--autoscale: only with --ray"),
    (["--ray", "--autoscale", "3:1"], "--autoscale: expected MIN:MAX, two integers with 1 <= MIN <= MAX (e.g. 1:4), "
                                      "found '3:1'"),
    (["--ray", "--autoscale", "two"], "--autoscale: expected MIN:MAX"),
    (["--ray", "--replicas", "0"], "--replicas: expected an integer >= 1, found 0"),
    (["--threads", "0"], "--threads: expected an integer >= 1, found 0"),
    (["--ray", "--replicas", "64"], "--replicas 64 x --threads 1 needs 64 CPUs; this machine has"),
])
def test_serve_flags_are_refused(args, says):
    code, out = run("serve", str(VOICE), *args)
    assert code == 3 and says in out, out


@pytest.mark.parametrize("args, says", [
    (["--address", "auto"], "--address: only with --ray (in process one pipeline runs the records in turn); "
                            "found --address auto without --ray"),
    (["--concurrency", "2"], "--concurrency: only with --ray"),
    (["--ray", "--concurrency", "0"], "--concurrency: expected an integer >= 1, found 0"),
    (["--threads", "0"], "--threads: expected an integer >= 1, found 0"),
    (["--ray", "--concurrency", "64"], "--concurrency 64 x --threads 1 needs 64 CPUs; this machine has"),
])
def test_batch_flags_are_refused(args, says, tmp_path):
    (tmp_path / "lines.txt").write_text("Hello.\n")
    code, out = run("batch", "speak", str(VOICE), "--input", str(tmp_path / "lines.txt"), "--output",
                    str(tmp_path / "out"), *args)
    assert code == 3 and says in out, out
    assert not (tmp_path / "out").exists(), "nothing ran"


def test_batch_refuses_a_bundle_of_another_kind_and_a_missing_input(tmp_path, tiny_bundles):
    whisper = str(tiny_bundles["genai_whisper"])
    (tmp_path / "lines.txt").write_text("Hello.\n")
    code, out = run("batch", "speak", whisper, "--input", str(tmp_path / "lines.txt"), "--output", str(tmp_path / "o"))
    assert code == 3 and "batch speak takes a speech bundle; this one is a transcription bundle" in out, out
    code, out = run("batch", "transcribe", whisper, "--input", str(tmp_path / "lines.txt"), "--output",
                    str(tmp_path / "o"))
    assert code == 3 and "transcribe reads a folder of WAV files, found a file" in out, out
    code, out = run("batch", "transcribe", whisper, "--input", str(tmp_path), "--output", str(tmp_path / "o"),
                    "--set", "noise_scale=0")
    assert code == 3 and "--set: voice controls are for batch speak, found batch transcribe" in out, out


@pytest.mark.parametrize("command", [["serve", str(VOICE), "--ray"],
                                     ["batch", "speak", str(VOICE), "--input", "x.txt", "--output", "o", "--ray"]])
def test_ray_missing_says_how_to_install_it(command):
    proc = subprocess.run([sys.executable, "-c", NO_RAY, *command], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 3, proc.stderr
    assert "--ray: needs Ray, which is not installed here (ray is missing): pip install 'onnxpipe[ray]'" in proc.stderr


def test_onnxpipe_never_imports_ray_and_batches_without_it(tmp_path):
    check = ("import sys; import onnxpipe, onnxpipe.cli, onnxpipe.server.app, onnxpipe.scale.batch_job; "
             "onnxpipe.cli.build_parser(); print(sorted(m for m in sys.modules if m == 'ray' or m.startswith('ray.')))")
    proc = subprocess.run([sys.executable, "-c", check], cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip() == "[]", proc.stdout + proc.stderr
    (tmp_path / "lines.txt").write_text("Hello there.\n")
    proc = subprocess.run([sys.executable, "-c", NO_RAY, "batch", "speak", str(built(VOICE)), "--input",
                           str(tmp_path / "lines.txt"), "--output", str(tmp_path / "out")],
                          cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and (tmp_path / "out" / "line-00001.wav").stat().st_size > 44, proc.stderr


def test_serve_threads_loads_every_session_on_that_many_threads(tiny_bundles):
    from onnxpipe.server.app import loader

    pipe = loader(1)(str(tiny_bundles["tjs_llama"]))
    assert pipe.sessions and all(s.ort_session.get_session_options().intra_op_num_threads == 1
                                 for s in pipe.sessions.values())
