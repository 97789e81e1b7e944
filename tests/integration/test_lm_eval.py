"""sbd_viz as an lm-evaluation-harness model, through lm-eval's own entry points: ``simple_evaluate`` and its
command line in a subprocess, on a tiny local model and tiny local tasks (JSON lines files, offline).

The decoder and γ given in model_args change the outputs and the calls; verified SBD's samples are NTP's; a stop
string ends the generation; each sample's trace reads back; log-likelihoods equal lm-eval's own ``hf`` model on the
same weights; bad model_args are refused by name.
"""

import os

# nothing here may reach the Hub (set before lm-eval and datasets read them)
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import sharp_model

import sbd_viz as sv
from sbd_viz.decoders import registry

lm_eval = pytest.importorskip("lm_eval")
from lm_eval import simple_evaluate  # noqa: E402
from lm_eval.api.registry import get_model  # noqa: E402
from lm_eval.tasks import TaskManager  # noqa: E402

from sbd_viz.harness import TASKS  # noqa: E402 (registers the model)
from sbd_viz.harness.cli import run_argv, samples_report  # noqa: E402
from sbd_viz.harness.samples import traced_samples  # noqa: E402

PROMPTS = [("assert 12 + 30 == ", "42"), ("assert sorted([3, 1, 2]) == ", "[1, 2, 3]"), ("assert 7 * 6 == ", "42")]
GEN = """task: tiny_gen
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
output_type: generate_until
test_split: test
doc_to_text: "{{{{prompt}}}}"
doc_to_target: "{{{{answer}}}}"
process_results: !function sbd_viz.harness.task_data.score_assert
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
generation_kwargs:
  until: ["\\n"]
  max_gen_toks: 12
  do_sample: false
"""
MC = """task: tiny_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
output_type: multiple_choice
test_split: test
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: label
metric_list:
  - metric: acc
"""
ROLLING = """task: tiny_rolling
dataset_path: json
dataset_kwargs:
  data_files:
    test: {docs}
output_type: loglikelihood_rolling
test_split: test
doc_to_text: ""
doc_to_target: "{{{{text}}}}"
metric_list:
  - metric: word_perplexity
"""


def _jsonl(path: Path, rows) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    """A tiny SBD model saved as lm-eval's users save one (``save_pretrained``), three tiny tasks beside it, and one
    TaskManager over them (lm-eval's own tasks left out: indexing them takes seconds)."""
    root = tmp_path_factory.mktemp("lm_eval")
    model = sharp_model()
    model.model.save_pretrained(root / "model")
    model.tokenizer.save_pretrained(root / "model")
    tasks = root / "tasks"
    tasks.mkdir()
    gen = _jsonl(root / "gen.jsonl", [{"prompt": p, "answer": a, "family": "add"} for p, a in PROMPTS])
    mc = _jsonl(root / "mc.jsonl", [
        {"question": "assert 1 + 1 ==", "choices": [" 2", " 3", " 11"], "label": 0},
        {"question": "xs = [4, 1]\nassert len(xs) ==", "choices": [" 2", " [4, 1]"], "label": 0},
    ])
    rolling = _jsonl(root / "rolling.jsonl", [{"text": "assert sorted([3, 1, 2]) == [1, 2, 3]\n"},
                                              {"text": "def f(x):\n    return x + 1\n" * 30}])  # past 512: windows
    (tasks / "tiny_gen.yaml").write_text(GEN.format(docs=gen))
    (tasks / "tiny_mc.yaml").write_text(MC.format(docs=mc))
    (tasks / "tiny_rolling.yaml").write_text(ROLLING.format(docs=rolling))
    return {"root": root, "model": root / "model", "tasks": tasks,
            "manager": TaskManager(include_path=str(tasks), include_defaults=False)}


def evaluate(local, model_args: str, tasks=("tiny_gen",), model="sbd_viz", **kwargs) -> dict:
    return simple_evaluate(model=model, model_args=model_args, tasks=list(tasks), task_manager=local["manager"],
                           log_samples=True, device="cpu", **kwargs)


def outputs(result, task="tiny_gen") -> list[str]:
    return [s["resps"][0][0] for s in sorted(result["samples"][task], key=lambda s: s["doc_id"])]


def speed(result, task="tiny_gen") -> dict:
    return result["config"]["sbd_viz"]["tasks"][task]


@pytest.fixture(scope="module")
def runs(local):
    """The tiny generation task under each setting the tests compare, once each."""
    base = f"model={local['model']}"
    return {
        "ntp": evaluate(local, f"{base},decoder=ntp"),
        "sbd_g0": evaluate(local, f"{base},decoder=sbd,gamma=0.0"),
        "sbd_g2": evaluate(local, f"{base},decoder=sbd,gamma=2.0,trace_dir={local['root'] / 'traces'}"),
        "verified": evaluate(local, f"{base},decoder=sbd,gamma=2.0,verify=True"),
        "jacobi": evaluate(local, f"{base},decoder=jacobi"),
    }


def test_gamma_in_model_args_changes_the_outputs_and_the_calls(runs):
    assert speed(runs["sbd_g2"])["calls"] < speed(runs["sbd_g0"])["calls"]
    assert outputs(runs["sbd_g2"]) != outputs(runs["sbd_g0"])
    for run in runs.values():  # every result carries tokens per call, by the count names the views use
        row = speed(run)
        assert row["tokens_per_call"] == pytest.approx(row["tokens"] / row["calls"])
        assert row["generations"] == len(PROMPTS) and "tokens per call after the prefill" in row


def test_the_decoder_in_model_args_changes_the_outputs_and_the_calls(runs):
    assert outputs(runs["sbd_g2"]) != outputs(runs["ntp"])
    assert speed(runs["sbd_g2"])["calls"] < speed(runs["ntp"])["calls"]
    assert runs["jacobi"]["config"]["sbd_viz"]["decoder"] == "jacobi"
    assert runs["verified"]["config"]["sbd_viz"]["label"] == "verified SBD"


def test_verified_sbd_samples_are_ntps(runs):
    assert outputs(runs["verified"]) == outputs(runs["ntp"]) == outputs(runs["jacobi"])
    assert [s["acc"] for s in runs["verified"]["samples"]["tiny_gen"]] == [
        s["acc"] for s in runs["ntp"]["samples"]["tiny_gen"]]


def test_a_stop_string_ends_the_generation(local, runs):
    text = outputs(runs["ntp"])[0]
    # a piece of the text NTP writes, first seen past its start: given as the task's until, the text ends before it
    stop = next(text[i : i + 2] for i in range(3, len(text) - 1) if text.index(text[i : i + 2]) == i)
    cut = evaluate(local, f"model={local['model']},decoder=ntp,trace_dir={local['root'] / 'stopped'}",
                   gen_kwargs={"until": [stop]}, limit=1)
    assert outputs(cut) == [text[: text.index(stop)]]
    trace = sv.load_trace(Path(cut["config"]["sbd_viz"]["traces"]) / "tiny_gen" / "doc0.json")
    assert trace.stop_reason == "stop" and trace.n_tokens < speed(runs["ntp"])["tokens"] / len(PROMPTS)


def test_each_samples_trace_reads_back(local, runs):
    run = runs["sbd_g2"]["config"]["sbd_viz"]
    folder = local["root"] / "traces" / run["trace_run"] / "tiny_gen"
    assert Path(run["traces"]) / "tiny_gen" == folder
    for sample in runs["sbd_g2"]["samples"]["tiny_gen"]:
        trace = sv.load_trace(folder / f"doc{sample['doc_id']}.json")
        assert trace.text.split("\n")[0] == sample["resps"][0][0] and trace.config["decoder"] == "sbd"
        assert trace.config["gamma"] == 2.0 and trace.meta["lm_eval"]["doc_id"] == sample["doc_id"]
        assert trace.meta["lm_eval"]["prompt_hash"] == sample["prompt_hash"]
    assert sum(sv.load_trace(p).nfe for p in folder.glob("*.json")) == speed(runs["sbd_g2"])["calls"]


def test_runs_into_one_folder_keep_their_own_traces(local):
    """A γ sweep saved into one output folder, as lm-eval's command line saves a run (its EvaluationTracker): each
    logged sample pairs with the trace of its own run, not the last run's."""
    from lm_eval.loggers import EvaluationTracker

    out, gammas = local["root"] / "sweep", (0.0, 2.0)
    for gamma in gammas:
        tracker = EvaluationTracker(output_path=str(out))
        result = evaluate(local, f"model={local['model']},decoder=sbd,gamma={gamma},trace_dir={out / 'sbd_viz_traces'}",
                          evaluation_tracker=tracker)
        tracker.save_results_aggregated(results=result, samples=result["samples"])
        for task in result["configs"]:
            tracker.save_results_samples(task_name=task, samples=result["samples"][task])
    rows = traced_samples(out)
    assert len(rows) == len(gammas) * len(PROMPTS) and len({r["run"] for r in rows}) == len(gammas)
    for row in rows:
        trace = sv.load_trace(row["trace"])
        assert trace.text.split("\n")[0] == row["record"]["resps"][0][0]
        assert trace.meta["lm_eval"]["prompt_hash"] == row["record"]["prompt_hash"]
    used = sorted(sv.load_trace(r["trace"]).config["gamma"] for r in rows)
    assert used == sorted(list(gammas) * len(PROMPTS))
    report = samples_report(out)
    assert all(f"| SBD, gamma={g} (" in report for g in gammas), report


def test_log_likelihoods_equal_lm_evals_hf_model_on_the_same_weights(local):
    tasks = ("tiny_mc", "tiny_rolling")
    ours = evaluate(local, f"model={local['model']},decoder=sbd,gamma=0.5", tasks)
    hf = evaluate(local, f"pretrained={local['model']}", tasks, model="hf")
    for task in tasks:
        a = sorted(ours["samples"][task], key=lambda s: s["doc_id"])
        b = sorted(hf["samples"][task], key=lambda s: s["doc_id"])
        assert [s["arguments"] for s in a] == [s["arguments"] for s in b]
        for x, y in zip(a, b):
            for got, want in zip(x["resps"], y["resps"]):
                got, want = got[0], want[0]
                if task == "tiny_mc":
                    assert got[0] == pytest.approx(want[0], abs=1e-4) and got[1] == want[1]
                else:
                    assert got == pytest.approx(want, abs=1e-3)
        assert ours["results"][task] == pytest.approx(hf["results"][task], abs=1e-4)
    assert ours["results"]["tiny_rolling"]["word_perplexity,none"] > 1


def test_bad_model_args_are_refused_by_name(local):
    make = get_model("sbd_viz").create_from_arg_string
    with pytest.raises(ValueError, match="gama"):
        make(f"model={local['model']},decoder=sbd,gama=0.5")
    with pytest.raises(ValueError, match=r"^gamma: .*does not take it"):
        make(f"model={local['model']},decoder=jacobi,gamma=0.5")
    with pytest.raises(ValueError, match=r"^decoder: unknown decoder 'sdb'"):
        make(f"model={local['model']},decoder=sdb")
    with pytest.raises(ValueError, match=r"^max_new_tokens: set by each task's max_gen_toks"):
        make(f"model={local['model']},max_new_tokens=5")
    for size in ("0", "two"):
        with pytest.raises(ValueError, match=r"^batch_size: must be a whole number"):
            make(f"model={local['model']}", {"batch_size": size})


def test_batch_size_decodes_requests_side_by_side_with_the_same_texts_and_calls(local, runs):
    """lm-eval's batch_size (as its command line passes it, text) decodes the task's requests in fewer forwards of
    the model, each writing what it writes alone; a decoder that cannot be batched (tree drafting) says so and
    decodes one at a time."""
    model = sv.load_model(local["model"])
    forwards = []
    model.model.register_forward_pre_hook(lambda module, args: forwards.append(1))
    counted = {}
    for size in ("1", "4"):
        forwards.clear()
        result = evaluate(local, {"model": model, "decoder": "sbd", "gamma": 2.0}, batch_size=size)
        counted[size] = len(forwards)
        assert outputs(result) == outputs(runs["sbd_g2"]) and speed(result)["calls"] == speed(runs["sbd_g2"])["calls"]
    assert counted["4"] < counted["1"], counted
    with pytest.warns(UserWarning, match="one request at a time: drafting: 'tree' is not batched"):
        tree = evaluate(local, {"model": model, "decoder": "sbd", "verify": True, "drafting": "tree"}, batch_size=4)
    assert outputs(tree) == outputs(runs["ntp"])


def test_the_runner_puts_the_shipped_tasks_on_the_include_path_and_the_traces_beside_the_samples():
    argv = run_argv(["--model", "sbd_viz", "--model_args", "decoder=sbd", "--tasks", "sbd_asserts", "--log_samples",
                     "--output_path", "out"])
    assert argv[argv.index("--include_path") + 1] == str(TASKS)
    assert argv[argv.index("--model_args") + 1] == f"decoder=sbd,trace_dir={Path('out') / 'sbd_viz_traces'}"
    mine = run_argv(["--model_args", "trace_dir=t", "--include_path", "mine", "--model", "sbd_viz", "-s",
                     "--output_path", "o/r.json"])
    assert mine[mine.index("--include_path") + 1] == f"mine:{TASKS}" and "trace_dir=t" in mine


def test_lm_evals_own_command_line_runs_a_task_through_sbd_viz(local):
    """``lm-eval run`` itself, in a subprocess: the model is found when the task's YAML imports sbd_viz (as the
    shipped tasks' and the tiny task's scorer do); the results carry tokens per call, each sample has its trace."""
    out = local["root"] / "cli"
    lm_eval_cli = Path(sys.executable).parent / "lm-eval"
    done = subprocess.run(
        [str(lm_eval_cli), "run", "--model", "sbd_viz", "--model_args",
         f"model={local['model']},decoder=sbd,gamma=2.0,trace_dir={out / 'sbd_viz_traces'}",
         "--tasks", str(local["tasks"] / "tiny_gen.yaml"), "--device", "cpu", "--log_samples", "--output_path",
         str(out)],
        capture_output=True, text=True, timeout=600, env={**os.environ, "HF_HUB_OFFLINE": "1",
                                                         "HF_DATASETS_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = out.rglob("results_*.json")
    row = json.loads(results.read_text())["config"]["sbd_viz"]["tasks"]["tiny_gen"]
    assert row["tokens_per_call"] > 1 and row["generations"] == len(PROMPTS)
    samples = traced_samples(out)
    assert len(samples) == len(PROMPTS) and all(s["trace"] is not None for s in samples)
    assert [s["score"] for s in samples] == sorted(s["score"] for s in samples)  # failing first
    assert sv.load_trace(samples[0]["trace"]).meta["lm_eval"]["doc_id"] == samples[0]["doc_id"]


class _Cut(sv.NTPDecoding):
    """A plugin's decoder with a setting of its own: greedy NTP that writes at most ``most`` tokens."""

    def __init__(self, model, prompt, config, most=100):
        super().__init__(model, prompt, dataclasses.replace(config, max_new_tokens=min(config.max_new_tokens, most)))


def test_a_plugins_decoder_and_its_own_setting_come_through_model_args(local, runs):
    spec = sv.DecoderSpec(name="ntp_cut", label="NTP, cut", decoding=_Cut, own={"most": 100}, exact=True,
                          model="causal")
    sv.register_decoder(spec)
    try:
        cut = evaluate(local, f"model={local['model']},decoder=ntp_cut,most=3")
        assert cut["config"]["sbd_viz"]["settings"] == {"most": 3}
        assert outputs(cut) == [text[:3] for text in outputs(runs["ntp"])]
        assert speed(cut)["tokens"] == 3 * len(PROMPTS) < speed(runs["ntp"])["tokens"]
        with pytest.raises(ValueError, match="^mots: "):
            get_model("sbd_viz").create_from_arg_string(f"model={local['model']},decoder=ntp_cut,mots=3")
    finally:
        registry.REGISTRY.unregister("ntp_cut")
