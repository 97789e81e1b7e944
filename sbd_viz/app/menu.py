"""The model menu: one app serving several models, each on a page of its own (``m/<name>/``), loaded when it is
first asked for. ``Menu`` holds the models and their state; ``asgi_app`` is the server's application: ``/`` opens the
first model that loads (or says it is loading), each page is the model's own Gradio app, and a page of a model still
loading says so and looks again every two seconds. How and why: docs/app_internals.md ("The model menu").
"""

from __future__ import annotations

import contextlib
import html
import logging
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any

LOG = logging.getLogger("sbd_viz.app")
REFRESH = 2  # seconds between a loading page's looks


@dataclass
class Served:
    """One model of the menu: ``source`` as given (a shipped name, a folder, a Hub id), its page's ``slug``, its
    state (``waiting``, ``loading``, ``ready``, ``failed``), the ``reason`` it failed, its Gradio app once built."""

    source: str
    slug: str
    state: str = "waiting"
    reason: str = ""
    started: float = 0.0
    blocks: Any = None
    app: Any = None
    exits: contextlib.AsyncExitStack | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)


def slug(source: str) -> str:
    """A model's page name: its source's last part, in letters, digits, ``-``, ``_`` and ``.``."""
    name = str(source).rstrip("/\\").replace("\\", "/").split("/")[-1] or "model"
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.") or "model"


def model_sources(models) -> list[str]:
    """``models`` (a name, folder or Hub id; a comma-separated list of them, as ``SBD_VIZ_MODEL`` gives it; or a list)
    as a list, blanks and repeats dropped; a ``ValueError`` naming ``model`` when nothing is left."""
    if isinstance(models, str):
        models = models.split(",")
    out: list[str] = []
    for m in models or ():
        m = str(m).strip()
        if m and m not in out:
            out.append(m)
    if not out:
        raise ValueError("model: no model to serve; pass --model NAME (repeatable) or set SBD_VIZ_MODEL")
    return out


class Menu:
    """The models one app serves. ``build(served)`` loads a model (a ``Served``) and builds its page (a
    ``gr.Blocks``), in a thread of its own; ``prepare(blocks)`` readies a built page for serving (its queue). Loading
    is lazy: a model loads when its page is first asked for, or at start (``warm``) for the page ``/`` opens on."""

    def __init__(self, sources, build, prepare=lambda blocks: blocks):
        self.models: list[Served] = []
        for source in model_sources(sources):
            name, n = slug(source), 2
            while any(m.slug == name for m in self.models):  # two folders of one name: the second is name-2
                name, n = f"{slug(source)}-{n}", n + 1
            self.models.append(Served(source, name))
        self._build, self._prepare = build, prepare
        self._one_at_a_time = threading.Lock()  # two models loading at once would share the cores and the memory peak

    def want(self, served: Served) -> threading.Thread | None:
        """Start loading ``served`` in the background, unless it is loading, ready or failed; the loading thread,
        if this call started one."""
        with served.lock:
            if served.state != "waiting":
                return None
            served.state, served.started = "loading", time.monotonic()
        thread = threading.Thread(target=self._load, args=(served,), daemon=True, name=f"load {served.slug}")
        thread.start()
        return thread

    def warm(self) -> None:
        """Load the first model now (the page ``/`` opens on), and the next if it fails, until one loads."""
        for served in self.models:
            thread = self.want(served)
            if thread is not None:
                thread.join()
            if served.state == "ready":
                return

    def retry(self, served: Served) -> None:
        """Let a model that failed to load be loaded again (its page's "try again")."""
        with served.lock:
            if served.state == "failed":
                served.state, served.reason = "waiting", ""

    def _load(self, served: Served) -> None:
        try:
            with self._one_at_a_time:
                blocks = self._prepare(self._build(served))
        except Exception as exc:  # any failure to load is said on the page, never kills the app
            LOG.warning("model %s could not load: %s", served.source, exc)
            with served.lock:
                served.state, served.reason = "failed", f"{type(exc).__name__}: {exc}"
            return
        with served.lock:
            served.blocks, served.state = blocks, "ready"

    def opening(self) -> Served:
        """The model ``/`` opens on: the first that is ready, else the first still loading or waiting, else the
        first."""
        for state in ("ready", "loading", "waiting"):
            found = next((m for m in self.models if m.state == state), None)
            if found is not None:
                return found
        return self.models[0]

    def nav_html(self, current: str | None = None) -> str:
        """The menu as HTML: a link to each model's page (``current`` marked), with what is loading and why a model
        failed. Links are relative to a model's page (``m/<name>/``)."""
        if len(self.models) < 2 and all(m.state != "failed" for m in self.models):
            return ""
        items, notes = [], []
        for m in self.models:
            label = html.escape(m.source)
            if m.slug == current:
                items.append(f"<b aria-current='page' data-model='{html.escape(m.slug)}'>{label}</b>")
            else:
                state = {"loading": " (loading…)", "failed": " (could not load)", "waiting": ""}.get(m.state, "")
                items.append(
                    f"<a href='../{html.escape(m.slug)}/' data-model='{html.escape(m.slug)}' "
                    f"data-state='{m.state}'>{label}</a>{state}"
                )
            if m.state == "failed":
                notes.append(f"<div class='failed'><code>{label}</code> could not load: {html.escape(m.reason)}</div>")
        return (
            "<nav id='sbd-models' class='sbd-models'><span class='label'>Model:</span> "
            + " · ".join(items)
            + "</nav>"
            + "".join(notes)
        )

    def waiting_page(self, served: Served) -> str:
        """A model's page while it loads (it looks again every ``REFRESH`` seconds), or the reason it failed."""
        name = html.escape(served.source)
        if served.state == "failed":
            body = (
                f"<h1>{name} could not load</h1><p>{html.escape(served.reason)}</p>"
                "<p><a href='?retry=1' id='sbd-retry'>Try again</a></p>"
                f"<p>The other models: {self.nav_html(served.slug)}</p>"
            )
            head = ""
        else:
            spent = time.monotonic() - served.started if served.started else 0.0
            body = (
                f"<h1>Loading {name}…</h1><p id='sbd-loading' data-model='{html.escape(served.slug)}'>"
                f"{spent:.0f} s so far; this page opens the model when it is ready (a model of 135M parameters "
                "takes about ten seconds on a CPU, the first time).</p>"
            )
            head = f"<meta http-equiv='refresh' content='{REFRESH}'>"
        return (
            f"<!doctype html><html><head><meta charset='utf-8'>{head}<title>sbd_viz · {name}</title>"
            "<style>body{font-family:system-ui,sans-serif;margin:3em;max-width:50em}"
            ".sbd-models a,.sbd-models b{margin:0 .3em}</style></head><body>"
            f"{body}</body></html>"
        )


class LazyPage:
    """An ASGI app for one model's page: its Gradio app once built (started here, in the server's loop), else the
    waiting page, which also starts its loading."""

    def __init__(self, menu: Menu, served: Served, mount):
        self.menu, self.served, self._mount = menu, served, mount

    async def __call__(self, scope, receive, send):
        served = self.served
        if served.state == "ready" and served.exits is None:  # not started yet
            # one request starts it: the exit stack is set before the first await, and the server's loop runs one
            # coroutine at a time until then
            served.exits = contextlib.AsyncExitStack()
            served.app = await self._mount(served.blocks, served.exits)
        if served.app is not None:
            await served.app(scope, receive, send)
            return
        if scope["type"] != "http":  # a websocket before the page is ready: closed
            await send({"type": "websocket.close", "code": 1013})
            return
        if b"retry=1" in scope.get("query_string", b""):
            self.menu.retry(served)
        self.menu.want(served)
        body = self.menu.waiting_page(served).encode()
        status = 503 if served.state == "failed" else 200
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"text/html; charset=utf-8"), (b"cache-control", b"no-store")],
            }
        )
        await send({"type": "http.response.body", "body": body})


def asgi_app(menu: Menu, mount_options: dict | None = None):
    """The server's application: ``/`` redirects to the page ``Menu.opening`` names; ``m/<name>/`` is each model's
    page (``LazyPage``); ``mount_options``: ``gr.mount_gradio_app``'s keyword arguments (the CSS, ...)."""
    import fastapi
    import gradio as gr
    from fastapi.responses import RedirectResponse

    root = fastapi.FastAPI()

    async def mount(blocks, exits: contextlib.AsyncExitStack):
        # each page is a FastAPI app of its own, started as gr.mount_gradio_app's lifespan starts it (its queue)
        app = gr.mount_gradio_app(fastapi.FastAPI(), blocks, path="", ssr_mode=False, **(mount_options or {}))
        await exits.enter_async_context(app.router.lifespan_context(app))
        return app

    @root.get("/")
    def opening():
        return RedirectResponse(f"m/{menu.opening().slug}/", status_code=307)

    for served in menu.models:
        root.mount(f"/m/{served.slug}", LazyPage(menu, served, mount))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        try:
            yield
        finally:
            for served in menu.models:
                if served.exits is not None:
                    await served.exits.aclose()

    root.router.lifespan_context = lifespan
    return root
