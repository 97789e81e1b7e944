"""``export_site``: the static site written to a folder, plain files a browser opens from the disk or any static
server serves (``sbd-viz site``; docs/static_site.md).

The folder holds ``index.html``, the app's scrubber (``scrubber.js``, ``scrubber.css``: the very files the app
loads), the page's own ``site.js`` and ``site.css``, one ``data/NN.js`` per prompt (``entries.entry``, as a script:
Chromium refuses ``fetch()`` of a file from ``file://``, not a ``<script>``) and a README that makes it a static
Hugging Face Space. The page and the README state the folder's size."""

from __future__ import annotations

import datetime
import json
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..app.scrubber import SCRIPT_FILE, STYLE_FILE
from ..trace.checks import check_whole
from .entries import Prompt, default_prompts, entry, sbd_decoder, text_model
from .page import FILES, human_size, index_html, readme, size_line

MODELS = ("sbd-char-5m", "smollm2-135m-sbd")
HERE = Path(__file__).resolve().parent
NOTES = {
    False: "A 4.8M-parameter character model trained for SBD here: it writes the right-hand side of small Python "
    "asserts, and stops at the end of the line.",
    True: "SmolLM2-135M-Instruct, frozen, with this toolkit's gated SBD adapter and sampler head: real text. Plain "
    "SBD leaves the base's text within a few tokens; verified SBD writes its exact text.",
}


@dataclass(frozen=True)
class Site:
    """What ``export_site`` wrote: the ``folder``, its size in ``bytes``, its ``files``, the ``prompts`` it shows,
    the model ``calls`` run and the ``seconds`` it took."""

    folder: Path
    bytes: int
    files: int
    prompts: int
    calls: int
    seconds: float

    def __str__(self) -> str:
        return (
            f"{self.folder}: {self.prompts} prompts, {human_size(self.bytes)} in {self.files} files "
            f"({self.calls:,} model calls, {self.seconds:.0f} s)"
        )


def _folder(out) -> Path:
    """``out`` as the site's folder: absent, empty, or a site written before (its files are replaced); any other
    folder is refused, so nothing of the user's is overwritten."""
    if not isinstance(out, (str, Path)) or not str(out):
        raise ValueError(f"out: must be a folder path, got {out!r}")
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"out: {folder} is a file, not a folder")
    if folder.is_dir() and any(folder.iterdir()):
        ours = set(FILES) | {"data"}
        if not (folder / "index.html").is_file() or not {p.name for p in folder.iterdir()} <= ours:
            raise ValueError(
                f"out: {folder} is a folder with other files in it; give an empty or new folder, or one "
                "`sbd-viz site` wrote"
            )
    return folder


def _check_prompts(prompts) -> list[str] | None:
    if prompts is None:
        return None
    if isinstance(prompts, str) or not isinstance(prompts, Sequence) or not prompts:
        raise ValueError(
            f"prompts: must be a non-empty list of texts, or None for each model's examples, got {prompts!r}"
        )
    bad = [p for p in prompts if not isinstance(p, str) or not p.strip()]
    if bad:
        raise ValueError(f"prompts: every prompt must be a non-empty text, got {bad[0]!r}")
    return list(prompts)


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def export_site(
    out,
    models: Sequence,
    prompts: Sequence[str] | None = None,
    per_model: int | None = None,
    max_new_tokens: int | None = None,
    block_size: int | None = None,
    step: float | None = None,
    command: str = "sv.export_site(...)",
    log: Callable[[str], None] | None = None,
) -> Site:
    """Write the static site to the folder ``out`` (see the module) and return what it wrote (a ``Site``).

    ``models``: loaded models, each decoded by SBD (``sv.export_site`` loads names and paths, by default both shipped
    models, ``MODELS``, and calls this). ``prompts``: the
    texts to show on every model (a text model's chat template applied), or None for each model's examples (the
    app's); ``per_model``: at most this many of them per model. ``max_new_tokens``: None is 64 for the character
    model (its answers end at their line), 32 for a text model (a 135M model's γ maps take minutes on a CPU).
    ``block_size``: None is each model's own. ``step``: None for the exact γ maps (every piece), or a slider step (0.01)
    to decode only the pieces holding its multiples. ``command``: how the site was made, as its README says.
    ``log``: called with a line per prompt done."""
    started = time.perf_counter()
    folder = _folder(out)
    prompts = _check_prompts(prompts)
    if per_model is not None:
        check_whole(per_model, "per_model", 1, note=" (None: every prompt)")
    if isinstance(models, (str, Path)) or not isinstance(models, Sequence) or not models:
        raise ValueError(f"models: must be a non-empty list of loaded models, got {models!r}")
    named = [m for m in models if isinstance(m, (str, Path))]
    if named:
        raise ValueError(f"models: {named[0]!r} is a name; load it first (sv.export_site loads names itself)")
    loaded = list(models)
    for model in loaded:
        sbd_decoder(model)
    entries: list[dict] = []
    notes: dict[str, str] = {}
    for model in loaded:
        chosen = default_prompts(model) if prompts is None else [Prompt(p, text_model(model), "") for p in prompts]
        notes[model.name] = NOTES[text_model(model)]
        for prompt in chosen[:per_model]:
            key = f"p{len(entries) + 1:02d}"
            done = entry(model, prompt, key, max_new_tokens, block_size, step)
            entries.append(done)
            if log is not None:
                log(
                    f"{key} {model.name} · {prompt.label or prompt.text[:40]!r}: "
                    f"{len(done['maps']['plain']['pieces'])} pieces plain, "
                    f"{len(done['maps']['verified']['pieces'])} verified, {done['calls']} calls, {done['seconds']} s"
                )
    if (folder / "data").is_dir():  # a site written before: its data goes with it
        shutil.rmtree(folder / "data")
    folder.mkdir(parents=True, exist_ok=True)
    files = {e["key"]: f"data/{e['key']}.js" for e in entries}
    for e in entries:
        data = json.dumps(e, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        _write(folder / files[e["key"]], f"sbdSiteData({data});\n")
    shutil.copyfile(SCRIPT_FILE, folder / "scrubber.js")
    shutil.copyfile(STYLE_FILE, folder / "scrubber.css")
    for name in ("site.js", "site.css"):
        shutil.copyfile(HERE / name, folder / name)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    # the pages state the folder's size, their own bytes included: written again until the size they state holds
    stated, count = 0, len(FILES) + len(entries)
    for _ in range(5):
        size = size_line(stated, count)
        _write(folder / "index.html", index_html(entries, files, notes, size, f"Built {when} with: {command}"))
        _write(folder / "README.md", readme(entries, size, command))
        total, count = _size(folder)
        if total == stated:
            break
        stated = total
    calls = sum(e["calls"] for e in entries)
    return Site(folder, total, count, len(entries), calls, round(time.perf_counter() - started, 1))
