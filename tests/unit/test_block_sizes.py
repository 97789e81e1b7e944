"""bench/block_sizes.py: SBD against NTP in the card's documents at several block sizes and draws."""

import json
from pathlib import Path

import pytest

import sbd_viz as sv
from sbd_viz import tasks

from conftest import bench_script, sharp_model

ROOT = Path(__file__).resolve().parents[2]


def _row(seed, bucket, ntp, sbd, n=560, tpc=5.0):
    return {"seed": seed, "bucket": list(bucket), "n_items": n, "ntp_right": ntp, "ctx_items": 160,
            "ctx_ntp_right": 158, "sbd": {str(k): {"right": right, "long_tokens_per_call": tpc}
                                         for k, right in sbd.items()}}


BUCKETS = [(0, 128), (128, 256), (256, 447)]


def test_the_table_judges_each_draw_and_the_pooled_draws_on_the_worst_bucket():
    bench = bench_script("block_sizes")
    # block 8: 3 / 5 / 5 items under NTP on draw 1 (5 of 560 is 0.89 points: within 1), 6 / 3 / 4 on draw 2;
    # block 16: 3 / 9 / 9 and 7 / 3 / -1 (SBD right more often than NTP in the last bucket)
    rows = [_row(1, b, 558, {8: 558 - g8, 16: 558 - g16}) for b, g8, g16 in zip(BUCKETS, (3, 5, 5), (3, 9, 9))]
    rows += [_row(2, b, 554, {8: 554 - g8, 16: 554 - g16})
             for b, g8, g16 in zip(BUCKETS, (6, 3, 4), (7, 3, -1))]
    text = bench.table(rows, [8, 16], 0.1)
    line = {r.split(" | ")[0].strip("| "): r for r in text.splitlines() if r.startswith(("| 8 ", "| 16 "))}
    assert line["8"] == ("| 8 | 0.5 / 0.9 / 0.9 | 1.1 / 0.5 / 0.7 | 0.80 / 0.71 / 0.80 | 5.00 / 5.00 / 5.00 "
                         "| yes / 1 of 2 |")
    assert line["16"] == ("| 16 | 0.5 / 1.6 / 1.6 | 1.2 / 0.5 / -0.2 | 0.89 / 1.07 / 0.71 | 5.00 / 5.00 / 5.00 "
                          "| no / 0 of 2 |")
    assert "draw 1: 558 / 558 / 558 of 560, context families 158 / 158 / 158 of 160" in text
    # too slow fails the bar however close SBD is
    slow = [_row(1, b, 558, {4: 558}, tpc=3.4) for b in BUCKETS]
    expected = "| 4 | 0.0 / 0.0 / 0.0 | 0.00 / 0.00 / 0.00 | 3.40 / 3.40 / 3.40 | no / 0 of 1 |"
    assert expected in bench.table(slow, [4], 0.1)


@pytest.mark.heavy
def test_the_script_counts_what_evaluate_decodes(tmp_path, monkeypatch):
    bench = bench_script("block_sizes")
    model = sharp_model()
    monkeypatch.setattr(bench.sv, "load_model", lambda path=None: model)
    # a random model's decodes run to the answer room: a smaller room makes the same counts in a quarter of the
    # forwards (the checks below read the room back from the script)
    monkeypatch.setattr(bench, "MAX_NEW_TOKENS", 16)
    out, js = tmp_path / "b.md", tmp_path / "b.json"
    bench.main(["--suite-seeds", "5", "6", "--block-sizes", "2", "4", "--gamma", "0.6", "--per-family", "1",
                "--threads", "1", "--out", str(out), "--json", str(js)])
    data = json.loads(js.read_text(), parse_constant=lambda c: pytest.fail(f"not JSON: {c}"))
    buckets = BUCKETS[:2] + [(256, model.context_length - bench.MAX_NEW_TOKENS - 1)]  # the last ends at the room
    assert [(r["seed"], tuple(r["bucket"])) for r in data["rows"]] == [(s, b) for s in (5, 6) for b in buckets]
    # one draw's bucket decoded again here, by evaluate itself: the same counts
    suite = tasks.load_suite(split="test", per_family=1, seed=6)
    bucket, items = tasks.document_buckets(suite, model.context_length, bench.MAX_NEW_TOKENS)[1]
    row = data["rows"][4]
    assert tuple(row["bucket"]) == bucket and row["n_items"] == len(items) == len(tasks.FAMILIES)
    ntp = sv.evaluate(model, items, decoder="ntp", max_new_tokens=bench.MAX_NEW_TOKENS, measure_speedup=False)
    sbd = sv.evaluate(model, items, rule="entropy_bounded", gamma=0.6, block_size=4,
                      max_new_tokens=bench.MAX_NEW_TOKENS, measure_speedup=False)
    assert row["ntp_right"] == sum(r["correct"] for r in ntp["rows"])
    lost = [n["family"] for n, s in zip(ntp["rows"], sbd["rows"]) if n["correct"] and not s["correct"]]
    won = [n["family"] for n, s in zip(ntp["rows"], sbd["rows"]) if s["correct"] and not n["correct"]]
    assert row["sbd"]["4"] == {"right": sum(r["correct"] for r in sbd["rows"]),
                               "long_tokens_per_call": sbd["long"]["tokens_per_call"],
                               "lost": {f: lost.count(f) for f in lost}, "won": {f: won.count(f) for f in won}}
    for r in data["rows"]:  # a block of k slots commits at most k tokens a call
        assert all(1 <= r["sbd"][k]["long_tokens_per_call"] <= int(k) for k in ("2", "4"))
        for k in ("2", "4"):  # what SBD lost and won against NTP is the whole difference of their counts
            assert r["sbd"][k]["right"] == (r["ntp_right"] - sum(r["sbd"][k]["lost"].values())
                                            + sum(r["sbd"][k]["won"].values()))
    text = out.read_text()
    assert "python bench/scripts/block_sizes.py --suite-seeds 5 6 --block-sizes 2 4 --gamma 0.6 --per-family 1" in text
    assert text.count("\n| 2 |") == 1 and text.count("\n| 4 |") == 1
    # rendered again from the JSON, decoding nothing: the same page
    again = tmp_path / "again.md"
    monkeypatch.setattr(bench.sv, "load_model", None)
    bench.main(["--from-json", str(js), "--out", str(again)])
    assert again.read_text() == text


def test_the_by_family_table_nets_what_sbd_lost_against_what_it_won():
    bench = bench_script("block_sizes")
    rows = [_row(1, b, 558, {8: 556, 16: 555}) for b in BUCKETS[:2]]
    rows[0]["sbd"]["8"].update(lost={"range": 2, "ctx_add": 1}, won={"ctx_add": 1})
    rows[1]["sbd"]["8"].update(lost={"range": 1, "repeat": 1}, won={})
    rows[0]["sbd"]["16"].update(lost={"repeat": 3}, won={})
    rows[1]["sbd"]["16"].update(lost={"sorted": 3}, won={"range": 1})
    text = bench.by_family(rows, [8, 16])
    # families in the suite's order, only those with a non-zero net at some block size; ctx_add nets to 0
    assert "| block size | `sorted` | `range` | `repeat` | all |" in text
    assert "| 8 | 0 | 3 | 1 | 4 |" in text and "| 16 | 3 | -1 | 3 | 5 |" in text
    assert "ctx_add" not in text
    tied = [_row(1, BUCKETS[0], 558, {8: 558})]
    tied[0]["sbd"]["8"].update(lost={"add": 1}, won={"add": 1})
    assert "wins as many items against NTP as it loses, in every family" in bench.by_family(tied, [8])
    assert bench.by_family([_row(1, BUCKETS[0], 558, {8: 556})], [8]) == "", "a run saved before the counts"
    with pytest.raises(ValueError, match="out of step"):
        bench.against_ntp([{"family": "add", "correct": True}], [{"family": "range", "correct": True}])


@pytest.mark.parametrize("bad", ["0", "65"])
def test_a_bad_block_size_is_refused_before_any_model_is_loaded(bad, monkeypatch, capsys):
    bench = bench_script("block_sizes")
    monkeypatch.setattr(bench.sv, "load_model", lambda path=None: pytest.fail("loaded a model"))
    with pytest.raises(SystemExit):
        bench.main(["--block-sizes", "8", bad])
    assert f"--block-sizes: each must be a whole number in [1, 64], got [{bad}]" in capsys.readouterr().err


def test_the_committed_report_agrees_with_the_model_card():
    """bench/results/block_sizes.json (which bench/BLOCK_SIZES.md renders): on the card's draw at the card's block size
    and gamma its counts are the card's own bucket rows (the same weights, two scripts)."""
    report = json.loads((ROOT / "bench" / "results" / "block_sizes.json").read_text())
    card = json.loads((ROOT / "sbd_viz" / "weights" / "sbd-char-5m" / "card_results.json").read_text())
    assert report["model_fingerprint"] == card["header"]["model_fingerprint"], "measured on other weights: run again"
    assert report["gamma"] == card["buckets"][0]["gamma"]
    k = str(card["header"].get("block_size", 16))  # the card's block size (cards before it was recorded: 16)
    assert int(k) in report["block_sizes"], "the page must hold the card's block size"
    mine = {tuple(r["bucket"]): r for r in report["rows"] if r["seed"] == tasks.SUITE_SEED}
    assert len(mine) == len(card["buckets"])
    for b in card["buckets"]:
        row, n = mine[tuple(b["bucket"])], b["n_items"]
        assert row["n_items"] == n
        assert row["ntp_right"] == round(b["ntp_accuracy"] * n)
        assert row["ctx_ntp_right"] == round(b["ctx_ntp_accuracy"] * row["ctx_items"])
        assert row["sbd"][k]["right"] == round(b["sbd_accuracy"] * n)
        assert row["sbd"][k]["long_tokens_per_call"] == pytest.approx(b["long_tokens_per_call"])
