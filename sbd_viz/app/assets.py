"""The page's CSS and JavaScript: the app's look, the block-fill animation's small renderer, the "show call" jump
and the γ strip's click. Strings only; ``page.build_demo`` puts them on the page."""

from __future__ import annotations

from pathlib import Path

import plotly

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"

CSS = """
#sbd-title h1 {margin-bottom: 0}
#sbd-metrics .cards {display: grid; grid-template-columns: repeat(auto-fit, minmax(130px, 1fr)); gap: 8px}
#sbd-metrics .card {border: 1px solid var(--border-color-primary); border-radius: 8px; padding: 8px 10px;
                    background: var(--block-background-fill)}
#sbd-metrics .label {font-size: 12px; color: var(--body-text-color-subdued)}
#sbd-metrics .value {font-size: 24px; font-weight: 700; line-height: 1.25; font-variant-numeric: tabular-nums}
#sbd-metrics .sub {font-size: 12px; color: var(--body-text-color-subdued)}
#sbd-metrics .value.range {font-size: 15px; line-height: 1.6; overflow-wrap: anywhere}
#sbd-metrics .good {color: #009E73} #sbd-metrics .bad {color: #D55E00}
#sbd-texts table, #sbd-texts td, #sbd-texts tr {border: none !important; background: none !important}
#sbd-texts table {font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 15px;
                  border-collapse: collapse}
#sbd-texts td {padding: 3px 10px 3px 0; vertical-align: top; border: none}
#sbd-texts td.text {white-space: pre-wrap; overflow-wrap: anywhere}
#sbd-texts .who {font-family: var(--font); font-size: 13px; font-weight: 600; white-space: nowrap}
#sbd-texts mark {background: #F6C9A9; color: inherit; border-bottom: 2px solid #D55E00; padding: 0}
#sbd-texts .note {font-family: var(--font); font-size: 13px; color: var(--body-text-color-subdued)}
#sbd-anim {overflow-x: auto}
#sbd-menu .sbd-models {font-size: 15px; padding: 4px 0} #sbd-menu .sbd-models a, #sbd-menu .sbd-models b {margin: 0 4px}
#sbd-menu .label {color: var(--body-text-color-subdued)} #sbd-menu .failed {font-size: 13px; color: #D55E00}
#sbd-anim .sbd-empty {padding: 40px; color: var(--body-text-color-subdued)}
"""

# The block-fill animation needs Plotly *frames* (play button, call slider). gr.Plot hands only
# data + layout to Plotly.react and drops frames, so the figure is drawn by this small renderer
# inside a gr.HTML component instead; plotly.js is served from the installed plotly package
# (works offline, same version as the Python figure).
ANIM_TEMPLATE = "<div class='sbd-anim-plot'></div>"
ANIM_JS = """
const box = element.querySelector('.sbd-anim-plot');
let drawn = 0;
async function draw() {
  const my = ++drawn;
  if (!props.value) {
    box.innerHTML = "<div class='sbd-empty'>Decode a prompt to watch its blocks fill.</div>";
    return;
  }
  const fig = JSON.parse(props.value);
  box.innerHTML = '';
  // The figure is laid out for a wide screen; narrower containers get narrower cells, not a scrollbar.
  const room = element.clientWidth;
  if (room > 300 && fig.layout.width > room) fig.layout.width = room;
  await Plotly.newPlot(box, fig.data, fig.layout, {displaylogo: false, responsive: false,
                                                     modeBarButtonsToRemove: ['select2d', 'lasso2d']});
  if (my !== drawn) return;
  if (fig.frames && fig.frames.length) await Plotly.addFrames(box, fig.frames);
  box.dataset.frames = String((fig.frames || []).length);
  box.dataset.drawn = String(my);
}
draw();
watch('value', draw);
"""
# "show call N": jump the animation to a frame in the browser, no round trip.
SHOW_CALL_JS = """
(n) => {
  const box = document.querySelector('#sbd-anim .sbd-anim-plot');
  if (box && window.Plotly && box._transitionData && box._transitionData._frames.length) {
    Plotly.animate(box, [String(n)], {mode: 'immediate', frame: {duration: 0, redraw: true},
                                      transition: {duration: 0}});
  }
  return n;
}
"""

# A click on a decoded piece of the γ strip sends the piece's slider position (its data-gamma) to the server, which
# moves the slider there; the listener sits on the component, so it outlives each redraw of the strip.
STRIP_JS = """
element.addEventListener('click', (e) => {
  const piece = e.target.closest && e.target.closest('.piece[data-gamma]');
  if (piece) trigger('click', {gamma: Number(piece.dataset.gamma)});
});
"""
