"""The decoder registry and its one door: a decoder from another package, installed with an entry point, works
through every surface with no edit to sbd_viz (docs/own_decoder.md's package, built and installed as a user
would); the door refuses what a decoder does not take, by name; every batchable decoder's batch equals its single
decodes."""

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import sbd_viz as sv
import sbd_viz.plugin
from sbd_viz.decoders import registry

from conftest import sharp_model

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "own_decoder.md"
PROMPTS = ["abc abc abc ", "go: 12 + 30 = ", "xyzzy", "assert 48 + 37 == "]


def with_path(folder) -> str:
    """PYTHONPATH with ``folder`` first and the caller's after it (the sbd_viz under test, e.g. a checkout's)."""
    return os.pathsep.join([str(folder)] + [p for p in [os.environ.get("PYTHONPATH")] if p])


def doc_files() -> dict[str, str]:
    """The page's files: each fenced block whose info string names ``file=PATH``."""
    blocks = re.findall(r"```\w+ file=(\S+)\n(.*?)```", DOC.read_text(), flags=re.S)
    assert blocks, "docs/own_decoder.md: no ``` file=... blocks"
    return dict(blocks)


# -- (a) a decoder from another package -----------------------------------------------------------------------
# Run in a fresh interpreter with the package on PYTHONPATH only: nothing of it is imported by hand, so every
# surface finds it through the entry point, as in a user's process.
PLUGIN_CHECKS = textwrap.dedent('''
    import json, sys, warnings
    warnings.simplefilter("error", RuntimeWarning)  # a plugin that failed to load would only warn
    import sbd_viz as sv
    from sbd_viz import cli
    from sbd_viz.app import Handlers, SpeedQualityCurve
    from sbd_viz.app.state import Controls

    out = {}
    model = sv.load_model()
    spec = {s.name: s for s in sv.decoders()}["fixed_blocks"]
    out["names"] = [s.name for s in sv.decoders()]
    out["module"] = spec.decoding.__module__
    prompts = ["assert 48 + 37 == ", "assert 1 + 2 == ", "assert sorted([3, 1, 2]) == "]
    single = [sv.decode(model, p, decoder="fixed_blocks", slots=3, max_new_tokens=12, stop="\\n") for p in prompts]
    out["single"] = [[t.config["decoder"], list(t.output_ids), t.nfe, [len(s.commits) for s in t.steps]]
                     for t in single]
    batched = sv.decode_batch(model, prompts, decoder="fixed_blocks", slots=3, max_new_tokens=12, stop="\\n",
                              batch_size=2)
    out["batch"] = [[t.config["decoder"], list(t.output_ids), t.nfe, [len(s.commits) for s in t.steps]]
                    for t in batched]
    out["refused"] = {}
    for name, value in (("gamma", 0.5), ("remask_threshold", 0.7), ("verify", True)):
        try:
            sv.decode(model, prompts[0], decoder="fixed_blocks", **{name: value})
        except ValueError as exc:
            out["refused"][name] = str(exc)
    try:
        sv.decode(model, prompts[0], decoder="fixed_blocks", slots=0)
    except ValueError as exc:
        out["refused"]["slots"] = str(exc)
    path = sys.argv[1]
    out["cli"] = cli.main(["trace", prompts[0], "--decoder", "fixed_blocks", "--slots", "3", "--stop", "\\n",
                           "--max-new-tokens", "12", "--out", path])
    trace = sv.load_trace(path)
    out["cli_trace"] = [trace.config["decoder"], list(trace.output_ids)]
    out["cli_ladder"] = cli.main(["ladder", prompts[0], "--decoder", "fixed_blocks", "--gammas", "1", "3",
                                  "--max-new-tokens", "8"])
    ladder = sv.gamma_ladder(model, prompts[0], decoder="fixed_blocks", gammas=[1, 2, 4], max_new_tokens=8)
    out["ladder"] = [list(ladder.columns)[:2], list(ladder["slots"]), list(ladder["calls"])]
    handlers = Handlers(model, SpeedQualityCurve(compute=False))
    controls = Controls(prompts[0], "entropy_bounded", 1.0, False, 8, 12, 0.0, 0, True, False)
    figure, rows, _order = handlers.compare(controls, ["SBD", "fixed blocks"])
    out["compare"] = rows
    out["compare_single"] = [sv.decode(model, prompts[0], decoder="fixed_blocks", max_new_tokens=12,
                                       stop="\\n").nfe]

    # the draft-and-check example, through the same surfaces
    drafts = out["drafts"] = {}
    spec = {s.name: s for s in sv.decoders()}["bigram_drafts"]
    drafts["module"] = spec.decoding.__module__
    drafts["ntp"] = [[list(t.output_ids), t.nfe] for t in
                     (sv.decode_ntp(model, p, max_new_tokens=12, stop="\\n") for p in prompts)]
    single = [sv.decode(model, p, decoder="bigram_drafts", max_drafts=2, max_new_tokens=12, stop="\\n")
              for p in prompts]
    drafts["single"] = [[t.config["decoder"], list(t.output_ids), t.nfe, [len(s.checks) for s in t.steps]]
                        for t in single]
    batched = sv.decode_batch(model, prompts, decoder="bigram_drafts", max_drafts=2, max_new_tokens=12,
                              stop="\\n", batch_size=2)
    drafts["batch"] = [[t.config["decoder"], list(t.output_ids), t.nfe, [len(s.checks) for s in t.steps]]
                       for t in batched]
    drafts["refused"] = {}
    for name, value in (("gamma", 0.5), ("block_size", 4), ("slots", 2), ("max_drafts", 0)):
        try:
            sv.decode(model, prompts[0], decoder="bigram_drafts", **{name: value})
        except ValueError as exc:
            drafts["refused"][name] = str(exc)
    path = sys.argv[1] + ".drafts.json"
    drafts["cli"] = cli.main(["trace", prompts[2], "--decoder", "bigram_drafts", "--max-drafts", "2", "--stop",
                              "\\n", "--max-new-tokens", "12", "--out", path])
    trace = sv.load_trace(path)
    drafts["cli_trace"] = [trace.config["decoder"], list(trace.output_ids)]
    ladder = sv.gamma_ladder(model, prompts[2], decoder="bigram_drafts", gammas=[1, 2, 4], max_new_tokens=12)
    drafts["ladder"] = [list(ladder.columns)[:2], list(ladder["max_drafts"]), list(ladder["calls"]),
                        list(ladder["same_as_ntp"])]
    figure, rows, _order = handlers.compare(Controls(prompts[2], "entropy_bounded", 1.0, False, 8, 12, 0.0, 0, True, False),
                                    ["bigram drafts"])
    drafts["compare"] = rows
    doc = sv.decode(model, prompts[2], decoder="bigram_drafts", stop="\\n")
    drafts["doc"] = [doc.text, doc.nfe, sv.decode_ntp(model, prompts[2], stop="\\n").nfe]

    # the loop of its own
    own = out["own"] = {}
    own["module"] = {s.name: s for s in sv.decoders()}["two_at_a_time"].decoding.__module__
    traces = [sv.decode(model, p, decoder="two_at_a_time", max_new_tokens=12, stop="\\n") for p in prompts]
    ntp = [sv.decode_ntp(model, p, max_new_tokens=12, stop="\\n") for p in prompts]
    own["single"] = [[list(t.output_ids), t.nfe, [len(s.commits) for s in t.steps], list(n.output_ids[:1])]
                     for t, n in zip(traces, ntp)]
    own["back"] = [sv.trace_from_json(t.to_json()).output_ids == t.output_ids for t in traces]
    own["batch"] = [list(t.output_ids) for t in sv.decode_batch(model, prompts, decoder="two_at_a_time",
                                                                 max_new_tokens=12, stop="\\n", batch_size=2)]
    doc = sv.decode(model, prompts[2], decoder="two_at_a_time", stop="\\n")
    own["doc"] = [doc.text, doc.nfe]
    print(json.dumps(out))
''')


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """docs/own_decoder.md's package, written out, built and installed into a folder of its own."""
    root = tmp_path_factory.mktemp("plugin")
    source, target = root / "src", root / "site"
    for path, text in doc_files().items():
        (source / path).parent.mkdir(parents=True, exist_ok=True)
        (source / path).write_text(text)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(source)], check=True, cwd=root)
    return target


@pytest.fixture(scope="module")
def plugin_run(installed, tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "t.json"
    # the package first; a PYTHONPATH already set (a checkout under test) stays after it
    path = os.pathsep.join(p for p in (str(installed), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "SBD_VIZ_THREADS": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", PLUGIN_CHECKS, str(out)], capture_output=True, text=True,
                          env=env, cwd=installed.parent, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_page_is_short_and_names_its_files():
    assert len(DOC.read_text().splitlines()) <= 175  # three decoders (each under 30 lines of code) and a model kind
    assert set(doc_files()) == {"my_decoders/__init__.py", "my_decoders/bigram.py", "my_decoders/two.py",
                                "pyproject.toml"}
    assert '"sbd_viz.decoders"' in doc_files()["pyproject.toml"]


def test_the_pages_decoders_import_no_private_name():
    """Each example is built from sbd_viz's public names: no ``_name`` imported or read off sbd_viz."""
    import ast

    for path, text in doc_files().items():
        if not path.endswith(".py"):
            continue
        tree = ast.parse(text)
        imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names]
        read = [n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Name) and n.value.id == "sv"]
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        assert modules <= {None, "sbd_viz", "sbd_viz.plugin"}, path  # sv, or the public module for plugins
        from_plugin = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module == "sbd_viz.plugin"
                       for a in n.names]
        assert (read or from_plugin) and not [name for name in imported + read if name.startswith("_")], path
        assert all(hasattr(sv, name) and name in sv.__all__ for name in read), path
        assert all(name in sv.plugin.__all__ for name in from_plugin), path


@pytest.mark.heavy
def test_an_installed_decoder_is_listed_after_the_built_ins(plugin_run):
    names = plugin_run["names"]
    assert names[: len(sv.decoders())] == [s.name for s in sv.decoders()]
    assert names[len(sv.decoders()):] == ["bigram_drafts", "fixed_blocks", "two_at_a_time"]  # entry points by name
    assert plugin_run["module"] == "my_decoders"  # the installed package's class, not a copy
    assert plugin_run["drafts"]["module"] == "my_decoders.bigram"


@pytest.mark.heavy
def test_an_installed_draft_and_check_decoder_writes_greedys_text_through_every_surface(plugin_run):
    drafts = plugin_run["drafts"]
    for (decoder, ids, nfe, checks), (ntp_ids, ntp_nfe) in zip(drafts["single"], drafts["ntp"]):
        assert decoder == "bigram_drafts" and ids == ntp_ids and nfe <= ntp_nfe
        assert all(c <= 2 for c in checks)  # at most max_drafts drafts checked per call
    assert drafts["batch"] == drafts["single"]
    assert set(drafts["refused"]) == {"gamma", "block_size", "slots", "max_drafts"}
    for name, message in drafts["refused"].items():
        assert message.startswith(f"{name}:"), message
    assert drafts["cli"] == 0 and drafts["cli_trace"] == drafts["single"][2][:2]
    columns, values, calls, same = drafts["ladder"]
    assert columns == ["max_drafts", "calls"] and values == [1, 2, 4] and all(same)
    assert [row[0] for row in drafts["compare"]] == ["NTP", "bigram drafts"]
    assert drafts["compare"][1][1] <= drafts["compare"][0][1]  # its calls, no more than NTP's
    assert drafts["doc"] == ["[1, 2, 3]\n", 7, 10]  # the page's numbers


@pytest.mark.heavy
def test_an_installed_decoder_with_a_loop_of_its_own_runs_through_every_surface(plugin_run):
    """docs/own_decoder.md's ``DecodeRun`` written from ``sbd_viz.plugin`` alone: two tokens a call, the first NTP's
    own; its trace reads back; decode_batch serves its requests alike."""
    own = plugin_run["own"]
    assert own["module"] == "my_decoders.two"
    for ids, nfe, commits, ntp_first in own["single"]:
        assert ids[:1] == ntp_first and all(c == 2 for c in commits[:-1]) and nfe == len(commits)
        assert nfe <= (len(ids) + 1) // 2 + 1
    assert all(own["back"]) and own["batch"] == [ids for ids, *_ in own["single"]]
    assert own["doc"] == ["[[1,  ,,  2]\n", 7]  # the page's numbers


@pytest.mark.heavy
def test_an_installed_decoder_decodes_through_the_door_and_refuses_by_name(plugin_run):
    for name, message in plugin_run["refused"].items():
        assert message.startswith(f"{name}:"), message
    assert set(plugin_run["refused"]) == {"gamma", "remask_threshold", "verify", "slots"}
    for decoder, ids, nfe, commits in plugin_run["single"]:
        assert decoder == "fixed_blocks" and ids
        assert all(c == 3 for c in commits[:-1])  # three slots, all committed by the call that first sees them


@pytest.mark.heavy
def test_an_installed_decoder_batches_to_its_single_decodes(plugin_run):
    assert plugin_run["batch"] == plugin_run["single"]


@pytest.mark.heavy
def test_an_installed_decoder_traces_from_the_cli(plugin_run):
    assert plugin_run["cli"] == 0
    assert plugin_run["cli_trace"] == plugin_run["single"][0][:2]


@pytest.mark.heavy
def test_an_installed_decoder_climbs_a_ladder_along_its_knob(plugin_run):
    assert plugin_run["cli_ladder"] == 0  # sbd-viz ladder --decoder fixed_blocks: its knob's values, whole numbers
    columns, slots, calls = plugin_run["ladder"]
    assert columns == ["slots", "calls"] and slots == [1, 2, 4]
    assert calls[0] > calls[1] > calls[2]  # more slots per call, fewer calls


@pytest.mark.heavy
def test_an_installed_decoder_shows_in_the_apps_compare_tab(plugin_run):
    labels = [row[0] for row in plugin_run["compare"]]
    assert labels == ["NTP", "SBD", "fixed blocks"]
    assert plugin_run["compare"][2][1] == plugin_run["compare_single"][0]  # its calls, as sv.decode counts them


@pytest.mark.heavy
def test_a_broken_plugin_is_named_in_a_warning_and_the_built_ins_stay(tmp_path):
    """An entry point whose import fails, and one that is not a DecoderSpec: each named, neither kills the rest."""
    site = tmp_path / "site"
    dist = site / "broken_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[sbd_viz.decoders]\nbroken = no_such_module:SPEC\n"
                                           "not_a_spec = json:dumps\n")
    code = ("import warnings, sbd_viz as sv\n"
            "with warnings.catch_warnings(record=True) as w:\n"
            "    warnings.simplefilter('always')\n"
            "    names = [s.name for s in sv.decoders()]\n"
            "print(names)\n"
            "print([str(x.message) for x in w])\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": with_path(site)})
    assert done.returncode == 0, done.stderr[-2000:]
    names, warned = done.stdout.strip().splitlines()[-2:]
    assert "'sbd'" in names and "broken" not in names and "not_a_spec" not in names
    assert "'broken'" in warned and "no_such_module" in warned and "'not_a_spec'" in warned


# -- (b) the door's refusals --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model():
    return sharp_model()


@pytest.mark.parametrize("decoder, setting, value", [
    ("sbd", "remask_threshold", 0.7), ("jacobi", "gamma", 0.5), ("jacobi", "verify", True),
    ("prompt_lookup", "block_size", 4), ("ntp", "rule", "top_k"), ("remask", "temperature", 0.5),
    ("remask", "prompt_lookup_num_tokens", 3), ("sbd", "no_such_setting", 1),
])
def test_the_door_refuses_a_setting_the_decoder_does_not_take_by_name(model, decoder, setting, value):
    with pytest.raises(ValueError, match=rf"^{setting}: .*{decoder}"):
        sv.decode(model, "ab", decoder=decoder, **{setting: value})
    if registry.get_decoder(decoder).batchable:  # the batch takes the same door
        with pytest.raises(ValueError, match=rf"^{setting}:"):
            sv.decode_batch(model, ["ab"], decoder=decoder, **{setting: value})


def test_the_door_names_the_decoder_and_the_choices(model):
    with pytest.raises(ValueError, match=r"^decoder: unknown decoder 'beam'; choose from sbd, remask"):
        sv.decode(model, "ab", decoder="beam")
    with pytest.raises(ValueError, match=r"^decoder: 'diffusion_gemma' decodes with a DiffusionGemma"):
        sv.decode(model, "ab", decoder="diffusion_gemma")
    class Unbatched(sv.NTPDecoding):  # steps() only: every built-in causal decoder has requests()
        requests = None

    unbatched = sv.DecoderSpec(name="unbatched", label="unbatched", decoding=Unbatched, exact=True, model="causal")
    with pytest.raises(ValueError, match=r"^decoder: 'unbatched' cannot be batched .*; batchable: .*prompt_lookup"):
        sv.decode_batch(model, ["ab"], decoder=unbatched)


@pytest.mark.heavy
def test_a_shared_setting_left_at_its_default_passes_to_any_decoder(model):
    """One set of settings for every decoder: the defaults mean "not set"; a decoder's own settings reach it."""
    plain = sv.decode(model, "abc ", decoder="jacobi", max_new_tokens=6)
    assert sv.decode(model, "abc ", decoder="jacobi", max_new_tokens=6, gamma=sv.COMMIT_RULES["entropy_bounded"]
                     .default, verify=False, gap_free=False, temperature=0.0).output_ids == plain.output_ids
    assert sv.decode(model, "abc ", decoder="remask", remask_threshold=1.0, gamma=2.0,
                     max_new_tokens=8).config["remask_threshold"] == 1.0


@pytest.mark.heavy
def test_sbd_positional_arguments_still_work(model):
    by_name = sv.decode(model, "abc ", rule="top_k", gamma=2, block_size=4, max_new_tokens=8)
    assert sv.decode(model, "abc ", "top_k", 2, 4, 8).output_ids == by_name.output_ids
    with pytest.raises(TypeError, match="gamma"):
        sv.decode(model, "abc ", "top_k", 2, gamma=2)


@pytest.mark.heavy
def test_register_decoder_in_a_notebook(model):
    class Greedy(sv.NTPDecoding):
        pass

    spec = sv.DecoderSpec(name="greedy_copy", label="greedy (a copy)", decoding=Greedy, exact=True, model="causal")
    try:
        sv.register_decoder(spec)
        assert sv.decoders()[-1] is spec
        trace = sv.decode(model, "abc ", decoder="greedy_copy", max_new_tokens=6)
        assert trace.config["decoder"] == "greedy_copy"  # the spec's name, though its class is NTP's
        assert trace.output_ids == sv.decode_ntp(model, "abc ", max_new_tokens=6).output_ids
        with pytest.raises(ValueError, match="already registered"):
            sv.register_decoder(sv.DecoderSpec(name="greedy_copy", label="x", decoding=Greedy))
    finally:
        registry.REGISTRY.unregister("greedy_copy")


@pytest.mark.parametrize("field, value, message", [
    ("name", "two words", "name"), ("takes", ("remask_threshold",), "takes"), ("own", {"gamma": 1}, "own"),
    ("knob", sv.Knob("gamma"), "knob"), ("model", "rnn", "model"), ("decoding", dict, "decoding"),
    ("color", "blue", "color"), ("sweep", {"gamma": (0.5,)}, "sweep"), ("sweep", {"gamma": ()}, "sweep"),
])
def test_a_bad_spec_is_refused_by_field(field, value, message):
    fields = dict(name="ok", label="ok", decoding=sv.NTPDecoding, model="causal")
    with pytest.raises((ValueError, TypeError), match=f"^{message}:"):
        sv.DecoderSpec(**{**fields, field: value})


def test_a_specs_colour_and_sweep_reach_the_figure_and_the_sweep():
    """The spec's ``color`` is its line's in ``decoder_tradeoff``; its ``sweep`` the values ``sweep_decoders`` runs
    its own settings along, unless the caller gives others; moving either moves what is drawn or decoded."""
    import dataclasses

    import pandas as pd

    from sbd_viz import plots
    from sbd_viz.analysis.decoder_sweep import _settings

    class Copy(sv.DraftAndCheck):
        def __init__(self, model, prompt, config, width=3):
            super().__init__(model, prompt, config)

    spec = sv.DecoderSpec(name="copy_test", label="copy (test)", decoding=Copy, model="causal", own={"width": 3},
                          knob=sv.Knob("width", 1, 8, 1), color="#123456", sweep={"width": (2, 5)})
    assert [s["width"] for s in _settings([spec], {})] == [2, 5]
    assert [s["width"] for s in _settings([spec], {"width": (7,)})] == [7]  # the caller's values win
    assert [s["width"] for s in _settings([dataclasses.replace(spec, sweep={})], {})] == [3]  # else its default
    frame = pd.DataFrame([dict(decoder="copy_test", label="copy (test)", speedup_calls=1.5, accuracy=1.0,
                               same_as_ntp=1.0, knob="width", knob_value=2.0, settings="")])
    try:
        sv.register_decoder(spec)
        assert plots.decoder_tradeoff(frame).data[0].line.color == "#123456"
        sv.register_decoder(dataclasses.replace(spec, color="#654321"), replace_existing=True)
        assert plots.decoder_tradeoff(frame).data[0].line.color == "#654321"
        sv.register_decoder(dataclasses.replace(spec, color=None), replace_existing=True)
        assert plots.decoder_tradeoff(frame).data[0].line.color in registry.PALETTE  # one of the palette's
    finally:
        registry.REGISTRY.unregister("copy_test")
    assert len({s.color for s in registry.decoders()}) == len(registry.decoders())  # the built-ins' differ


# -- (c) every batchable decoder: the batch is the single decodes ------------------------------------------
@pytest.mark.parametrize("spec", [s for s in registry.decoders() if s.batchable and s.model != "diffusion"],
                         ids=lambda s: s.name)
@pytest.mark.heavy
def test_every_batchable_decoder_batches_to_its_single_decodes(model, spec):
    settings = {"gamma": 1.0} if "gamma" in spec.takes else {}
    if "block_size" in spec.takes:
        settings["block_size"] = 4
    single = [sv.decode(model, p, decoder=spec.name, max_new_tokens=10, stop=" ", **settings) for p in PROMPTS]
    batched = sv.decode_batch(model, PROMPTS, decoder=spec.name, max_new_tokens=10, stop=" ", batch_size=3,
                              **settings)
    for one, row in zip(single, batched):
        assert row.config["decoder"] == one.config["decoder"] == spec.name
        assert row.output_ids == one.output_ids and row.nfe == one.nfe and row.stop_reason == one.stop_reason
        assert [len(s.commits) for s in row.steps] == [len(s.commits) for s in one.steps]


# every module of the package outside decoders/ (the decoders' own modules and their specs); batch.py serves any
# decoder, so it is checked too
SURFACES = sorted(str(p.relative_to(ROOT / "sbd_viz")) for p in (ROOT / "sbd_viz").rglob("*.py")
                  if p.relative_to(ROOT / "sbd_viz").parts[0] != "decoders" or p.name == "batch.py")
# a module's own words for a decoder's setting, each with why: the trace words verified SBD's steps by how it drafted
NAMING_ALLOWED = {
    "trace/data.py": {"drafting", "tree_blocks"},  # Trace.tree_drafted, Trace.tree_block_cap: keys of its own config
}


def decoder_words() -> tuple[set, set]:
    """(every built-in decoder's name, the settings that are a built-in decoder's own)."""
    specs = [s for s in registry.decoders() if s.decoding.__module__.startswith("sbd_viz.decoders.")]
    return {s.name for s in specs}, {o for s in specs for o in s.own}


def naming(source: str) -> list[str]:
    """Where ``source`` names a built-in decoder or one of its own settings, outside docstrings and comments: a string
    that is a decoder's name (a record's key, ``result["ntp"]``, ``data.get("ntp")``, is not a choice of decoder),
    holds a decoder's name that is not a plain word of the package (``jacobi``, ``prompt_lookup``), is one of a
    decoder's own settings (a key too: ``config.get("remask_threshold")`` knows that decoder), and an identifier
    (a variable, argument, keyword or attribute) that holds one of those settings' names."""
    import ast

    names, own = decoder_words()
    plain = {"sbd", "ntp"}  # the method and the reference: words of every module (sbd-viz, an NTP loss)
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    keys, kinds = set(), set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Subscript):
            keys.add(id(n.slice))
        elif isinstance(n, ast.Dict):
            keys.update(id(k) for k in n.keys if k is not None)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args:
            keys.add(id(n.args[0]))
        elif isinstance(n, ast.Assign) and [getattr(t, "id", None) for t in n.targets] in (["kind"], ["DEFAULT"]):
            kinds.add(id(n.value))  # a model class's kind (sbd_viz.models.kinds), which a decoder may share
        elif isinstance(n, ast.Call) and getattr(n.func, "id", None) == "ModelKind":
            kinds.update(id(c) for c in ast.walk(n) if isinstance(c, ast.Constant))  # a kind's name and its also
    found = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs:
            if n.value in own:
                found.append(f"line {n.lineno}: setting {n.value!r}")
            elif n.value in names and id(n) not in keys and id(n) not in kinds:
                found.append(f"line {n.lineno}: decoder {n.value!r}")
            else:
                found += [f"line {n.lineno}: decoder {w!r} in {n.value[:40]!r}" for w in names - plain
                          if n.value != w and re.search(rf"(?<![\w-]){w}(?![\w-])", n.value)]
        identifier = {ast.Name: "id", ast.arg: "arg", ast.keyword: "arg", ast.Attribute: "attr",
                      ast.FunctionDef: "name"}.get(type(n))
        value = getattr(n, identifier, None) if identifier else None
        if value and any(o in value for o in own):
            found.append(f"line {n.lineno}: identifier {value!r}")
    return found


@pytest.mark.parametrize("surface", SURFACES)
def test_no_surface_names_a_decoder(surface):
    """Outside the decoders' own modules every module reads the registry: no built-in decoder's name, nor a setting of
    its own, is written in its code (the specs say them: label, colour, knob, sweep)."""
    allowed = NAMING_ALLOWED.get(surface, set())
    found = [f for f in naming((ROOT / "sbd_viz" / surface).read_text()) if f.split("'")[1] not in allowed]
    assert not found, f"{surface} names " + "; ".join(found)


def test_no_module_imports_a_private_name():
    """Every module of the package is built on its neighbours' public names: no ``from .x import _name``."""
    import ast

    found = []
    for path in sorted((ROOT / "sbd_viz").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [f"{path.relative_to(ROOT)}:{node.lineno} {a.name}" for a in node.names
                          if a.name.startswith("_") and not a.name.startswith("__")]
    assert not found, found


def test_the_naming_check_finds_what_it_looks_for():
    """The check above fails on each kind of naming it is meant to catch, and passes what it allows."""
    caught = ['x = decode(m, p, decoder="jacobi")', 'if t.config.get("decoder") == "ntp": pass',
              'def f(remask_thresholds=None): pass', 'frame.remask_threshold', 'f(drafting="tree")',
              'settings = {"remask_threshold": 1}', 'msg = "the exact decoders (ntp, jacobi, prompt_lookup)"',
              'x = y.get("max_denoising_steps")']
    for code in caught:
        assert naming(code), code
    allowed = ['result["ntp"] = trace', 'data.get("ntp")', 'class M:\n    kind = "sbd"\n',
               'def f():\n    """decoder="jacobi" in a docstring"""\n', 'x = 1  # remask_threshold in a comment',
               'css = "sbd-title"', 'x = {"ntp": 1}']
    for code in allowed:
        assert not naming(code), code


def test_each_built_in_decoder_is_described_in_its_own_module():
    for spec in registry.decoders():
        module = sys.modules[spec.decoding.__module__]
        assert spec in module.SPECS and spec.decoding.__module__.split(".")[-1] in registry.BUILTIN_MODULES


# -- the app reads the registry ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def handlers(model):
    from sbd_viz.app import Handlers, SpeedQualityCurve
    h = Handlers(model, SpeedQualityCurve(compute=False))
    yield h
    h.close()  # its γ maps' worker stops with the module (the guard in conftest checks it)


@pytest.mark.heavy
def test_the_app_greys_out_what_the_chosen_decoder_does_not_take(handlers):
    from sbd_viz.app.inputs import CONTROLS

    for label in ("SBD", "Jacobi", "prompt lookup", "SBD + remasking"):
        spec = sv.registry.by_label(label)
        updates = handlers.decoder_changed(label, "entropy_bounded")
        # the slider is γ for a decoder that takes it, and a decoder's own knob (prompt lookup's draft length)
        slider = {"gamma": "gamma" in spec.takes or (spec.knob is not None and spec.knob.name in spec.own)}
        expected = {c: c in spec.takes for c in CONTROLS} | slider
        assert {c: u["interactive"] for c, u in zip(CONTROLS, updates)} == expected, label
    gamma = handlers.decoder_changed("SBD", "left_to_right")[CONTROLS.index("gamma")]  # a rule with no knob
    assert gamma["interactive"] is False


@pytest.mark.heavy
def test_the_app_streams_any_decoder_and_labels_it(handlers, model, monkeypatch):
    """Jacobi's calls stream in as SBD's do; its text, its wall-clock card and its comparison say "Jacobi"."""
    from sbd_viz.app import page

    monkeypatch.setattr(page, "PROGRESS_EVERY", -1.0)  # a progress view after every step
    from sbd_viz.app.state import Controls

    out = list(handlers.decode(Controls("abc abc abc ", "entropy_bounded", 0.1, False, 4, 12, 0.0, 0, False, False,
                                        "Jacobi")))
    progress = [o for o in out if "data-progress" in str(o[2])]
    session, _, metrics, texts, _ = out[-1]
    trace = session.trace
    assert trace.config["decoder"] == "jacobi" and len(progress) >= trace.nfe - 1 >= 1
    assert "Jacobi (decoding)" in str(progress[0][3])
    assert "Jacobi " in metrics and " ms" in metrics and "SBD" not in metrics
    assert ">Jacobi<" in texts and "SBD" not in texts
    assert trace.output_ids == sv.decode(model, "abc abc abc ", decoder="jacobi", block_size=4,
                                         max_new_tokens=12).output_ids
