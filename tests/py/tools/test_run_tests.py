"""tools/run_tests.py: the two lanes share the browser test files, and the summary adds up every
file's own `node --test` summary."""

import importlib.util
import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("run_tests", ROOT / "tools" / "run_tests.py")
run_tests = importlib.util.module_from_spec(spec)
sys.modules["run_tests"] = run_tests  # its dataclass looks its module up there
spec.loader.exec_module(run_tests)


def summary(tests, passed, failed):
    return ["✔ something (1ms)", f"ℹ tests {tests}", f"ℹ pass {passed}", f"ℹ fail {failed}",
            "ℹ cancelled 0", "ℹ skipped 0", "ℹ todo 0"]


def test_the_lanes_take_from_either_end_and_every_file_runs_once():
    queue = run_tests.FileQueue(["a", "b", "c", "d"])
    assert queue.take(from_back=False) == "a"
    assert queue.take(from_back=True) == "d"
    files = [f"f{i}" for i in range(2000)]
    queue, taken = run_tests.FileQueue(files), []

    def lane(from_back):
        while (f := queue.take(from_back)) is not None:
            taken.append(f)

    lanes = [threading.Thread(target=lane, args=(back,)) for back in (False, True)]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    assert sorted(taken) == sorted(files)


def test_the_summary_adds_up_each_file_and_names_a_file_that_printed_none():
    out = run_tests.node_outcome([("a.test.mjs", 0, summary(3, 3, 0)), ("b.test.mjs", 1, summary(2, 1, 1))])
    assert (out.passed, out.failed, out.problems) == (4, 1, [])
    out = run_tests.node_outcome([("a.test.mjs", 0, summary(3, 3, 0)), ("c.test.mjs", 1, ["SyntaxError: x"])])
    assert out.passed == 3
    assert out.problems == ["node --test c.test.mjs printed no summary (status 1)"]
    out = run_tests.node_outcome([("d.test.mjs", 7, summary(1, 1, 0))])
    assert out.problems == ["node --test d.test.mjs exited with status 7"]


def test_the_slowest_line_names_the_longest_first_and_no_more_than_asked():
    walls = {"a.test.mjs": 12.4, "pytest": 300.0, "b.test.mjs": 95.6, "c.test.mjs": 1.0}
    assert run_tests.slowest(walls, count=2) == "pytest 300 s, b.test.mjs 96 s"
    assert run_tests.slowest({}) == ""
