"""Serving the app from the command line: load the model, build the page, serve it with its queue."""

from __future__ import annotations

import os
from pathlib import Path

import sbd_viz as sv

from .assets import CSS
from .page import build_demo
from .serving import queue


def main(model_path=None, host: str = "127.0.0.1", port: int = 7860, dtype=None, device=None) -> None:
    """Load the model (``dtype`` and ``device`` as ``sv.load_model``'s), build the page, serve it with a queue
    (``queue``: two control moves and one heavy job at a time)."""
    import torch

    # Two decodes run at once on a 2-core machine: one thread each beats two oversubscribed ones.
    torch.set_num_threads(int(os.environ.get("SBD_VIZ_THREADS", max(1, (os.cpu_count() or 2) // 2))))
    model_dir = Path(model_path) if model_path else sv.default_model_path()
    demo = build_demo(sv.load_model(model_dir, dtype=dtype, device=device), model_dir=model_dir)
    queue(demo)
    demo.launch(server_name=host, server_port=port, state_session_capacity=500, css=CSS)
