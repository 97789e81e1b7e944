"""sbd_viz as an lm-evaluation-harness model: ``--model sbd_viz`` runs any generation task through the one door.

Importing this package registers the model ``sbd_viz`` in lm-eval's model registry (lm-eval 0.4.13 reads no entry
point for models, so registration on import is how a third-party model joins it); ``TASKS`` is the folder of the
shipped task YAMLs (``--include_path``). lm-eval is the optional extra ``pip install "sbd-viz[eval]"``.
How to run it, and what the results and samples carry: docs/measure_and_export.md.
"""

from __future__ import annotations

from pathlib import Path

try:
    from lm_eval.api.registry import model_registry
except ImportError as error:  # the extra is not installed
    raise ImportError(
        'sbd_viz.harness needs lm-evaluation-harness: pip install "sbd-viz[eval]" (lm-eval==0.4.13)'
    ) from error

MODEL_NAME = "sbd_viz"
TASKS = Path(__file__).resolve().parent / "tasks"  # the shipped tasks: sbd_asserts, sbd_lists, sbd_humaneval


def register() -> None:
    """Register ``sbd_viz`` in lm-eval's model registry, lazily (the class and torch load at the first look-up);
    a second call, or a registration already materialised, is left as it is."""
    # lm-eval fills its registry with its own models only while the registry is empty: they go in first, so that
    # registering ours does not hide them (``hf`` among them)
    import lm_eval.models  # noqa: F401

    if MODEL_NAME not in model_registry:
        model_registry.register(MODEL_NAME, target="sbd_viz.harness.lm:SBDVizLM")


register()
