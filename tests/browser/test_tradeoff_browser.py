"""``plots.tradeoff`` drawn by plotly.js in a real headless Chromium, without the app: on a sweep as crowded as
notebook 02's (three rules whose points bunch near NTP's accuracy, the current setting ringed), no γ label overlaps
another label, a point or the ring, and no note is printed over the plot. Saves a screenshot to
test-artifacts/tradeoff_labels.png for a human to look at."""

from conftest import ARTIFACTS
from sbd_viz import plots

ROWS = [dict(rule="entropy_bounded", gamma=g, accuracy=a, tokens_per_call=t) for g, a, t in
        ((0.0, 0.9643, 1.0), (0.1, 0.9821, 4.69), (0.35, 0.9464, 5.47), (0.6, 0.9464, 5.6), (1.0, 0.9464, 5.68),
         (2.0, 0.9286, 5.78))]
ROWS += [dict(rule="entropy_threshold", gamma=g, accuracy=a, tokens_per_call=t) for g, a, t in
         ((0.25, 0.9821, 4.85), (0.5, 0.9643, 5.2), (1.0, 0.9286, 5.5))]
ROWS += [dict(rule="confidence_threshold", gamma=g, accuracy=a, tokens_per_call=t) for g, a, t in
         ((0.9, 0.9821, 5.04), (0.6, 0.9643, 5.47))]
ROWS += [dict(rule="ntp", gamma=None, accuracy=0.9821, tokens_per_call=1.0)]

BOXES = """() => {
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {
    labels: [...document.querySelectorAll('g.textpoint text')].filter((e) => e.textContent).map(
      (e) => ({text: e.textContent, box: box(e)})),
    points: [...document.querySelectorAll('g.points path.point')].map(box),
    notes: [...document.querySelectorAll('g.annotation')].map((e) => e.textContent),
  };
}"""


def _overlap(a, b, pad=0.5):
    return a[0] + pad < b[2] and b[0] + pad < a[2] and a[1] + pad < b[3] and b[1] + pad < a[3]


def test_no_gamma_label_covers_another_label_or_a_point(page):
    fig = plots.tradeoff(ROWS, current=dict(rule="entropy_bounded", gamma=0.35))
    page.set_viewport_size({"width": 900, "height": 600})
    page.set_content(fig.to_html(include_plotlyjs=True, full_html=True))
    page.wait_for_selector("g.textpoint text", timeout=30000)
    drawn = page.evaluate(BOXES)
    labels = drawn["labels"]
    assert len(labels) >= 6, labels  # most points keep their label
    for i, a in enumerate(labels):
        assert not any(_overlap(a["box"], b["box"]) for b in labels[i + 1:]), a
        assert not any(_overlap(a["box"], p) for p in drawn["points"]), a
    assert not [n for n in drawn["notes"] if "accuracy" in n]  # NTP's accuracy is named in the legend instead
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "tradeoff_labels.png"))
    assert not page.errors, page.errors
