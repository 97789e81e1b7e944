"""``plots.gamma_strip`` in a real headless Chromium, without the app: on a map of seven pieces, six of them in the
first 3 % of the range, every decoded piece is drawn at least 25 px wide, and a click at its middle lands on that
piece (nothing covers it: not a neighbour, not the hatching, not the γ line). Saves a screenshot to
test-artifacts/gamma_strip_seven.png for a human to look at."""

from conftest import ARTIFACTS, hand_trace
from sbd_viz import plots
from sbd_viz.analysis.gamma_map import GammaMap, Piece

ONE, TWO, FOUR = (hand_trace([("abcd", calls)]) for calls in ([{0, 1, 2, 3}], [{0, 1}, {2, 3}], [{0}, {1}, {2}, {3}]))

AT_MIDDLE = """() => [...document.querySelectorAll('.piece[data-gamma]')].map((p) => {
  const r = p.getBoundingClientRect();
  const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
  return {width: r.width, gamma: p.dataset.gamma, hit: hit && hit.closest('.piece') === p};
})"""


def test_every_piece_of_the_strip_can_be_seen_and_clicked(page):
    pieces = [Piece(i / 100, (i + 1) / 100, TWO if i % 2 else FOUR, True, False) for i in range(6)]
    pieces += [Piece(0.06, 0.061, None, True, False), Piece(0.061, 2.0, ONE, True, True)]  # a stretch not decoded
    strip_map = GammaMap("go: ", "entropy_bounded", 0.0, 2.0, 0.01, {}, pieces=pieces, seconds=1.0, calls=9)
    strip = plots.gamma_strip(strip_map, current_gamma=0.02, ntp_text="abcd")
    page.set_viewport_size({"width": 900, "height": 300})
    page.set_content(f"<!DOCTYPE html><html><head><meta charset='utf-8'></head><body>{strip}</body></html>")
    drawn = page.evaluate(AT_MIDDLE)
    assert len(drawn) == 7
    assert all(d["width"] >= 25 for d in drawn), drawn
    assert all(d["hit"] for d in drawn), drawn
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator(".sbd-strip").screenshot(path=str(ARTIFACTS / "gamma_strip_seven.png"))
    assert not page.errors, page.errors
