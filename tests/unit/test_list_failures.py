"""The list tasks' failures, ranked (``sbd_viz.analysis.list_failures``): every wrong item and only those, ranked by
its most suspicious commit as the app's failure table judges it, with NTP's verdict, and settings that decode it
again."""

import pytest

import sbd_viz as sv
from sbd_viz.tasks import lists as lt
from sbd_viz.analysis.incoherence import failure_events
from sbd_viz.analysis.list_failures import LIST_FAILURE_COLUMNS, list_failures

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.mark.heavy
def test_every_wrong_item_ranked_by_its_most_suspicious_commit(sharp):
    items = lt.list_suite(tasks=("copy", "reverse", "shuffle"), lengths=(3,), per_length=2)
    df = list_failures(sharp, items, gamma=1.0)
    assert list(df.columns) == list(LIST_FAILURE_COLUMNS)
    wrong = [i for i in items if not lt.score(i, sv.decode(sharp, i.assert_prompt, gamma=1.0, stop="\n",
                                                             max_new_tokens=lt.answer_room(sharp, i, "assert")).text)]
    assert sorted(df["prompt"]) == sorted(i.assert_prompt for i in wrong) and len(df) > 1
    assert list(df["rank"]) == list(range(1, len(df) + 1))
    ranked = df["suspicion"].dropna().tolist()
    assert ranked == sorted(ranked, reverse=True) and df["suspicion"].isna().sum() == (df["events"] == 0).sum()
    for r in df.to_dict("records"):
        trace = sv.decode(sharp, r["prompt"], **r["settings"])  # the row's settings decode it again
        assert trace.text == r["output"] and r["settings"]["gamma"] == 1.0
        ntp = sv.decode_ntp(sharp, r["prompt"], max_new_tokens=r["settings"]["max_new_tokens"], stop="\n")
        item = next(i for i in items if i.assert_prompt == r["prompt"])
        assert r["ntp_output"] == ntp.text and r["ntp_correct"] == lt.score(item, ntp.text)
        events = failure_events(sharp, trace)
        assert r["events"] == len(events)
        if events:  # the named commit is the most suspicious one, with the teacher-forced NTP verdict
            # judged without the item here: a wrong answer adds 1 to each kept commit's suspicion (a discarded one
            # scores 0 either way)
            wrong = [e["suspicion"] + 1.0 if e["kept"] else e["suspicion"] for e in events]
            top = next(e for e in events if (e["call"], e["slot"], e["kind"]) == (r["call"], r["slot"], r["kind"]))
            assert top["ntp_agrees"] == r["ntp_agrees"] and top["ntp_text"] == r["ntp_text"]
            assert r["suspicion"] == pytest.approx(max(wrong)) == pytest.approx(wrong[events.index(top)])


@pytest.mark.heavy
def test_settings_reach_the_decode_and_errors_name_the_argument(sharp):
    items = lt.list_suite(tasks=("copy",), lengths=(3,), per_length=2)
    low, high = list_failures(sharp, items, gamma=0.0), list_failures(sharp, items, gamma=2.0)
    assert set(low["output"]) != set(high["output"])
    with pytest.raises(ValueError, match="style"):
        list_failures(sharp, items, style="yaml")
    with pytest.raises(ValueError, match="items"):
        list_failures(sharp, ["assert 1 == "])
    with pytest.raises(ValueError, match="max_new_tokens"):
        list_failures(sharp, items, max_new_tokens=3)
