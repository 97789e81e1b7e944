"""Analysis: gap-fill events and their rendering, teacher-forced NTP, sweeps and their cache, the CLI."""

import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch

import sbd_viz as sv
from sbd_viz.analysis import gaps, suite_sweep
from sbd_viz.cli import main as cli_main
from sbd_viz import plots

from conftest import HAND_PROMPT, bench_script, hand_trace, tiny_model
from test_engine import _scripted

@pytest.mark.heavy
def test_gap_fills_found_exactly_where_a_masked_slot_is_left_of_a_commit():
    trace = hand_trace(stop_at=13)  # the output ends at the newline
    events = sv.gap_fill_events(None, trace)
    assert [(e["call"], e["block"], e["slot"], e["gap"]) for e in events] == [
        (0, 0, 5, 5), (1, 0, 3, 2), (6, 2, 1, 1), (6, 2, 3, 2)]
    assert [e["state"] for e in events] == [
        "go: <m><m><m><m><m>f", "go: a<m><m>d", "go: abcdefghij<m>l", "go: abcdefghij<m>l<m>m"]
    assert [e["position"] for e in events] == [5, 3, 11, 13]
    assert [e["kept"] for e in events] == [True, True, True, False]
    assert events[-1]["suspicion"] == 0  # discarded after the stop: cannot have hurt the answer
    assert all(e["ntp_agrees"] is None and e["correct"] is None for e in events)  # no model, no item


@pytest.mark.heavy
def test_every_count_of_gap_fills_is_the_kept_one(tiny, monkeypatch):
    """One definition (Trace.kept_gap_fills): evaluate, sweep, the report and the calls timeline all count
    the 3 gap fills the output keeps, not the 4 the decode made (the stop discarded block 2's slot 3)."""
    trace = hand_trace(stop_at=13)
    monkeypatch.setattr(sv.analysis.evaluation, "decode", lambda *a, **k: trace)
    monkeypatch.setattr(sv.analysis.evaluation, "decode_ntp", lambda *a, **k: trace)
    item = sv.tasks.SuiteItem(prompt=HAND_PROMPT, answer="abcdefghijkl", family="add")
    result = sv.evaluate(tiny, [item], measure_speedup=False)
    assert result["rows"][0]["gap_fills"] == 3 and result["gap_fill_rate"] == pytest.approx(3 / 13)
    row = sv.sweep(tiny, [item], gammas=(0.1,), cache_dir=None, progress=False).iloc[0]
    assert row["n_gap_fills"] == 3 and row["gap_fill_rate"] == pytest.approx(3 / 13) and row["n_with_gaps"] == 1
    assert sv.gap_fill_report([trace])["kept"].sum() == 3
    assert sum(plots.per_call_counts(trace)[1]) == 3  # the timeline's gap-fill bars


def _replayed_gap_fills(trace):
    """(call, slot, gap) of every commit that leaves a masked slot to its left, from masked/committed sets."""
    out = []
    for s in trace.steps:
        after = set(s.masked) - set(s.committed_slots)
        for slot in s.committed_slots:
            gap = sum(1 for m in after if m < slot)
            if gap:
                out.append((s.call, slot, gap))
    return out


@pytest.mark.heavy
def test_decoded_gap_fills_match_a_replay_and_render_the_block_state():
    model, prompt = _scripted("abcdefghijklmnopqrstuvwxyz")
    trace = sv.decode(model, prompt, gamma=0.5, block_size=8, max_new_tokens=16)
    events = sv.gap_fill_events(None, trace)
    assert events and [(e["call"], e["slot"], e["gap"]) for e in events] == _replayed_gap_fills(trace)
    for e in events:
        step = trace.steps[e["call"]]
        state = trace.block_state(step)[: e["slot"] + 1]
        shown = "".join("<m>" if t is None else t for t in state)
        assert e["state"].endswith(shown) and shown.count("<m>") == e["gap"]
        assert trace.text[e["position"]] == e["text"]  # the committed token is what the output holds


@pytest.mark.parametrize("kwargs", [dict(rule="left_to_right"), dict(gamma=0.5, gap_free=True),
                                    dict(gamma=100.0, gap_free=True), dict(rule="top_k", gamma=3, gap_free=True)])
@pytest.mark.heavy
def test_no_gap_fills_left_to_right_or_gap_free(kwargs):
    model, prompt = _scripted("abcdefghijklmnopqrstuvwxyz")
    trace = sv.decode(model, prompt, block_size=8, max_new_tokens=16, **kwargs)
    assert sv.gap_fill_events(None, trace) == []
    assert sv.gap_fill_report([trace]).empty


def _greedy_token_by_token(model, trace):
    """Uncached greedy choice at each output position given the trace's own prefix, one forward per token."""
    ids = list(trace.prompt_ids)
    choices, logprobs = [], []
    for tok in trace.output_ids:
        with torch.no_grad():
            logp = torch.log_softmax(model.model(input_ids=torch.tensor([ids])).logits[0, -1].float(), -1)
        choices.append(int(logp.argmax()))
        logprobs.append(float(logp[tok]))
        ids.append(tok)
    return choices, logprobs


@pytest.mark.heavy
def test_teacher_forced_ntp_equals_token_by_token_greedy(tiny):
    trace = sv.decode(tiny, "assert 1 + 2 == ", gamma=1.0, block_size=4, max_new_tokens=10)
    tf = sv.teacher_forced_ntp(tiny, trace)
    choices, logprobs = _greedy_token_by_token(tiny, trace)
    assert tf["ntp_ids"] == choices
    assert tf["agrees"] == [c == t for c, t in zip(choices, trace.output_ids)]
    assert tf["agreement"] == pytest.approx(sum(tf["agrees"]) / trace.n_tokens)
    assert tf["logprobs"] == pytest.approx(logprobs, abs=1e-4)
    assert tf["divergence_source"] == "teacher_forced"
    assert tf["first_divergence"] == next((i for i, a in enumerate(tf["agrees"]) if not a), None)

    ntp = sv.decode_ntp(tiny, "assert 1 + 2 == ", max_new_tokens=10)
    assert sv.teacher_forced_ntp(tiny, ntp)["agreement"] == 1.0  # NTP agrees with itself
    assert sv.teacher_forced_ntp(tiny, ntp)["first_divergence"] is None
    vs_run = sv.teacher_forced_ntp(tiny, trace, ntp_trace=ntp)
    first = next((i for i, (a, b) in enumerate(zip(trace.output_ids, ntp.output_ids)) if a != b), None)
    assert vs_run["divergence_source"] == "ntp_trace" and vs_run["first_divergence"] == first
    # before the first disagreement the prefixes are equal, so both ways of finding it agree
    assert vs_run["first_divergence"] == tf["first_divergence"]


@pytest.mark.heavy
def test_events_with_a_model_carry_ntp_outcomes_and_rank_by_suspicion(tiny):
    model, prompt = _scripted("abcdefghijklmnopqrstuvwxyz")
    trace = sv.decode(model, prompt, gamma=0.5, block_size=8, max_new_tokens=16)
    tf = sv.teacher_forced_ntp(model, trace)
    events = sv.gap_fill_events(model, trace)
    for e in events:
        assert e["ntp_agrees"] == tf["agrees"][e["position"]]
        assert e["ntp_logprob"] == tf["logprobs"][e["position"]]
    item = sv.tasks.SuiteItem(prompt=prompt, answer="wrong", family="add")
    report = sv.gap_fill_report([trace, trace], model=model, items=[None, item])
    assert len(report) == 2 * len(events)
    assert report["suspicion"].is_monotonic_decreasing
    assert set(report[report["trace"] == 1]["correct"]) == {False}
    assert report["trace"].iloc[0] == 1  # the wrong answer adds to every event's suspicion


def test_suspicion_formula():
    assert gaps.suspicion(4, 16, 0.0) == pytest.approx(0.25)
    base = gaps.suspicion(2, 16, 0.7)
    assert base == pytest.approx(2 / 16 + 1 - math.exp(-0.7))
    assert gaps.suspicion(2, 16, 0.7, ntp_agrees=False) == pytest.approx(base + 2)
    assert gaps.suspicion(2, 16, 0.7, ntp_logprob=math.log(0.25)) == pytest.approx(base + 0.75)
    assert gaps.suspicion(2, 16, 0.7, correct=False) == pytest.approx(base + 1)
    assert gaps.suspicion(2, 16, 0.7, ntp_agrees=False, kept=False) == 0
    assert gaps.suspicion(8, 16, 0.7) > gaps.suspicion(2, 16, 0.7)


def test_bad_input_names_the_argument(tiny):
    trace = hand_trace()
    with pytest.raises(ValueError, match="items"):
        sv.gap_fill_report([trace], items=[])
    with pytest.raises(TypeError, match="trace"):
        sv.gap_fill_events(None, "not a trace")
    with pytest.raises(ValueError, match="item"):
        sv.gap_fill_events(None, trace, item=sv.tasks.SuiteItem("other prompt", "1", "add"))
    with pytest.raises(ValueError, match="ntp_trace"):
        sv.teacher_forced_ntp(tiny, trace, ntp_trace=sv.decode_ntp(tiny, "x", max_new_tokens=2))
    items = sv.tasks.load_suite(per_family=1, families=("add",))
    for kwargs, name in [(dict(gammas=()), "gammas"), (dict(gammas=(-1.0,)), "gamma"), (dict(block_sizes=(0,)),
                         "block_size"), (dict(rules=("nope",)), "rule"), (dict(gap_free=("no",)), "gap_free"),
                         (dict(verify=("no",)), "verify"), (dict(verify=()), "verify"),
                         (dict(max_new_tokens=0), "max_new_tokens")]:
        with pytest.raises(ValueError, match=name):
            sv.sweep(tiny, items, cache_dir=None, progress=False, **kwargs)
    with pytest.raises(ValueError, match="suite_or_prompts"):
        sv.sweep(tiny, [], cache_dir=None, progress=False)
    with pytest.raises(ValueError, match="suite_or_prompts"):
        sv.sweep(tiny, ["ok", items[0]], cache_dir=None, progress=False)


# -- sweeps ----------------------------------------------------------------------------------
ITEMS = sv.tasks.load_suite(per_family=1, families=("add", "len"))
SWEEP = dict(gammas=(0.0, 5.0), block_sizes=(4,), gap_free=(False, True), max_new_tokens=6, progress=False)


@pytest.fixture
def counted(monkeypatch):
    """Counts the settings the sweep actually computes (each is one ``_measure`` run)."""
    runs = []
    real = suite_sweep._measure

    def counting(model, items, scored, setting, *args):
        runs.append(setting)
        return real(model, items, scored, setting, *args)

    monkeypatch.setattr(suite_sweep, "_measure", counting)
    return runs


@pytest.fixture(scope="module")
def swept(tiny, tmp_path_factory):
    cache = tmp_path_factory.mktemp("sbd_cache")
    return sv.sweep(tiny, ITEMS, cache_dir=cache, **SWEEP), cache


@pytest.mark.heavy
def test_sweep_frame_shape(swept):
    df, _ = swept
    assert len(df) == 4 + 1 and list(df["rule"]).count("ntp") == 1
    ntp = df[df["rule"] == "ntp"].iloc[0]
    assert ntp["calls_per_token"] == 1.0  # measured: one call per token
    assert ntp["ntp_agreement"] == 1.0
    sbd = df[df["rule"] != "ntp"]
    assert (sbd[sbd["gap_free"]]["gap_fill_rate"] == 0).all()
    table = sv.gap_free_ablation(df)
    assert len(table) == 2 and {"accuracy_free", "accuracy_gap_free", "accuracy_delta"} <= set(table.columns)
    with pytest.raises(ValueError, match="gap_free"):
        sv.gap_free_ablation(df[~df["gap_free"]])


@pytest.mark.heavy
def test_repeated_sweep_hits_the_cache(tiny, swept, counted, monkeypatch):
    df, cache = swept
    forwards = []
    real_forward = tiny.model.forward
    monkeypatch.setattr(tiny.model, "forward", lambda *a, **k: forwards.append(1) or real_forward(*a, **k))
    again = sv.sweep(tiny, ITEMS, cache_dir=cache, **SWEEP)
    assert counted == [] and forwards == []  # no setting computed, not one model call
    pd.testing.assert_frame_equal(again, df)  # wall times and measured_at included: the stored rows
    files = sorted(cache.glob("sweep-*.json"))
    assert len(files) == 4
    stored = json.loads(files[0].read_text())  # plain JSON, with the key it was stored under
    assert stored["key"]["fingerprint"] == tiny.fingerprint()


@pytest.mark.parametrize("change", ["gamma", "block_size", "gap_free", "verify", "rule", "max_new_tokens",
                                    "items"])
@pytest.mark.heavy
def test_any_changed_setting_misses_the_cache(tiny, swept, counted, change):
    _, cache = swept
    kwargs = dict(SWEEP, gap_free=(False,), gammas=(0.0,))  # a subset of what is cached: a hit
    sv.sweep(tiny, ITEMS, cache_dir=cache, **kwargs)
    assert counted == []
    items = ITEMS
    if change == "gamma":
        kwargs["gammas"] = (0.25,)
    elif change == "block_size":
        kwargs["block_sizes"] = (3,)
    elif change == "gap_free":
        kwargs["gap_free"] = (True,)
        kwargs["gammas"] = (0.5,)
    elif change == "verify":
        kwargs["verify"] = (True,)
    elif change == "rule":
        kwargs["rules"] = ("entropy_threshold",)
    elif change == "max_new_tokens":
        kwargs["max_new_tokens"] = 5
    else:
        items = ITEMS[:1]
    sv.sweep(tiny, items, cache_dir=cache, **kwargs)
    assert len(counted) == 1


@pytest.mark.heavy
def test_another_model_misses_the_cache(swept, counted):
    _, cache = swept
    other = tiny_model("llama", seed=1)
    sv.sweep(other, ITEMS, cache_dir=cache, **dict(SWEEP, gap_free=(False,), gammas=(0.0,)))
    assert len(counted) == 1


@pytest.mark.heavy
def test_damaged_cache_file_is_recomputed(tiny, tmp_path, counted):
    kwargs = dict(SWEEP, gap_free=(False,), gammas=(5.0,))
    first = sv.sweep(tiny, ITEMS[:1], cache_dir=tmp_path, **kwargs)
    (path,) = tmp_path.glob("sweep-*.json")
    path.write_text("{broken")
    second = sv.sweep(tiny, ITEMS[:1], cache_dir=tmp_path, **kwargs)
    assert len(counted) == 2
    assert json.loads(path.read_text())["row"]["gamma"] == 5.0
    cols = ["calls_per_token", "accuracy", "gap_fill_rate", "ntp_agreement"]
    pd.testing.assert_frame_equal(first[cols], second[cols])


@pytest.mark.heavy
def test_sweep_rows_match_individual_decodes(tiny, swept):
    df, _ = swept
    for _, row in df[df["rule"] != "ntp"].iterrows():
        traces = [sv.decode(tiny, item.prompt, rule=row["rule"], gamma=row["gamma"],
                            block_size=int(row["block_size"]), gap_free=bool(row["gap_free"]),
                            max_new_tokens=int(row["max_new_tokens"]), stop="\n") for item in ITEMS]
        calls, tokens = sum(t.nfe for t in traces), sum(t.n_tokens for t in traces)
        assert row["calls_per_token"] == pytest.approx(calls / tokens)
        assert row["tokens_per_call"] == pytest.approx(tokens / calls)
        correct = [sv.tasks.score(item, t.text) for item, t in zip(ITEMS, traces)]
        assert row["accuracy"] == pytest.approx(sum(correct) / len(ITEMS))
        kept = sum(1 for t in traces for e in sv.gap_fill_events(None, t) if e["kept"])
        assert row["n_gap_fills"] == kept and row["gap_fill_rate"] == pytest.approx(kept / tokens)
        ntp = [sv.decode_ntp(tiny, item.prompt, max_new_tokens=int(row["max_new_tokens"]), stop="\n")
               for item in ITEMS]
        assert row["speedup_calls"] == pytest.approx(sum(t.nfe for t in ntp) / calls)


@pytest.mark.heavy
def test_sweep_frame_has_a_verify_column(swept):
    df, _ = swept
    assert list(df.columns) == list(suite_sweep.SWEEP_COLUMNS)
    assert df["verify"].dtype == bool and not df["verify"].any()  # the default: unverified; NTP's row too


@pytest.mark.heavy
def test_a_verified_sweep_row_is_ntp_exactly_on_the_shipped_model(shipped):
    """Verified SBD is lossless: on real suite items its row says the text is NTP's, with NTP's accuracy."""
    items = sv.tasks.load_suite(per_family=1, families=("add", "sorted", "range", "ctx_sorted"))
    df = sv.sweep(shipped, items, gammas=(1.0,), verify=(True,), max_new_tokens=48, cache_dir=None,
                  progress=False)
    ntp = df[df["rule"] == "ntp"].iloc[0]
    verified = df[df["verify"]].iloc[0]
    assert len(df) == 2 and not ntp["verify"]
    assert verified["same_as_ntp"] == 1.0 and verified["ntp_agreement"] == 1.0
    assert verified["accuracy"] == ntp["accuracy"]
    assert verified["tokens_per_call"] > 1  # several tokens per call, still exactly NTP's text


@pytest.mark.heavy
def test_plain_prompts_have_no_accuracy(tiny):
    df = sv.sweep(tiny, ["x = ", "print("], gammas=(5.0,), block_sizes=(4,), max_new_tokens=4, cache_dir=None,
                  progress=False)
    assert df["accuracy"].isna().all() and df["accuracy_with_gaps"].isna().all()
    assert df["calls_per_token"].notna().all()


# -- the CLI -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def model_dir(tiny, tmp_path_factory):
    path = tmp_path_factory.mktemp("tiny_model")
    tiny.model.save_pretrained(path)
    tiny.tokenizer.save_pretrained(path)
    return path


def test_cli_gaps(tmp_path, capsys, model_dir):
    path = hand_trace(stop_at=13).save(tmp_path / "t.json")
    assert cli_main(["gaps", str(path)]) == 0
    out = capsys.readouterr().out
    assert "3 gap fill(s) kept in the output, 1 discarded by the stop" in out
    assert "go: a<m><m>d" in out and "--model" in out
    assert cli_main(["gaps", str(path), "--model", str(model_dir)]) == 0
    assert "ntp_agrees" in capsys.readouterr().out
    (tmp_path / "bad.json").write_text("{}")
    assert cli_main(["gaps", str(tmp_path / "bad.json")]) == 2
    assert "not a trace" in capsys.readouterr().err


@pytest.mark.heavy
def test_cli_sweep_writes_csv(tmp_path, capsys, model_dir):
    out = tmp_path / "sweep.csv"
    args = ["sweep", "--model", str(model_dir), "--families", "add", "--per-family", "1", "--gammas", "5",
            "--block-sizes", "4", "--max-new-tokens", "4", "--gap-free-too", "--verify-too",
            "--cache-dir", str(tmp_path / "c"), "--out", str(out)]
    assert cli_main(args) == 0
    df = pd.read_csv(out)
    assert list(df["rule"]) == ["entropy_bounded"] * 4 + ["ntp"]
    assert list(df["verify"]) == [False, True, False, True, False]
    assert "gap-free ablation" in capsys.readouterr().out


@pytest.mark.heavy
def test_bench_latency_table_and_cli_forwarding(tiny, capsys):
    bench = bench_script("bench_speed")
    rows = bench.latency_table(tiny, "assert 1 == ", k=4, reps=2)
    assert [r["n_input"] for r in rows] == [1, 4, 8, 1]
    assert rows[0]["vs_1_token"] == 1.0 and all(r["median_ms"] > 0 for r in rows)
    assert bench.md_table(rows[:1], [("n_input", "tokens in", "d")]) == "| tokens in |\n| --- |\n| 1 |"
    with pytest.raises(SystemExit) as exc:
        cli_main(["bench", "--help"])
    assert exc.value.code == 0 and "--per-family" in capsys.readouterr().out


# -- verified traces --------------------------------------------------------------------------
VERIFIED = Path(__file__).parents[1] / "data" / "trace_verified.json"  # how it was made: tests/unit/test_plots.py


@pytest.mark.heavy
def test_verified_gap_fills_use_the_free_verdicts(monkeypatch):
    """A verified trace brings NTP's verdicts: no model, no teacher-forced pass, and the verdicts equal one."""
    from test_verify import sharp

    trace = sv.load_trace(VERIFIED)
    model = sharp("llama")  # the model that decoded it (seeded): only to recompute the verdicts independently
    tf = sv.teacher_forced_ntp(model, trace)

    def no_second_pass(*args, **kwargs):
        raise AssertionError("a verified trace needs no teacher-forced pass")

    monkeypatch.setattr(gaps, "teacher_forced_ntp", no_second_pass)
    events = sv.gap_fill_events(None, trace)
    assert events == sv.gap_fill_events(model, trace)  # the model adds nothing
    verdicts = trace.verdicts()
    checked = [e for e in events if e["ntp_agrees"] is not None]
    kept = [e for e in checked if e["kept"]]
    rejected = [e for e in checked if not e["ntp_agrees"]]
    assert kept and rejected  # the file holds both, so both branches are exercised
    for e in kept:  # in the output: the free verdict is the teacher-forced one
        assert e["ntp_agrees"] is True and tf["agrees"][e["position"]]
        assert e["ntp_logprob"] == pytest.approx(tf["logprobs"][e["position"]], abs=1e-4)
        assert e["ntp_text"] == tf["ntp_texts"][e["position"]]
    for e in rejected:  # replaced by NTP's token, which the verdict names; it cost a rollback, so it ranks high
        check = verdicts[(e["call"], len(trace.prompt_ids) + e["position"])][1]
        assert not e["kept"] and e["ntp_text"] == check.ntp_text == tf["ntp_texts"][e["position"]]
        assert e["suspicion"] >= 2 and e["correct"] is None
    for e in events:  # a draft a rollback dropped before it was fed was never checked
        if e["ntp_agrees"] is None:
            assert (e["call"], len(trace.prompt_ids) + e["position"]) not in verdicts and not e["kept"]
    report = sv.gap_fill_report(trace)
    assert len(report) == len(events) and report["suspicion"].is_monotonic_decreasing
    assert not report.iloc[0]["ntp_agrees"]  # a rejected draft first


def test_the_bar_table_judges_each_row_on_its_worst_bucket():
    bar_table = bench_script("model_card", folder="tools").bar_table

    def bucket(lo, hi, ntp, sbd, ctx, long_tpc):
        return {"bucket": [lo, hi], "gamma": 0.1, "ntp_accuracy": ntp, "sbd_accuracy": sbd,
                "ctx_ntp_accuracy": ctx, "long_tokens_per_call": long_tpc}
    results = {"rows": [{"rule": "ntp", "accuracy": 0.995}],
               "buckets": [bucket(0, 128, 0.99, 0.985, 0.985, 4.6), bucket(128, 256, 0.99, 0.98, 0.98, 4.5)]}

    def verdicts(res, weights=None):
        return [line.rsplit("|", 2)[1].strip() for line in bar_table(res, weights).splitlines()[4:]]
    assert verdicts(results, 19_400_000) == ["yes"] * 6  # 1.0 point under NTP is within the bar
    assert "0.5 / 1.0" in bar_table(results) and "19.4 MB" in bar_table(results, 19_400_000)
    results["buckets"][1].update(ntp_accuracy=0.979, sbd_accuracy=0.975, ctx_ntp_accuracy=0.97,
                                 long_tokens_per_call=4.49)
    assert verdicts(results, 51_000_000) == ["yes", "**no**", "**no**", "yes", "**no**", "**no**"]
    results["rows"][0]["accuracy"] = 0.98
    results["buckets"][0]["sbd_accuracy"] = 0.97  # 2 points under NTP in the first bucket alone
    assert verdicts(results) == ["**no**"] * 5


@pytest.mark.heavy
def test_the_card_reports_the_default_draw_and_another_seed_is_a_fresh_held_out_draw():
    from sbd_viz import tasks

    card = bench_script("model_card", folder="tools")
    assert card.SUITE_SEED == 1234  # every card so far reports this draw
    assert tasks.load_suite(per_family=5) == tasks.load_suite(per_family=5, seed=card.SUITE_SEED)
    mine, fresh = tasks.load_suite(per_family=40), tasks.load_suite(per_family=40, seed=4321)
    assert len(fresh) == len(mine) and all(tasks.asserts.is_test_line(item.line) for item in fresh)
    assert len({i.line for i in mine} & {i.line for i in fresh}) < len(mine) // 5  # mostly other items


def test_the_equal_speed_table_reads_the_baseline_at_each_settings_speed():
    equal_speed_table = bench_script("model_card", folder="tools").equal_speed_table

    def row(gamma, tokens_per_call, accuracy, rule="entropy_bounded", gap_free=False):
        return {"rule": rule, "gamma": gamma, "gap_free": gap_free, "accuracy": accuracy,
                "long_calls_per_token": 1 / tokens_per_call}
    baseline = [row(0.0, 1.0, 0.99), row(0.1, 4.0, 0.95), row(0.35, 6.0, 0.85),  # gamma 0 is not on the curve
                row(0.1, 5.0, 0.10, gap_free=True), row(0.9, 5.0, 0.10, rule="confidence_threshold")]
    rows = [row(0.05, 5.0, 0.92), row(0.1, 6.0, 0.86), row(0.2, 3.0, 0.99)]
    lines = equal_speed_table(rows, baseline, ("new", "old")).splitlines()[4:]
    assert lines[0] == "| 0.2 | 3.00 | 0.990 | outside old's range |  |"  # slower than any baseline setting
    assert lines[1] == "| 0.05 | 5.00 | 0.920 | 0.900 (between gamma 0.1 and 0.35) | +2.0 points |"  # halfway
    assert lines[2] == "| 0.1 | 6.00 | 0.860 | 0.850 (between gamma 0.1 and 0.35) | +1.0 points |"  # at an end


@pytest.mark.heavy
def test_a_set_stop_event_ends_the_sweep_before_its_next_uncached_setting(tiny, tmp_path, counted):
    """``stop`` is checked before each setting the cache does not hold: cached settings are still read, the first
    uncached one raises ``SweepStopped`` without being measured; an event that stays clear changes nothing."""
    import threading

    one = dict(SWEEP, gap_free=(False,), gammas=(0.0,))
    sv.sweep(tiny, ITEMS, cache_dir=tmp_path, stop=threading.Event(), **one)  # a clear event: measured as ever
    assert len(counted) == 1
    stop = threading.Event()
    stop.set()
    assert len(sv.sweep(tiny, ITEMS, cache_dir=tmp_path, stop=stop, **one)) == 2  # its setting and NTP, cached
    with pytest.raises(sv.analysis.SweepStopped, match="stopped"):
        sv.sweep(tiny, ITEMS, cache_dir=tmp_path, stop=stop, **dict(one, gammas=(0.0, 0.3)))
    assert len(counted) == 1  # γ 0.3 was not measured
