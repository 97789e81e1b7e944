"""One prompt across γ: the ladder's values, its rows against independent decodes, the largest safe γ, the figure
and the CLI."""

import math

import numpy as np
import pandas as pd
import pytest

import sbd_viz as sv
from sbd_viz.decoders.rules import Interval
from sbd_viz.cli import main as cli_main
from sbd_viz.analysis.gamma_ladder import LADDER_COLUMNS, Ladder, ladder_gammas, largest_safe_gamma
from sbd_viz.plots.ladder_figure import gamma_ladder_figure
from sbd_viz.decoders.rules import COMMIT_RULES

PROMPT = "assert 12 + 7 == "


# -- the default ladder -------------------------------------------------------------------
@pytest.mark.parametrize("rule", sv.RULES)
def test_default_gammas_span_the_rules_slider_range(rule):
    spec = COMMIT_RULES[rule]
    gammas = ladder_gammas(rule)
    assert gammas == sorted(set(gammas))
    if not spec.tunable:
        assert gammas == [spec.default]
        return
    lo, hi, step = spec.slider
    assert gammas[0] == lo and gammas[-1] == hi and 9 <= len(gammas) <= 10
    assert all(g in spec.valid for g in gammas)
    # every value is one the slider can show: a whole number of steps from its low end
    assert all(abs((g - lo) / step - round((g - lo) / step)) < 1e-9 for g in gammas)
    assert any(abs(g - spec.default) <= 1.5 * step for g in gammas)  # the rule's default, or a point beside it


def test_entropy_bounded_ladder_is_spelled_out():
    assert ladder_gammas("entropy_bounded") == [0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75, 2.0]
    assert ladder_gammas("top_k") == [1, 3, 5, 7, 9, 10, 12, 14, 16]
    assert all(isinstance(g, int) for g in ladder_gammas("top_k"))
    assert ladder_gammas("entropy_bounded", points=3) == [0.0, 0.1, 1.0, 2.0]


@pytest.mark.parametrize("kwargs, match", [(dict(rule="nope"), "rule:"), (dict(points=1), "points:"),
                                           (dict(points=2.5), "points:")])
def test_ladder_gammas_errors_name_the_argument(kwargs, match):
    with pytest.raises(ValueError, match=match):
        ladder_gammas(**kwargs)


# -- the largest safe γ ---------------------------------------------------------------------
@pytest.mark.parametrize("same, safe", [
    ([True, True, False, True], 0.5),  # a match after a break does not count
    ([True, True, True, True], 2.0),
    ([False, True, True, True], 2.0),  # γ 0 leaves NTP's text: the climb starts at the first γ that keeps it
    ([False, False, False, False], None),
    ([True, False, False, False], 0.0),
])
def test_largest_safe_gamma_follows_the_definition(same, safe):
    frame = pd.DataFrame({"gamma": [0.0, 0.5, 1.0, 2.0], "same_as_ntp": same})
    assert largest_safe_gamma(frame) == safe
    assert largest_safe_gamma(frame.iloc[::-1]) == safe  # the order of the rows does not matter


def test_largest_safe_gamma_of_an_empty_frame_is_none():
    assert largest_safe_gamma(pd.DataFrame({"gamma": [], "same_as_ntp": []})) is None


# -- the ladder on a tiny model ------------------------------------------------------------------
@pytest.mark.heavy
def test_each_row_is_an_independent_decode_at_its_gamma(sharp):
    gammas = [0.0, 0.3, 1.0, 3.0]
    df = sv.gamma_ladder(sharp, PROMPT, gammas=gammas, max_new_tokens=12, stop="\n")
    assert list(df.columns) == list(LADDER_COLUMNS) and list(df["gamma"]) == gammas
    ntp = sv.decode_ntp(sharp, PROMPT, max_new_tokens=12, stop="\n")
    for row in df.itertuples():
        trace = sv.decode(sharp, PROMPT, gamma=row.gamma, max_new_tokens=12, stop="\n")
        assert (row.calls, row.text, row.tokens) == (trace.nfe, trace.text, trace.n_tokens)
        assert row.tokens_per_call == pytest.approx(trace.tokens_per_call)
        assert row.speedup_calls == pytest.approx(ntp.nfe / trace.nfe)
        assert row.same_as_ntp == (trace.text == ntp.text)
        assert row.gap_fills == len(trace.kept_gap_fills())
        where = sv.first_divergence(trace, ntp)
        if where is None or where["call"] is None:
            assert pd.isna(row.divergence_call) and row.divergence_token is None
        else:
            assert (row.divergence_call, row.divergence_block, row.divergence_slot, row.divergence_token,
                    row.divergence_ntp_token) == (where["call"], where["block"], where["slot"], where["text"],
                                                  where["ntp_text"])
    assert df.attrs["ntp_calls"] == ntp.nfe and df.attrs["ntp_text"] == ntp.text
    assert df.attrs["rule"] == "entropy_bounded" and df.attrs["prompt"] == PROMPT
    assert df.attrs["largest_safe_gamma"] == largest_safe_gamma(df)
    # the sharp model leaves NTP's text somewhere on this ladder, so the divergence columns are exercised
    assert not df["same_as_ntp"].all() and df["divergence_call"].notna().any()


@pytest.mark.heavy
def test_default_ladder_and_other_rules(sharp):
    df = sv.gamma_ladder(sharp, PROMPT, max_new_tokens=6)
    assert list(df["gamma"]) == ladder_gammas("entropy_bounded")
    top_k = sv.gamma_ladder(sharp, PROMPT, rule="top_k", gammas=np.array([1, 4]), max_new_tokens=6)
    assert list(top_k["gamma"]) == [1, 4]
    assert top_k["calls"].iloc[0] == sv.decode(sharp, PROMPT, rule="top_k", gamma=1, max_new_tokens=6).nfe
    ltr = sv.gamma_ladder(sharp, PROMPT, rule="left_to_right", max_new_tokens=6)
    assert list(ltr["gamma"]) == [0.0] and ltr["calls"].iloc[0] == ltr["tokens"].iloc[0]  # one slot a call


@pytest.mark.heavy
def test_the_generator_yields_rows_as_they_are_decoded(sharp):
    ladder = Ladder(sharp, PROMPT, gammas=[1.0, 0.0], max_new_tokens=6)
    assert ladder.gammas == [0.0, 1.0] and ladder.ntp is None
    rows = ladder.rows()
    first = next(rows)
    assert first["gamma"] == 0.0 and list(ladder.traces) == [0.0] and ladder.ntp is not None
    partial = ladder.frame()
    assert len(partial) == 1
    second = next(rows)
    assert second["gamma"] == 1.0 and ladder.traces[1.0].nfe == second["calls"]
    assert list(ladder.frame()["gamma"]) == [0.0, 1.0]
    assert next(ladder.rows(), None) is None  # all decoded: a new pass has nothing left


@pytest.mark.parametrize("kwargs, error, match", [
    (dict(gammas=[]), ValueError, "gammas: must not be empty"),
    (dict(gammas=[-1.0]), ValueError, "gammas: -1.0"),
    (dict(gammas=[math.nan]), ValueError, "gammas:"),
    (dict(gammas="0.1"), ValueError, "gammas:"),
    (dict(rule="top_k", gammas=[2.5]), ValueError, "gammas: 2.5"),
    (dict(rule="nope"), ValueError, "rule:"),
    (dict(prompt=""), ValueError, "prompt:"),
    (dict(block_size=0), ValueError, "block_size:"),
    (dict(max_new_tokens=0), ValueError, "max_new_tokens:"),
    (dict(stop=[""]), ValueError, "stop:"),
])
def test_errors_name_the_argument(sharp, kwargs, error, match):
    kwargs = {"prompt": PROMPT, **kwargs}
    with pytest.raises(error, match=match):
        sv.gamma_ladder(sharp, kwargs.pop("prompt"), **kwargs)


def test_a_non_model_is_named():
    with pytest.raises(TypeError, match="model:"):
        sv.gamma_ladder("model", PROMPT)


# -- the figure -------------------------------------------------------------------------------------
def _frame(same, calls=(20, 6, 4, 3)):
    rows = []
    for gamma, ok, c in zip((0.0, 0.1, 0.5, 1.0), same, calls):
        rows.append({"gamma": gamma, "calls": c, "tokens": 20, "tokens_per_call": 20 / c, "speedup_calls": 20 / c,
                     "same_as_ntp": ok, "text": "x", "divergence_call": None if ok else 1,
                     "divergence_block": None if ok else 0, "divergence_slot": None if ok else 5,
                     "divergence_token": None if ok else "7", "divergence_ntp_token": None if ok else "8",
                     "gap_fills": 1})
    df = pd.DataFrame(rows, columns=list(LADDER_COLUMNS))
    df.attrs.update(rule="entropy_bounded", ntp_calls=20, largest_safe_gamma=largest_safe_gamma(df))
    return df


def test_figure_draws_calls_the_safe_region_and_each_divergence():
    fig = gamma_ladder_figure(_frame([True, True, False, True]))
    by_name = {t.name: t for t in fig.data}
    assert list(by_name["calls"].x) == [0.0, 0.1, 0.5, 1.0] and list(by_name["calls"].y) == [20, 6, 4, 3]
    assert list(by_name["differs from NTP"].x) == [0.5] and list(by_name["differs from NTP"].y) == [4]
    assert [list(c) for c in by_name["differs from NTP"].customdata] == [[1, 0, 5, "7", "8"]]
    assert list(by_name["NTP"].y) == [20, 20]
    safe = [s for s in fig.layout.shapes if s.name == "safe"]
    assert len(safe) == 1 and safe[0].x0 < 0.0 and 0.1 < safe[0].x1 < 0.5
    assert fig.layout.meta["largest_safe_gamma"] == 0.1 and fig.layout.meta["rule"] == "entropy_bounded"
    assert "largest safe γ = 0.1" in fig.layout.title.text


def test_figure_without_a_safe_gamma_has_no_safe_region():
    fig = gamma_ladder_figure(_frame([False, False, False, False]))
    assert not [s for s in fig.layout.shapes if s.name == "safe"] and fig.layout.meta["largest_safe_gamma"] is None
    assert len(next(t for t in fig.data if t.name == "differs from NTP").x) == 4


@pytest.mark.heavy
def test_figure_of_a_real_ladder_and_of_its_rows(sharp):
    df = sv.gamma_ladder(sharp, PROMPT, gammas=[0.0, 1.0, 3.0], max_new_tokens=8)
    fig = gamma_ladder_figure(df)
    assert list(next(t for t in fig.data if t.name == "calls").y) == list(df["calls"])
    assert fig.layout.meta["largest_safe_gamma"] == df.attrs["largest_safe_gamma"]
    from_rows = gamma_ladder_figure(df.to_dict("records"))  # rows streamed in, as an app collects them
    assert list(next(t for t in from_rows.data if t.name == "calls").y) == list(df["calls"])


@pytest.mark.parametrize("frame, error, match", [
    ("rows", TypeError, "frame:"), (pd.DataFrame({"gamma": [0.1]}), ValueError, "frame: missing columns"),
    (pd.DataFrame({"gamma": [], "calls": [], "same_as_ntp": []}), ValueError, "frame: has no rows"),
])
def test_figure_errors_name_the_argument(frame, error, match):
    with pytest.raises(error, match=match):
        gamma_ladder_figure(frame)


# -- the CLI -------------------------------------------------------------------------------------------
@pytest.mark.heavy
def test_cli_ladder_prints_the_rows_and_the_largest_safe_gamma(capsys, tmp_path):
    html = tmp_path / "ladder.html"
    assert cli_main(["ladder", "assert 3 + 4 == ", "--gammas", "0.1", "1.0", "--max-new-tokens", "8",
                     "--stop", "\n", "--html", str(html)]) == 0
    out = capsys.readouterr().out
    assert "largest safe γ:" in out and "NTP:" in out and "same_as_ntp" in out
    assert html.read_text().count("plotly") > 0
    assert cli_main(["ladder", "assert 3 + 4 == ", "--gammas", "-1", "--max-new-tokens", "4"]) == 2
    assert "gammas:" in capsys.readouterr().err


# -- the shipped model on the held-out suite -------------------------------------------------------------
@pytest.mark.slow
def test_shipped_model_ladders_match_independent_decodes_on_held_out_prompts(shipped):
    model = shipped
    suite = sv.tasks.load_suite(split="test", per_family=1)[::3]  # five families, short and long answers
    gammas = [0.0, 0.1, 0.5, 1.0, 2.0]
    for item in suite:
        df = sv.gamma_ladder(model, item.prompt, gammas=gammas, stop=["\n"])
        ntp = sv.decode_ntp(model, item.prompt, stop=["\n"])
        same = []
        for row in df.itertuples():
            trace = sv.decode(model, item.prompt, gamma=row.gamma, stop=["\n"])
            assert (row.calls, row.text) == (trace.nfe, trace.text), (item.prompt, row.gamma)
            same.append(trace.text == ntp.text)
        # the definition, from the independent decodes: from the first γ that keeps NTP's text, the last of the run
        # that keeps it; the exact map may end the climb earlier, at a γ between two rows that leaves NTP's text
        first = next((i for i, ok in enumerate(same) if ok), None)
        end = next((i for i in range(first, len(same)) if not same[i]), len(same)) if first is not None else None
        safe = df.attrs["largest_safe_gamma"]
        if first is None:
            assert safe is None, item.prompt
        elif safe != gammas[end - 1]:
            nxt = gammas[gammas.index(safe) + 1]
            ranges = [Interval(r["lo"], r["hi"], r["lo_closed"], r["hi_closed"])
                      for r in df.attrs["safe_ranges"]]
            assert safe in gammas[first:end] and not any(safe in r and nxt in r for r in ranges), item.prompt


def test_the_figure_draws_a_decoders_own_knob_by_its_name():
    """A ladder that climbed Jacobi's block size (``attrs["knob"]``): its values on the x axis, named there, in the
    hover and the title, and the safe climb read along it; no γ column is needed."""
    import pandas as pd

    frame = pd.DataFrame({"block_size": [8, 2, 4], "calls": [10, 14, 12], "same_as_ntp": [False, True, True]})
    frame.attrs.update(knob="block_size", decoder="Jacobi", ntp_calls=16)
    fig = gamma_ladder_figure(frame)
    calls = next(t for t in fig.data if t.name == "calls")
    assert list(calls.x) == [2, 4, 8] and calls.hovertext[0].startswith("block_size = 2")
    assert fig.layout.xaxis.title.text == "block_size (Jacobi's knob)"
    assert fig.layout.meta["largest_safe_gamma"] == 4 and "largest safe block_size = 4" in fig.layout.title.text
