"""The list-task failures table's rows (``app.gallery.gallery_rows``) from ``list_failures``' frame: a failure with no
commit to blame (every commit left to right, each coherent: pandas' NA in the nullable integer columns, NaN
elsewhere) gets empty cells, not an error."""

import pandas as pd

from sbd_viz.analysis.list_failures import LIST_FAILURE_COLUMNS
from sbd_viz.app.gallery import GALLERY_HEADERS, gallery_rows


def frame(rows):
    """A frame shaped as ``list_failures`` returns it (its columns; call, block, slot, gap as nullable integers)."""
    df = pd.DataFrame(rows, columns=list(LIST_FAILURE_COLUMNS))
    df["rank"] = range(1, len(df) + 1)
    for col in ("call", "block", "slot", "gap"):
        df[col] = df[col].astype("Int64")
    return df


def test_a_blamed_failure_and_an_unblamed_one():
    common = dict(task="copy", length=3, prompt="p", answer="[1, 2, 3]", ntp_correct=True, same_as_ntp=False,
                  settings={})
    blamed = dict(common, output="[1, 3]", ntp_output="[1, 2, 3]", kind="gap_fill", call=2, block=0, slot=3, gap=1,
                  text="3", ntp_text=" 2", ntp_agrees=False, suspicion=4.5, events=1)
    unblamed = dict(common, output="[1, 2]", ntp_output="[1, 2, 3]", events=0)  # no commit named
    rows = gallery_rows(frame([blamed, unblamed]))
    assert [len(r) for r in rows] == [len(GALLERY_HEADERS)] * 2
    first, second = (dict(zip(GALLERY_HEADERS, r)) for r in rows)
    assert (first["commit"], first["call"], first["slot"], first["NTP agrees"], first["suspicion"]) == \
        ("gap fill", 2, 3, "NO", 4.5)
    assert first["NTP's token"] == "␣2"  # spaces drawn as the views draw them
    assert second["commit"].startswith("none") and second["call"] is None and second["slot"] is None
    assert second["suspicion"] is None and second["NTP agrees"] is None and second["NTP right"] == "yes"
