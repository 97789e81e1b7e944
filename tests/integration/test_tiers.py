"""The test layout itself: tests/conftest.py marks each test by its folder and, under `make test`'s pytest-xdist
options, gives the workers whole files (their module fixtures built once) with the units of minutes first.

Each check runs pytest with those options, as the Makefile does, on a small tree of tests that share this conftest
and write down which worker ran them, in what order."""

import os
import shutil
import subprocess
import sys
from pathlib import Path


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


def run_tree(tmp_path: Path, *options: str) -> dict[str, list[tuple[str, str]]]:
    """The tree under this conftest, run with ``options``: each worker's tests (node id, tier marks) in the order it
    ran them."""
    root = tmp_path / "tests"
    for name, text in TREE.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    shutil.copy(TESTS / "conftest.py", root / "conftest.py")
    shutil.copy(TESTS.parent / "pyproject.toml", tmp_path / "pyproject.toml")  # its markers and pytest options
    log = tmp_path / "run.log"
    env = {**os.environ, "RUN_LOG": str(log)}
    env.pop("PYTEST_XDIST_WORKER", None)
    env.pop("PYTEST_ADDOPTS", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *options, "tests"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
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
