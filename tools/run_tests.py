"""Every test suite (pytest and the TypeScript typecheck beside the browser tests), then one plain
line that sums them up, `N passed, N failed, N skipped`, so a reader sees at a glance what ran.
The browser test files run one `node --test` each, in two lanes once pytest is done.

    python tools/run_tests.py            # what `make test` runs once everything is built

Each suite runs even when an earlier one failed; the exit status is non-zero when any test
failed or any suite did not finish cleanly (a crash, a collection error, a typecheck error).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTEST_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b")
PYTEST_SUMMARY = re.compile(r"^=*\s*\d+ (passed|failed|skipped|errors?|xfailed|xpassed|deselected)\b.* in [\d.]+s")
NODE_COUNT = re.compile(r"^(?:#|ℹ)\s*(tests|pass|fail|cancelled|skipped|todo)\s+(\d+)\s*$")
SLOWEST = 12   # pytest's slowest tests and the slowest browser files, printed at the end


@dataclass
class Outcome:
    suite: str
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    problems: list[str] = field(default_factory=list)


def run(command: list[str], env: dict | None = None, echo: bool = True) -> tuple[int, list[str]]:
    """Run, echoing every line as it comes (unless ``echo`` is off); return the exit status and
    the lines."""
    print(f"$ {' '.join(command)}", flush=True)
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, encoding="utf-8", errors="replace")
    lines = []
    for line in proc.stdout:
        if echo:
            sys.stdout.write(line)
            sys.stdout.flush()
        lines.append(line.rstrip("\n"))
    return proc.wait(), lines


def pytest_outcome(code: int, lines: list[str]) -> Outcome:
    out = Outcome("pytest")
    summary = next((line for line in reversed(lines) if PYTEST_SUMMARY.match(line.strip())), None)
    if summary is not None:
        for number, word in PYTEST_COUNT.findall(summary):
            n = int(number)
            if word in ("passed", "xpassed"):
                out.passed += n
            elif word in ("failed", "error", "errors"):
                out.failed += n
            elif word in ("skipped", "xfailed"):
                out.skipped += n
    if code not in (0, 1) or (code == 1 and out.failed == 0):
        out.problems.append(f"pytest exited with status {code}" + ("" if summary else " and no summary line"))
    return out


def node_outcome(runs: list[tuple[str, int, list[str]]]) -> Outcome:
    """Sum the summaries of ``node --test`` runs, one per file: (file, exit status, lines)."""
    out = Outcome("browser tests")
    for file, code, lines in runs:
        counts = {}
        for line in lines:
            match = NODE_COUNT.match(line.strip())
            if match:
                counts[match.group(1)] = int(match.group(2))
        failed = counts.get("fail", 0) + counts.get("cancelled", 0)
        out.passed += counts.get("pass", 0)
        out.failed += failed
        out.skipped += counts.get("skipped", 0) + counts.get("todo", 0)
        if not counts:
            out.problems.append(f"node --test {file} printed no summary (status {code})")
        elif code != 0 and failed == 0:
            out.problems.append(f"node --test {file} exited with status {code}")
    return out


class FileQueue:
    """The browser test files, taken one at a time from the front by the browser lane and from
    the back by the Python lane once pytest is done, so both cores stay busy to the end whatever
    this machine's speed (a fixed split would be tuned to one machine)."""

    def __init__(self, files: list[str]):
        self._files = list(files)
        self._lock = threading.Lock()

    def take(self, from_back: bool) -> str | None:
        with self._lock:
            if not self._files:
                return None
            return self._files.pop() if from_back else self._files.pop(0)


def browser_lane(queue: FileQueue, from_back: bool, env: dict, echo: bool,
                 walls: dict[str, float]) -> list[tuple[str, int, list[str]]]:
    """Run ``node --test`` on one file at a time until the queue is empty; each file's wall
    seconds go in ``walls``."""
    runs = []
    while (file := queue.take(from_back)) is not None:
        start = time.perf_counter()
        runs.append((file, *run(["node", "--test", "--test-reporter=spec", file], env=env, echo=echo)))
        walls[file] = time.perf_counter() - start
    return runs


def slowest(walls: dict[str, float], count: int = SLOWEST) -> str:
    """The ``count`` longest entries of ``walls``, one line (where CI's minutes go)."""
    top = sorted(walls.items(), key=lambda item: -item[1])[:count]
    return ", ".join(f"{name} {seconds:.0f} s" for name, seconds in top)


def main() -> int:
    python = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
    env = dict(os.environ, ONNXPIPE_E2E_DIST=os.environ.get("ONNXPIPE_E2E_DIST", "dist"))
    queue = FileQueue(sorted(str(f.relative_to(ROOT)) for f in (ROOT / "tests" / "e2e").glob("*.test.mjs")))
    # pytest and the typecheck run beside the browser tests, which leave a core partly idle
    # (pages waiting on servers, workers starting); then that lane takes browser files too.
    # Its output is printed once it finishes.
    side: dict[str, tuple] = {}
    walls: dict[str, float] = {}

    def python_side() -> None:
        start = time.perf_counter()
        side["pytest"] = run([python, "-m", "pytest", "tests/py", "-q", "-p", "no:cacheprovider",
                              f"--durations={SLOWEST}"], echo=False)
        walls["pytest"] = time.perf_counter() - start
        side["typecheck"] = run(["make", "--no-print-directory", "typecheck"], echo=False)
        side["browser"] = browser_lane(queue, True, env, echo=False, walls=walls)

    thread = threading.Thread(target=python_side)
    thread.start()
    runs = browser_lane(queue, False, env, echo=True, walls=walls)
    thread.join()
    for name in ("pytest", "typecheck"):
        print(f"\n---- {name} ----")
        print("\n".join(side[name][1]), flush=True)
    print("\n---- browser tests, second lane ----")
    for file, _, lines in side["browser"]:
        print(f"$ node --test {file}")
        print("\n".join(lines), flush=True)
    outcomes = [pytest_outcome(*side["pytest"])]
    code = side["typecheck"][0]
    outcomes.append(Outcome("typecheck", problems=[] if code == 0 else [f"typecheck failed (status {code})"]))
    outcomes.append(node_outcome(runs + side["browser"]))
    print(f"\nslowest: {slowest(walls)}")
    print()
    for o in outcomes:
        if o.suite != "typecheck":
            print(f"{o.suite}: {o.passed} passed, {o.failed} failed, {o.skipped} skipped")
        for problem in o.problems:
            print(f"{o.suite}: {problem}")
    passed = sum(o.passed for o in outcomes)
    failed = sum(o.failed for o in outcomes)
    skipped = sum(o.skipped for o in outcomes)
    broken = any(o.problems for o in outcomes)
    print(f"{passed} passed, {failed} failed, {skipped} skipped")
    return 1 if failed or broken else 0


if __name__ == "__main__":
    sys.exit(main())
