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
from sbd_viz.decoders import registry

from conftest import sharp_model

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "own_decoder.md"
PROMPTS = ["abc abc abc ", "go: 12 + 30 = ", "xyzzy", "assert 48 + 37 == "]


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
    trace = sv.Trace.load(path)
    out["cli_trace"] = [trace.config["decoder"], list(trace.output_ids)]
    out["cli_ladder"] = cli.main(["ladder", prompts[0], "--decoder", "fixed_blocks", "--gammas", "1", "3",
                                  "--max-new-tokens", "8"])
    ladder = sv.gamma_ladder(model, prompts[0], decoder="fixed_blocks", gammas=[1, 2, 4], max_new_tokens=8)
    out["ladder"] = [list(ladder.columns)[:2], list(ladder["slots"]), list(ladder["calls"])]
    handlers = Handlers(model, SpeedQualityCurve(compute=False))
    controls = Controls(prompts[0], "entropy_bounded", 1.0, False, 8, 12, 0.0, 0, True, False)
    figure, rows = handlers.compare(controls, ["SBD", "fixed blocks"])
    out["compare"] = rows
    out["compare_single"] = [sv.decode(model, prompts[0], decoder="fixed_blocks", max_new_tokens=12,
                                       stop="\\n").nfe]
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
    assert len(DOC.read_text().splitlines()) <= 85
    assert set(doc_files()) == {"sbd_blocks/__init__.py", "pyproject.toml"}
    assert '"sbd_viz.decoders"' in doc_files()["pyproject.toml"]


@pytest.mark.heavy
def test_an_installed_decoder_is_listed_after_the_built_ins(plugin_run):
    names = plugin_run["names"]
    assert names[: len(sv.decoders())] == [s.name for s in sv.decoders()] and names[-1] == "fixed_blocks"
    assert plugin_run["module"] == "sbd_blocks"  # the installed package's class, not a copy


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
                          env={**os.environ, "PYTHONPATH": str(site)})
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
        registry._SPECS.pop("greedy_copy", None)


@pytest.mark.parametrize("field, value, message", [
    ("name", "two words", "name"), ("takes", ("remask_threshold",), "takes"), ("own", {"gamma": 1}, "own"),
    ("knob", sv.Knob("gamma"), "knob"), ("model", "rnn", "model"), ("decoding", dict, "decoding"),
])
def test_a_bad_spec_is_refused_by_field(field, value, message):
    fields = dict(name="ok", label="ok", decoding=sv.NTPDecoding, model="causal")
    with pytest.raises((ValueError, TypeError), match=f"^{message}:"):
        sv.DecoderSpec(**{**fields, field: value})


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


SURFACES = ["__init__.py", "cli.py", "widgets.py", "app/page.py", "app/inputs.py", "app/decoders.py", "app/gamma_maps.py",
            "app/views.py", "app/panels.py", "analysis/evaluation.py", "analysis/decoder_sweep.py",
            "analysis/ladder.py", "analysis/gamma_map.py",
            "decoders/batch.py"]


@pytest.mark.parametrize("surface", SURFACES)
def test_no_surface_names_a_decoder(surface):
    """Every surface reads the registry and nothing else: no decoder's name is written in it as a string."""
    text = (ROOT / "sbd_viz" / surface).read_text()
    code = re.sub(r'"""(.*?)"""', "", text, flags=re.S)  # docstrings may show a call, e.g. decoder="ntp"
    code = "\n".join(line.split("#")[0] for line in code.splitlines())
    # a quoted name, not a subscript: result["ntp"] is the session's NTP decode, not a choice of decoder
    named = [s.name for s in registry.decoders() if re.search(rf"""(?<!\[)["']{s.name}["'](?!\])""", code)]
    assert not named, f"{surface} names {named}"


def test_each_built_in_decoder_is_described_in_its_own_module():
    for spec in registry.decoders():
        module = sys.modules[spec.decoding.__module__]
        assert spec in module.SPECS and spec.decoding.__module__.split(".")[-1] in registry.BUILTIN_MODULES


# -- the app reads the registry ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def handlers(model):
    from sbd_viz.app import Handlers, SpeedQualityCurve
    from sbd_viz.app.state import Controls

    return Handlers(model, SpeedQualityCurve(compute=False))


@pytest.mark.heavy
def test_the_app_greys_out_what_the_chosen_decoder_does_not_take(handlers):
    from sbd_viz.app.inputs import CONTROLS

    for label in ("SBD", "Jacobi", "prompt lookup", "SBD + remasking"):
        takes = sv.registry.by_label(label).takes
        updates = handlers.decoder_changed(label, "entropy_bounded")
        assert {c: u["interactive"] for c, u in zip(CONTROLS, updates)} == {c: c in takes for c in CONTROLS}, label
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
