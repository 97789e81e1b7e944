"""The closed forms beside the measured curves (``sbd_viz.plots.list_accuracy``) and the bench page's panels of it."""

import pytest

from sbd_viz.analysis.closed_forms import closed_form_curve
from sbd_viz.plots.list_accuracy import closed_form_figure

from conftest import bench_script


def test_the_figure_draws_each_panels_lines():
    panels = [{"task": "copy", "measured": [{"label": "SBD", "points": [(2.0, 50.0), (1.0, 100.0)]}],
               "closed": [{"label": "closed form, 3 items", "points": closed_form_curve("copy", 3, 2.0)}]},
              {"task": "shuffle", "measured": [{"label": "SBD", "points": [(1.5, 0.0)]}],
               "closed": [{"label": "closed form, 3 items", "points": closed_form_curve("shuffle", 3)}]}]
    fig = closed_form_figure(panels, title="t")
    assert [a.text for a in fig.layout.annotations] == ["copy", "shuffle"]
    assert len(fig.data) == 4 and [t.showlegend for t in fig.data] == [True, True, False, False]
    sbd = fig.data[0]
    assert list(sbd.x) == [1.0, 2.0] and list(sbd.y) == [100.0, 50.0]  # sorted by tokens per call
    assert fig.data[3].line.dash == "dash" and list(fig.data[3].y) == [y for _, y in closed_form_curve("shuffle", 3)]
    assert fig.layout.xaxis.type == "log" and fig.layout.xaxis2.type == "log"
    with pytest.raises(ValueError, match="panels"):
        closed_form_figure([])
    with pytest.raises(ValueError, match="panels"):
        closed_form_figure([{"task": "copy"}])


def test_the_pages_panels_take_the_tasks_with_a_closed_form():
    script = bench_script("bench_list_tasks")
    rows = [{"task": t, "label": label, "points": [[1.0, 50.0]]} for t in ("copy", "sort", "shuffle", "all tasks")
            for label in ("NTP", "SBD")]
    model = {"rows": rows, "tokens_per_item": {"copy": {"3": 3.5, "5": 3.8}, "sort": {"3": 3.5},
                                               "shuffle": {"3": 3.0}}}
    panels = script.figure_panels(model)
    assert [p["task"] for p in panels] == ["copy", "shuffle"]  # sort has no closed form; replace was not run
    copy = panels[0]
    assert [m["label"] for m in copy["measured"]] == ["NTP", "SBD"]
    assert [c["label"] for c in copy["closed"]] == ["closed form, 3 items", "closed form, 5 items"]
    assert copy["closed"][1]["points"] == closed_form_curve("copy", 5, 3.8)
    assert panels[1]["closed"][0]["label"] == "closed form, 3 items (any order right)"
    assert script.figure_panels({"rows": rows}) == []  # a page measured before the tokens per item were kept
