"""Native phonemizer engines: ``ENGINES[name](bundle_dir, spec, warnings) -> engine``.

An engine has ``check(voice)`` (fail early on a bad setup) and
``phonemize(voice, chunks) -> list[str]``: the raw output for each chunk, in the browser
build's shape (clauses on separate lines; ``_`` separators optional). rules.clean() makes
both shapes the same phoneme string.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from ..config.registry import PHONEMIZERS
from ..errors import ConfigError, EngineError

SPEC_PATH = "$.preprocessing.phonemes"
_LINE_LIMIT = 900       # the CLI reads stdin lines into a 1000-byte buffer; longer ones get cut
_SENTINEL = "zqxjq"     # a one-clause word sent between chunks to mark where each one ends
_TIMEOUT_S = 120


def _espeak_data_path(bundle_dir: str, data: str | None, warnings: list[str]) -> str | None:
    """The folder to give `espeak-ng --path` (it wants the PARENT of espeak-ng-data), or None
    for the system data."""
    if not data:
        return None
    folder = os.path.normpath(os.path.join(bundle_dir, data))
    if os.path.isfile(os.path.join(folder, "espeak-ng-data", "phontab")):
        return folder
    if os.path.isfile(os.path.join(folder, "phontab")):
        # espeak-ng takes <path>/espeak-ng-data, else <path> itself
        return os.path.dirname(folder) if os.path.basename(folder) == "espeak-ng-data" else folder
    warnings.append(f"{SPEC_PATH}.data: {folder} is missing or holds no espeak-ng data; using the "
                    "system's espeak-ng data, so phoneme ids may differ from the browser's "
                    "(`node tools/extract_espeak_data.mjs DIR` writes DIR/espeak-ng-data)")
    return None


class EspeakCli:
    """The `espeak-ng` command line (`-q --ipa`): one process per phonemize() call, or one
    per chunk with ``batch=False`` (slower, same output; the tests compare the two)."""

    def __init__(self, data_path: str | None = None, executable: str = "espeak-ng", batch: bool = True):
        found = shutil.which(executable)
        if found is None:
            raise EngineError(f"{SPEC_PATH}.engine \"espeak-ng\": the espeak-ng program is not installed "
                              "(Debian/Ubuntu: apt-get install espeak-ng)")
        self.executable = found
        self.data_path = data_path
        self.batch = batch

    def _command(self, voice: str, *extra: str) -> list[str]:
        path = [f"--path={self.data_path}"] if self.data_path else []
        return [self.executable, *path, "-q", "--ipa", "-v", voice, *extra]

    def _call(self, voice: str, text: str, *extra: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self._command(voice, *extra), input=text, capture_output=True,
                                  encoding="utf-8", errors="replace", timeout=_TIMEOUT_S)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EngineError(f"espeak-ng failed to run: {exc}") from None

    def _run(self, voice: str, text: str, *extra: str) -> str:
        done = self._call(voice, text, *extra)
        if done.returncode != 0:
            raise EngineError(f"espeak-ng -v {voice}: {_detail(done)} ({SPEC_PATH}.voice)")
        return done.stdout

    def check(self, voice: str) -> None:
        """At load: a voice espeak-ng refuses is the config's error (its file and JSON path)."""
        done = self._call(voice, "a", "--stdin")
        if done.returncode != 0:
            raise ConfigError(f'espeak-ng refuses the voice "{voice}": {_detail(done)}', path=f"{SPEC_PATH}.voice")

    def phonemize(self, voice: str, chunks: list[str]) -> list[str]:
        fits = [i for i, c in enumerate(chunks) if self.batch and "\n" not in c
                and len(c.encode("utf-8", "replace")) < _LINE_LIMIT]
        out = dict(zip(fits, self._batch(voice, [chunks[i] for i in fits]) or [])) if fits else {}
        # the rest (too long for a stdin line, or a batch that couldn't be split): one process
        # each; with --stdin the CLI reads its whole input as one text
        return [out[i] if i in out else self._run(voice, c, "--stdin") for i, c in enumerate(chunks)]

    def _batch(self, voice: str, chunks: list[str]) -> list[str] | None:
        """All chunks in one process: without --stdin the CLI synthesizes each input line on its
        own, exactly as one call per chunk would. A sentinel line before and after every chunk
        shows where each chunk's output ends; None if that can't be told apart."""
        lines = [_SENTINEL]
        for chunk in chunks:
            lines += [chunk, _SENTINEL]
        output = self._run(voice, "\n".join(lines) + "\n").split("\n")
        mark = output[0]
        groups: list[list[str]] = []
        current: list[str] = []
        for line in output[1:]:
            if line == mark:
                groups.append(current)
                current = []
            else:
                current.append(line)
        if not mark or current not in ([], [""]) or len(groups) != len(chunks):
            return None
        return ["\n".join(g) for g in groups]


def _detail(done: subprocess.CompletedProcess) -> str:
    return done.stderr.strip() or f"exit status {done.returncode}"


def _espeak_ng(bundle_dir: str, spec, warnings: list[str]) -> EspeakCli:
    return EspeakCli(_espeak_data_path(bundle_dir, spec.data, warnings))


ENGINES = PHONEMIZERS   # the names preprocessing.phonemes.engine takes (config/registry.py)
ENGINES.register("espeak-ng", _espeak_ng)
