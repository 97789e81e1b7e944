"""Docstrings that are true: every name a docstring gives as a reference into the package resolves.

Each module of ``sbd_viz`` is read from its source (``ast``: the module's, every class's and every function's
docstring). A double-backticked dotted name, with or without a call's parentheses after it (``sv.decode(...)``), is
a reference into the package when it starts with ``sbd_viz.``, with ``sv.`` (the package as the notebooks import it)
or with the name of one of the package's modules or subpackages (``plots.block_fill``, ``steps.checked_step``: found
in any module of that name). It must resolve by import and getattr; the failure lists every one that does not, with
the module whose docstring names it."""

import ast
import importlib
import re
from functools import lru_cache
from pathlib import Path

import sbd_viz

PACKAGE = Path(sbd_viz.__file__).resolve().parent
# ``name.name`` in double backticks, maybe called: ``sv.decode``, ``Decoding.requests()``, ``sv.decode(..., x=1)``
REFERENCE = re.compile(r"``([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)(?:\([^`]*\))?``")
# Module names that docstrings also use, throughout, as the name of an instance: ``trace.nfe`` is a Trace's count,
# ``model.raw_text`` a model's method. A reference to these two modules is written in full (``sbd_viz.trace.data.Step``).
INSTANCE_NAMES = {"trace", "model", "config"}  # a trace, a model, a model's config: instances, not modules
# A name ending in a file's suffix is a file (``app.py``, ``train.py``), not a path of attributes.
FILE_SUFFIXES = {"py", "json", "md", "toml", "yml", "yaml", "txt", "ipynb", "html", "gif", "png", "csv", "gguf", "js",
                 "css"}


def _modules() -> dict[str, Path]:
    """Every module of the package, dotted (``sbd_viz.decoders.sbd``), and its source file."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__main__":  # it runs the CLI when imported
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(["sbd_viz", *parts])] = path
    return found


MODULES = _modules()
# a module or subpackage by its own name: ``decoders`` -> sbd_viz.decoders, ``side_by_side`` -> sbd_viz.plots.side_by_side
BY_NAME: dict[str, list[str]] = {}
for _dotted in MODULES:
    BY_NAME.setdefault(_dotted.rsplit(".", 1)[-1], []).append(_dotted)


def docstrings(path: Path):
    """``(where, docstring)`` for the module, each class and each function of the source file ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield getattr(node, "name", "<module>"), doc


def candidates(name: str) -> list[str] | None:
    """The full dotted names ``name`` may stand for, or None when it is no reference into the package."""
    head, _, rest = name.partition(".")
    if name.rsplit(".", 1)[-1] in FILE_SUFFIXES or head in INSTANCE_NAMES:
        return None
    if head == "sbd_viz":
        return [name]
    if head == "sv":
        return [f"sbd_viz.{rest}"]
    if head in BY_NAME:
        return [f"{module}.{rest}" for module in BY_NAME[head]]
    return None


@lru_cache(maxsize=None)
def resolves(dotted: str) -> bool:
    """Whether ``dotted`` is a module, or an attribute path from the longest module prefix that imports."""
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        module_name = ".".join(parts[:k])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:  # no such module: try a shorter prefix; a broken import still fails
            if exc.name is None or not (module_name == exc.name or module_name.startswith(exc.name + ".")):
                raise
            continue
        for attr in parts[k:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def unresolved() -> list[str]:
    """Every reference into the package that does not resolve: ``module (where): ``name````."""
    bad = []
    for module, path in MODULES.items():
        for where, doc in docstrings(path):
            for match in REFERENCE.finditer(doc):
                names = candidates(match.group(1))
                if names is not None and not any(resolves(n) for n in names):
                    bad.append(f"{module} ({where}): ``{match.group(1)}``")
    return bad


def test_the_reference_finder_reads_the_three_spellings():
    found = [m.group(1) for m in REFERENCE.finditer(
        "``sbd_viz.decoders.steps.checked_step`` and ``sv.decode(..., decoder=\"jacobi\")``, ``plots.block_fill``; "
        "not ``gamma`` or ``trace.config[\"decoder\"]``")]
    assert found == ["sbd_viz.decoders.steps.checked_step", "sv.decode", "plots.block_fill"]
    assert candidates("sv.decode") == ["sbd_viz.decode"] and candidates("pd.DataFrame") is None
    assert candidates("decoders.verified") == ["sbd_viz.decoders.verified"]
    assert candidates("side_by_side.decoder_rows") == ["sbd_viz.plots.side_by_side.decoder_rows"]
    assert candidates("trace.nfe") is None and candidates("app.py") is None
    assert resolves("sbd_viz.decoders.steps.checked_step") and resolves("sbd_viz.plots")
    assert not resolves("sbd_viz.plots.plot_blocks") and not resolves("sbd_viz.no_such_module.x")


def test_every_package_reference_in_a_docstring_resolves():
    bad = unresolved()
    assert not bad, f"{len(bad)} docstring reference(s) into sbd_viz that do not resolve:\n" + "\n".join(bad)


def test_what_the_registry_and_decode_config_docstrings_say():
    """``sbd_viz.decoders.registry``: ``DecodeConfig``'s fields are ``COMMON`` and ``SHARED``, which do not overlap;
    ``DecodeConfig.as_dict``: every field, with decoder "sbd" (the config of an SBD trace)."""
    from dataclasses import fields

    from sbd_viz.decoders import registry
    from sbd_viz.decoders.sbd import DecodeConfig

    names = {f.name for f in fields(DecodeConfig) if f.init}
    assert names == set(registry.COMMON) | set(registry.SHARED) and not set(registry.COMMON) & set(registry.SHARED)
    settings = DecodeConfig(stop="\n").as_dict()
    assert set(settings) == names | {"decoder"} and settings["decoder"] == "sbd" and settings["stop"] == ["\n"]
