"""The notebooks run top to bottom on the shipped model.

Each notebook is executed with ``nbclient`` in the ``python3`` kernel of the interpreter running the
tests (jupyter_client swaps the kernelspec's ``python`` for ``sys.executable``; the first test checks
it), in a fresh temporary folder, so sweep caches start empty and nothing is written into the repo.

No wall-clock bound decides these tests (no cell timeout either): a machine busy with other work
runs them slower, not wrongly. Each test prints its time; the README's "under three minutes" is
measured on an idle machine by ``python docs/render_notebooks.py``, which prints each notebook's time.
"""

import re
import sys
import time
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from test_walkthroughs import assert_executed_notebook_shows_its_numbers, executed_outputs
from walkthrough_claims import contradicted

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# Smaller runs of the walkthroughs whose full size takes minutes, injected after the cell tagged "parameters" (as
# papermill injects them); every cell still runs. The rendered pages (docs/notebooks) are the full-size runs. A
# fixed step count, no time budget: what the test reads must not depend on how many steps fit in a minute.
# One item of each task family: every cell, number and prose check still runs (the suite's families are all there),
# at half the decodes of two a family (five notebooks: 293 worker-seconds of the test run, 154 at one).
PARAMETERS = {"02_gamma_tradeoff": {"PER_FAMILY": 1, "REPEATS": 1},
              "03_gap_fill_failures": {"PER_FAMILY": 1},
              "04_train_your_own": {"MAX_STEPS": 10, "TIME_BUDGET_MIN": 0.0, "PER_FAMILY": 1},
              "05_verified_sbd": {"PER_FAMILY": 1, "REPEATS": 1},
              "06_parallel_decoders": {"PER_FAMILY": 1},
              "08_real_text_sbd": {"MAX_NEW": 16}}


def inject(nb, values: dict) -> None:
    """Insert a cell setting ``values`` after ``nb``'s cell tagged "parameters", which must assign each of them."""
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"one cell tagged 'parameters', found {len(tagged)}"
    source = nb.cells[tagged[0]].source
    for name in values:
        assert re.search(rf"^(\w+, )*{name}\b.*=", source, re.MULTILINE), f"the parameters cell sets no {name}"
    cell = nbformat.v4.new_code_cell("\n".join(f"{k} = {v!r}" for k, v in values.items()))
    cell.metadata["tags"] = ["injected-parameters"]
    nb.cells.insert(tagged[0] + 1, cell)


def run(nb, folder: Path, timeout: int | None = None) -> float:
    """Execute ``nb`` in place (kernel started in ``folder``); returns the seconds it took, kernel start included."""
    client = NotebookClient(nb, timeout=timeout, startup_timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}})
    start = time.perf_counter()
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails
    return time.perf_counter() - start


def test_there_are_eight_notebooks_saved_without_outputs():
    assert [p.name for p in NOTEBOOKS] == ["01_what_is_sbd.ipynb", "02_gamma_tradeoff.ipynb",
                                           "03_gap_fill_failures.ipynb", "04_train_your_own.ipynb",
                                           "05_verified_sbd.ipynb", "06_parallel_decoders.ipynb",
                                           "07_real_lm.ipynb", "08_real_text_sbd.ipynb"]
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.cells[0].cell_type == "markdown", f"{path.name}: a tutorial starts with prose"
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), f"{path.name}: clear the outputs"
        # a shipped model (the character model, or the SBD adapter on SmolLM2), never a path: the notebooks must
        # run wherever the package is installed
        assert any("sv.load_model()" in c.source or 'sv.load_model("smollm2-135m-sbd")' in c.source
                   for c in code), path.name


@pytest.mark.heavy
def test_injected_parameters_replace_the_notebooks_own(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("A, B = 1, 2\nC = 3"),
                                         nbformat.v4.new_code_cell("print(A, B, C)")])
    nb.cells[0].metadata["tags"] = ["parameters"]
    inject(nb, {"B": 20, "C": 30})
    run(nb, tmp_path)
    assert nb.cells[-1].outputs[0]["text"].strip() == "1 20 30"
    with pytest.raises(AssertionError, match="sets no D"):
        inject(nb, {"D": 4})


@pytest.mark.heavy
def test_the_kernel_is_this_python(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import sys; print(sys.executable)")])
    run(nb, tmp_path)
    assert nb.cells[0].outputs[0]["text"].strip() == sys.executable


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs(path, tmp_path):
    nb = nbformat.read(path, as_version=4)
    if path.stem in PARAMETERS:
        inject(nb, PARAMETERS[path.stem])
    seconds = run(nb, tmp_path)
    print(f"{path.name}: {seconds:.0f} s")
    assert_executed_notebook_shows_its_numbers(nb)  # the numbers its prose marks as shown are in its outputs
    assert not contradicted(path.stem, executed_outputs(nb))  # nor do its outputs contradict its fixed prose
