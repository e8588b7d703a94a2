"""Every command and Python snippet in README.md, run as a newcomer types them, in order, in one
fresh folder (later commands read the WAV files earlier ones wrote).

Each must exit 0 within a generous ceiling: this catches a command that runs for minutes (the
demo bundle writing until its 8,192-token context was full), not a speed regression. A few
outputs are checked too (the France question answered and ended by the model, the WAV heard).
`make` lines and the venv activation are the only lines not run: make demo and make test are
what runs this test, and the activation is the PATH given here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
NATIVE_CEILING_S = 90
BROWSER_CEILING_S = 300
SNIPPET_CEILING_S = 180
# lines in shell blocks that are not run, by their first word (see the module docstring)
NOT_RUN = {"make", "."}
RUN = {"python", "node", "echo"}
STDIN = "What is the capital of France?\n/quit\n"   # what the terminal chat is told
BUNDLES = ["smollm2-135m-instruct", "piper-en-us-joe", "kokoro-82m", "silero-vad", "whisper-base"]


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of each fenced block in README.md."""
    return re.findall(r"^```(\w*)\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S)


def shell_lines() -> list[str]:
    lines = []
    for lang, text in readme_blocks():
        if lang in ("", "sh", "bash"):
            lines += [line.strip() for line in text.splitlines() if line.strip() and not line.strip().startswith("#")]
    return lines


COMMANDS = [line for line in shell_lines() if line.split()[0] in RUN]
SNIPPETS = [text for lang, text in readme_blocks() if lang == "python"]

pytestmark = pytest.mark.skipif(
    not all((ROOT / "public" / "models" / b / "manifest.json").exists() for b in BUNDLES),
    reason="run `make models` first (make test does)")


def test_every_shell_line_is_run_or_known():
    others = sorted({line.split()[0] for line in shell_lines()} - RUN - NOT_RUN)
    assert not others, f"README shell lines this test would not run: {others}"
    assert len(COMMANDS) >= 15 and len(SNIPPETS) >= 1


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A fresh folder that sees the repository's models and scripts where the README says."""
    folder = tmp_path_factory.mktemp("readme")
    for name in ("public", "tests"):
        (folder / name).symlink_to(ROOT / name)
    return folder


def environment() -> dict:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("PYTHONPATH", None)   # the venv's editable install, as after `. .venv/bin/activate`
    dist = ROOT / "dist"
    if (dist / "index.html").exists():
        env.setdefault("ONNXPIPE_E2E_DIST", str(dist))
    return env


def run(command: str, cwd: Path, ceiling: float, stdin: str = STDIN) -> subprocess.CompletedProcess:
    start = time.monotonic()
    try:
        done = subprocess.run(["bash", "-c", command], cwd=cwd, env=environment(), input=stdin,
                              capture_output=True, text=True, timeout=ceiling)
    except subprocess.TimeoutExpired:
        pytest.fail(f"README command still running after {ceiling} s: {command}")
    took = time.monotonic() - start
    assert done.returncode == 0, f"{command}\nexit {done.returncode}\n{done.stderr[-3000:]}"
    print(f"{took:.1f} s: {command}")
    return done


def check_output(command: str, out: str, cwd: Path) -> None:
    """What a newcomer would look at in a few of the outputs."""
    if "--chat" in command or " chat " in command:
        assert "Paris" in out, out[-2000:]
    if "--chat" in command and "--json" in command:
        result = json.loads(out)
        assert result["finish_reason"] == "stop", result   # the model ended its answer itself
    if "--sample" in command:
        assert out.strip()
    if " --out " in command:
        wav = cwd / command.split(" --out ")[1].split()[0]
        assert wav.stat().st_size > 10_000 and wav.read_bytes()[:4] == b"RIFF", wav
    if " transcribe " in command or ("whisper-base" in command and "--audio" in command):
        assert "hello there" in json.loads(out)["text"].lower(), out


@pytest.mark.parametrize("command", COMMANDS, ids=[f"cmd{i:02d}" for i in range(len(COMMANDS))])
def test_readme_command(command, workdir):
    browser = command.startswith("node ")
    if browser and (shutil.which("node") is None or not Path("/usr/bin/chromium").exists()):
        pytest.skip("node and Debian chromium are needed (make test installs them)")
    done = run(command, workdir, BROWSER_CEILING_S if browser else NATIVE_CEILING_S)
    check_output(command, done.stdout, workdir)


@pytest.mark.parametrize("snippet", SNIPPETS, ids=[f"python{i}" for i in range(len(SNIPPETS))])
def test_readme_python_snippet(snippet, workdir):
    (workdir / "snippet.py").write_text(snippet, encoding="utf-8")
    done = run("python snippet.py", workdir, SNIPPET_CEILING_S, stdin="")
    assert "Paris" in done.stdout
    assert (workdir / "speech.wav").stat().st_size > 10_000
    assert "close the window" in done.stdout.lower()   # Whisper heard what Piper said
