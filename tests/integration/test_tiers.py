"""The test layout itself: tests/conftest.py marks each test by its folder and, under `make test`'s pytest-xdist
options, gives the workers whole files (their module fixtures built once) with the units of minutes first.

Each check runs pytest with those options, as the Makefile does, on a small tree of tests that share this conftest
and write down which worker ran them, in what order."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


TESTS = Path(__file__).resolve().parent.parent
XDIST = ["-n", "2", "--dist", "loadgroup", "--no-loadscope-reorder"]  # as the Makefile's `make test`

RECORD = '''
import os, pytest

@pytest.fixture(autouse=True)
def record(request):
    with open(os.environ["RUN_LOG"], "a") as f:
        tiers = [m.name for m in request.node.iter_markers() if m.name in ("unit", "integration", "browser",
                                                                           "notebooks")]
        f.write(f"{os.environ.get('PYTEST_XDIST_WORKER', 'main')} {request.node.nodeid} {','.join(tiers)}\\n")
'''
TREE = {
    # collected first, quick: a file of quick tests, and one file with a test of minutes among quick ones
    "integration/test_quick_file.py": RECORD + "".join(f"\ndef test_q{i}():\n    pass\n" for i in range(4)),
    "integration/test_mixed.py": RECORD + "\n@pytest.mark.slow\ndef test_minutes():\n    pass\n"
                                 + "".join(f"\ndef test_seconds{i}():\n    pass\n" for i in range(3)),
    # a file of minutes (a notebook's shape), collected after the quick ones
    "notebooks/test_walkthrough.py": RECORD.replace("import os, pytest", "import os, pytest\npytestmark = "
                                                    "pytest.mark.slow") + "\ndef test_runs():\n    pass\n",
    "unit/test_unit_file.py": RECORD + "".join(f"\ndef test_u{i}():\n    pass\n" for i in range(5)),
}


def run_pytest(tmp_path: Path, tree: dict[str, str], *options: str) -> str:
    """``tree`` (file name under tests/ -> its text) under this conftest, run by pytest with ``options``; its
    output. The tests may write to the file ``RUN_LOG`` names: ``tmp_path / "run.log"``."""
    root = tmp_path / "tests"
    for name, text in tree.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    shutil.copy(TESTS / "conftest.py", root / "conftest.py")
    shutil.copy(TESTS.parent / "pyproject.toml", tmp_path / "pyproject.toml")  # its markers and pytest options
    env = {**os.environ, "RUN_LOG": str(tmp_path / "run.log")}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def run_tree(tmp_path: Path, *options: str) -> dict[str, list[tuple[str, str]]]:
    """``TREE`` under this conftest, run with ``options``: each worker's tests (node id, tier marks) in the order it
    ran them."""
    run_pytest(tmp_path, TREE, *options)
    log = tmp_path / "run.log"
    workers: dict[str, list[tuple[str, str]]] = {}
    for line in log.read_text().splitlines():
        worker, nodeid, tiers = line.split(" ")
        workers.setdefault(worker, []).append((nodeid.split("@")[0], tiers))
    return workers


def test_each_worker_starts_with_a_unit_of_minutes_and_keeps_a_file_together(tmp_path):
    workers = {w: [nodeid for nodeid, _ in tests] for w, tests in run_tree(tmp_path, *XDIST).items()}
    assert sorted(workers) == ["gw0", "gw1"]
    firsts = sorted(tests[0] for tests in workers.values())
    assert firsts == ["tests/integration/test_mixed.py::test_minutes", "tests/notebooks/test_walkthrough.py::test_runs"]
    where = {nodeid: worker for worker, tests in workers.items() for nodeid in tests}
    assert len(where) == 14  # every test ran once
    for file in ("test_quick_file", "test_unit_file"):
        assert len({w for nodeid, w in where.items() if f"/{file}.py::" in nodeid}) == 1, (file, workers)
    seconds = {w for nodeid, w in where.items() if "::test_seconds" in nodeid}
    assert len(seconds) == 1, workers  # the mixed file's quick tests stay together, without its test of minutes
    for tests in workers.values():  # the quick unit tier last on its worker
        kinds = ["unit" if "/unit/" in t else "other" for t in tests]
        assert kinds == sorted(kinds, key=lambda k: k == "unit"), tests


def test_a_tests_folder_is_its_tier(tmp_path):
    tiers = dict(run_tree(tmp_path)["main"])
    assert len(tiers) == 14
    for nodeid, tier in tiers.items():
        assert tier == nodeid.split("/")[1], (nodeid, tier)  # one tier mark: its folder's


# CPU work counted in CPU time, not wall clock: the same numbers on a busy machine, only later.
BURN = """
import subprocess, sys, time

def burn(seconds):
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass
"""
CPU_TREE = {
    "unit/test_burns.py": BURN + "\ndef test_burns_here():\n    burn(0.6)\n"
                          + "\ndef test_a_subprocess_burns():\n    subprocess.run([sys.executable, '-c', "
                            "'import time\\nend = time.process_time() + 0.6\\nwhile time.process_time() < end: "
                            "pass'], check=True)\n",
    "unit/test_sleeps.py": "import time\n\ndef test_sleeps():\n    time.sleep(0.6)\n",
}


@pytest.mark.parametrize("options", [(), tuple(XDIST)], ids=["one process", "two workers"])
def test_the_run_ends_with_the_cpu_seconds_each_file_used(tmp_path, options):
    """The summary counts a test's own CPU and its subprocesses', from every worker, and not the time it waits."""
    out = run_pytest(tmp_path, CPU_TREE, *options)
    assert "CPU-seconds" in out, out
    per_file = dict((line.split()[-1], float(line.split()[0])) for line in out.splitlines()
                    if line.strip().endswith(".py") and line.split()[0].replace(".", "").isdigit())
    assert set(per_file) == {"tests/unit/test_burns.py", "tests/unit/test_sleeps.py"}, out
    assert per_file["tests/unit/test_burns.py"] >= 1.2, out  # 0.6 here and 0.6 in the subprocess
    assert per_file["tests/unit/test_sleeps.py"] < 0.3, out
    total = float(out.split("the tests used ")[1].split()[0])
    assert abs(total - sum(per_file.values())) <= 1, out
