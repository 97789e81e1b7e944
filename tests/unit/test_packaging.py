"""The pinned package lists agree, the front-door files exist, and the package has no import circle."""

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "sbd_viz"


def _dotted(path: Path) -> str:
    """``sbd_viz/decoders/sbd.py`` -> ``decoders.sbd``; a package's ``__init__.py`` -> the package's name."""
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1] or ["__init__"]
    return ".".join(parts)


MODULES = sorted(_dotted(p) for p in PACKAGE.rglob("*.py") if p.stem != "__main__")  # __main__ runs the CLI
# The house plan (docs/architecture.md's map of the package): what each folder may import, at import time and inside
# functions alike. The package's top holds only its faces (the API, the CLI, the notebook explorer, the version),
# which import anything; "version" is _version, which anything may read.
FACES = {"__init__", "cli", "explorer", "plugin"}
MAY_IMPORT = {"version": set(), "trace": {"trace"}, "plugins": {"plugins"}, "tasks": {"tasks"},
              "models": {"version", "trace", "plugins", "models"},
              "decoders": {"version", "trace", "plugins", "models", "decoders"},
              "training": {"version", "trace", "models", "tasks", "training"},
              "analysis": {"version", "trace", "models", "tasks", "decoders", "training", "analysis"},
              "plots": {"version", "trace", "models", "decoders", "analysis", "training", "plots"},
              "harness": {"version", "trace", "plugins", "models", "tasks", "decoders", "analysis", "harness", "faces"},
              "app": {"version", "trace", "plugins", "models", "tasks", "decoders", "analysis", "plots", "training",
                      "app", "faces"},
              "site": {"version", "trace", "plugins", "models", "tasks", "decoders", "analysis", "plots", "training",
                       "app", "site", "faces"}}


def _layer(module: str) -> str:
    if module in FACES:
        return "faces"
    if module == "_version":
        return "version"
    head = module.split(".")[0]
    assert head in MAY_IMPORT, f"{module}: a module at the package's top that is not a face"
    return head


def _pins(path: Path) -> set[str]:
    lines = (ln.split("#")[0].strip() for ln in path.read_text().splitlines())
    return {ln for ln in lines if ln}


def test_environment_yml_names_the_same_pins_as_requirements():
    env = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        s = line.strip()
        if s.startswith("- ") and "==" in s:
            env.add(s[2:].strip())
    reqs = _pins(ROOT / "requirements.txt") | _pins(ROOT / "requirements-dev.txt")
    assert env == reqs, f"only in environment.yml: {env - reqs}; only in requirements: {reqs - env}"
    assert all("==" in r for r in reqs), "every requirement is pinned"
    assert "torch==2.13.0" in reqs


def test_fixed_top_level_exists():
    for name in ("sbd_viz", "notebooks", "tests", "app.py", "environment.yml", "README.md", ".ci/run"):
        assert (ROOT / name).exists(), name


class _Imports(ast.NodeVisitor):
    """The sbd_viz modules one module imports (dotted, as ``MODULES`` names them; ``__init__`` for the package
    itself); with ``at_import_time``, only the imports that run when it is imported (not those inside functions)."""

    def __init__(self, module: str, is_package: bool, at_import_time: bool):
        self.package = module.split(".") if is_package else module.split(".")[:-1]
        self.package = [] if module == "__init__" else self.package
        self.at_import_time, self.found = at_import_time, set()

    def visit_FunctionDef(self, node):
        if not self.at_import_time:
            self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def _add(self, dotted: str) -> None:
        """The deepest module of ``MODULES`` that ``dotted`` (under sbd_viz) names or lies in."""
        parts = dotted.split(".") if dotted else []
        while parts and ".".join(parts) not in MODULES:
            parts.pop()
        self.found.add(".".join(parts) if parts else "__init__")

    def visit_Import(self, node):
        for alias in node.names:
            if alias.name == "sbd_viz" or alias.name.startswith("sbd_viz."):
                self._add(alias.name.partition(".")[2])

    def visit_ImportFrom(self, node):
        if node.level >= 1:
            base = self.package[: len(self.package) - (node.level - 1)] + (node.module.split(".") if node.module else [])
        elif node.module and node.module.split(".")[0] == "sbd_viz":
            base = node.module.split(".")[1:]
        else:
            return
        for alias in node.names:  # from . import plots (a module) / from .x import name
            name = ".".join(base + [alias.name])
            self._add(name if name in MODULES else ".".join(base))


def _graph(at_import_time: bool) -> dict[str, set[str]]:
    graph = {}
    for path in PACKAGE.rglob("*.py"):
        if path.stem == "__main__":
            continue
        name = _dotted(path)
        visitor = _Imports(name, path.stem == "__init__", at_import_time)
        visitor.visit(ast.parse(path.read_text()))
        graph[name] = visitor.found - {name}
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of the graph as a path (first == last), or None."""
    state, path = {}, []

    def visit(node):
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = "done"
        path.pop()
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_import_circle_in_the_package():
    """Every module's imports, those inside functions too (they run later, but a circle there is still two modules
    knowing each other): no circle. The trace is plain data at the bottom: it imports nothing outside its folder."""
    graph = _graph(at_import_time=False)
    assert _cycle(graph) is None, " -> ".join(_cycle(graph))
    assert all(dep.startswith("trace") for name, deps in graph.items() if name.startswith("trace") for dep in deps)
    assert "training.train" not in graph["analysis.evaluation"]
    assert "analysis.evaluation" not in graph["training.objective"]


def test_the_circle_finder_sees_a_circle_closed_inside_a_function():
    """The graph reads imports inside functions, and ``_cycle`` reports a circle through one: the check above can
    fail."""
    source = "from .words import trace_summary\n\ndef show(self):\n    from .. import plots\n    return plots\n"
    visitor = _Imports("trace.data", False, at_import_time=False)
    visitor.visit(ast.parse(source))
    assert visitor.found == {"trace.words", "plots"}
    at_import = _Imports("trace.data", False, at_import_time=True)
    at_import.visit(ast.parse(source))
    assert at_import.found == {"trace.words"}
    graph = {**_graph(at_import_time=False), "trace.data": visitor.found, "plots": {"trace.data"}}
    found = _cycle(graph)
    assert found is not None and found[0] == found[-1] and "trace.data" in found
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None and _cycle({"a": {"a"}}) == ["a", "a"]


def _wrong(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{name} -> {dep}" for name, deps in graph.items() for dep in deps
                  if _layer(name) != "faces" and _layer(dep) not in MAY_IMPORT[_layer(name)])


def test_each_folder_imports_only_what_the_house_plan_allows():
    """docs/architecture.md's map of the package, checked: a folder reads only the folders below it, at import time
    and inside its functions."""
    assert not _wrong(_graph(at_import_time=False)), _wrong(_graph(at_import_time=False))


def test_the_map_checker_sees_a_folder_import_and_one_inside_a_function():
    graph = _graph(at_import_time=False)
    assert "decoders.config" in graph["decoders.batch"] and "trace.data" in graph["decoders.sbd"]
    assert _layer("analysis.gamma_ladder") == "analysis" and "analysis" not in MAY_IMPORT["decoders"]
    visitor = _Imports("trace.words", False, at_import_time=False)
    visitor.visit(ast.parse("def f():\n    from ..decoders.registry import decoders\n"))
    assert _wrong({"trace.words": visitor.found}) == ["trace.words -> decoders.registry"]


def test_the_package_top_holds_only_its_faces():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top == {"__init__", "__main__", "_version", "cli", "explorer", "plugin"}, top


def test_the_root_app_only_starts_the_package_app():
    """The repository's app.py is the few lines a Hugging Face Space runs."""
    assert len((ROOT / "app.py").read_text(encoding="utf-8").splitlines()) <= 40


def test_the_cycle_finder_finds_cycles():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


@pytest.mark.heavy
def test_every_module_imports_on_its_own():
    """Each module imported first, in a clean package state (one interpreter: torch loads once)."""
    code = ("import importlib, sys\n"
            f"for name in {MODULES!r}:\n"
            "    for m in [m for m in sys.modules if m == 'sbd_viz' or m.startswith('sbd_viz.')]:\n"
            "        del sys.modules[m]\n"
            "    importlib.import_module('sbd_viz.' + name)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]


# a third party's private names the package reads, each because the library offers no public way
THIRD_PARTY_PRIVATE = {
    "_prepare_sampler": "transformers' DiffusionGemma builds its sampler there: the recording hooks in",
    "_prepare_generation_config": "transformers' generate resolves its generation config there",
    "_reorder_linear_weight": "torch's oneDNN prepacking of a linear layer's weight (torch.ops.mkldnn)",
    "_linear_pointwise": "torch's oneDNN linear on prepacked weights (torch.ops.mkldnn)",
    "_version": "a tensor's in-place version counter: whether a weight changed since it was packed",
    "_replace": "a namedtuple's own copy-with-changes method (public, despite its underscore)",
    "_reset_state": "accelerate's one way to set a process's precision again (its own test cases call it)",
}


def _classes() -> dict[str, tuple[str, set[str]]]:
    """Each class of the package -> (its module, the private methods it defines)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                methods = {f.name for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
                           and f.name.startswith("_") and not f.name.startswith("__")}
                found[node.name] = (_dotted(path), methods)
    return found


def test_no_module_reads_another_modules_private_attribute_or_overrides_its_private_hook():
    """A module reaches its neighbours through their public names: no ``other._name`` read (but self's, its own
    classes', and the third parties' listed above), and no subclass in one module overriding a private method of a
    base class in another (``_plan``, ``_read``, ``_forward``: make it public, or compose)."""
    classes, read, overridden = _classes(), [], []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree, module = ast.parse(path.read_text()), _dotted(path)
        own = {n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)}
        for n in ast.walk(tree):
            if isinstance(n, ast.Attribute) and n.attr.startswith("_") and not n.attr.startswith("__"):
                holder = n.value.id if isinstance(n.value, ast.Name) else None
                if holder not in ("self", "cls") and holder not in own and n.attr not in THIRD_PARTY_PRIVATE:
                    read.append(f"{module}:{n.lineno} {holder}.{n.attr}")
            if isinstance(n, ast.ClassDef):
                mine = classes[n.name][1]
                for base in n.bases:
                    name = base.id if isinstance(base, ast.Name) else getattr(base, "attr", None)
                    if name in classes and classes[name][0] != module and mine & classes[name][1]:
                        overridden.append(f"{module}.{n.name} overrides {sorted(mine & classes[name][1])} of {name}")
    assert not read, read
    assert not overridden, overridden
