"""How the app is served: the queue's two lines (control moves, heavy jobs) and the prompt box's keys.

``page.build_demo`` wires each event to a line (``MODEL_QUEUE``, ``HEAVY_QUEUE``); ``queue`` serves a built page the way
``launch.main`` does (the tests serve it the same way).
"""

from __future__ import annotations

from typing import Any

import gradio as gr

# The queue's two lines (see the wiring in ``build_demo``). On 2 cores with one torch thread per job: at most one
# heavy job (one core) beside two control moves. ``QUEUE_SIZE`` bounds what waits, over both lines.
MODEL_LIMIT, HEAVY_LIMIT, QUEUE_SIZE = 2, 1, 64
MODEL_QUEUE: dict[str, Any] = dict(concurrency_id="model", concurrency_limit=MODEL_LIMIT)
HEAVY_QUEUE: dict[str, Any] = dict(concurrency_id="heavy", concurrency_limit=HEAVY_LIMIT)

# The prompt box: Enter decodes (a click on Decode), Shift+Enter starts a new line. Gradio's multi-line textbox does
# the opposite (Enter: a newline, which changed a suite prompt unseen; Shift+Enter: submit), so its own key handler
# never sees Enter: this listener runs first, in the capture phase.
PROMPT_KEYS_JS = """
() => {
  const inPrompt = (e) => e.key === 'Enter' && !e.isComposing && e.target.closest && e.target.closest('#sbd-prompt');
  document.addEventListener('keydown', (e) => {
    if (!inPrompt(e)) return;
    e.stopPropagation();
    if (e.shiftKey) return;  // the browser inserts the newline
    e.preventDefault();  // no newline, and no keypress
    document.querySelector('#sbd-run')?.click();
  }, true);
  // Gradio's textbox submits on Shift+Enter's keypress (and would keep the newline out): it never sees one
  document.addEventListener('keypress', (e) => { if (inPrompt(e)) e.stopPropagation(); }, true);
}
"""


def queue(demo: gr.Blocks) -> gr.Blocks:
    """Serve ``demo``'s events through Gradio's queue: each event's line and limit are set where it is wired
    (``MODEL_QUEUE``, ``HEAVY_QUEUE``); an event wired without one (the projection, show call) runs beside them."""
    return demo.queue(default_concurrency_limit=MODEL_LIMIT, max_size=QUEUE_SIZE)
