"""The app's speed/quality curve: a suite sweep per commit rule, kept in ``sweep.json`` beside the model.

Make it once per model and keep it there (``python -c "from sbd_viz import app; app.precompute_sweep()"``),
else the app computes it in a background thread at startup (minutes on 2 CPUs). The figure is
``plots.tradeoff`` with the measured point nearest to the current setting ringed.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import sbd_viz as sv

from .. import tasks
from ..decoders.ntp import NTP

SWEEP_FILE = "sweep.json"  # the precomputed speed/quality curve, committed beside the model
# One line per rule, points at these knob values (suite, at the model's block size).
SWEEP_GRID = {
    "entropy_bounded": (0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0),
    "entropy_threshold": (0.1, 0.25, 0.5, 1.0, 2.0),
    "confidence_threshold": (0.5, 0.7, 0.9, 0.99),
    "factor": (0.25, 0.5, 1.0, 2.0),
}
SWEEP_PER_FAMILY = 10
# The rule whose verified twin (decode(..., verify=True)) is swept too, over the same knob values: the curve's
# "verified (lossless)" line, at NTP's accuracy by construction, so only its speed is measured.
SWEEP_VERIFIED = "entropy_bounded"


def _other_block(saved: dict, model) -> str:
    """A note when a precomputed sweep was measured at another block size than the model now decodes at."""
    k = saved.get("block_size")  # a sweep file that does not say its block size gets no note
    if model is None or k is None or k == model.block_size:
        return ""
    return f", measured at block {k}; the model decodes at block {model.block_size}: run app.precompute_sweep() again"


class SpeedQualityCurve:
    """The suite sweep behind the trade-off figure: loaded from ``sweep.json`` beside the model, else
    computed once in a background thread (``analysis.sweep``, cached on disk). Written once, then read-only.

    Rows load with ``plots.sweep_frame``: rows without a ``verify`` column load as unverified (the curve then has
    no verified line)."""

    def __init__(self, model=None, model_dir=None, results=None, compute: bool = True):
        self.df, self.status, self.model = None, "no speed/quality curve for this model", model
        self._stop, self._thread = threading.Event(), None
        if results is not None:
            self._set(results, "given")
            return
        path = Path(model_dir) / SWEEP_FILE if model_dir else None
        if path is not None and path.is_file():
            try:
                saved = json.loads(path.read_text())
                self._set(saved["rows"], f"precomputed ({path.name}{_other_block(saved, model)})")
                return
            except (OSError, ValueError, KeyError, TypeError) as exc:
                self.status = f"could not read {path}: {exc}"
        if compute and model is not None:
            self.status = "computing the suite sweep in the background (a few minutes on 2 CPUs)…"
            self._thread = threading.Thread(target=self._compute, name="sbd-viz-sweep", daemon=True)
            self._thread.start()

    def _set(self, rows, how: str):
        from .. import plots

        self.df, self.status = plots.sweep_frame(rows), f"suite sweep: {how}"

    def close(self, timeout: float = 300) -> None:
        """Stop a sweep computing in the background at the end of the setting it is measuring (waits up to
        ``timeout`` seconds for that): an app that closes takes no core with it. The curve keeps what it has."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _compute(self):
        try:
            rows = compute_sweep(self.model, stop=self._stop)
            if rows is None:
                self.status = "the suite sweep was stopped before it finished (the app closed)"
            else:
                self._set(rows, "computed at startup")
        except Exception as exc:  # a failed sweep must not take the app down: the curve just stays empty
            self.status = f"the suite sweep failed: {exc}"

    def figure(self, rule: str, gamma: float, gap_free: bool, verify: bool = False):
        """``plots.tradeoff`` with the measured point nearest to the current setting highlighted: on the
        verified line when ``verify`` (the app's verified switch) is on."""
        from .. import plots

        df = self.df
        if df is None:
            return None, self.status
        same = df[
            (df["rule"] == rule) & (df["gap_free"].astype(bool) == bool(gap_free)) & (df["verify"] == bool(verify))
        ]
        if same.empty:
            return plots.tradeoff(df), f"{self.status} · no measured points for {rule}" + (
                " gap-free" if gap_free else ""
            ) + (" verified" if verify else "")
        nearest = float(same.iloc[(same["gamma"] - gamma).abs().argsort().iloc[0]]["gamma"])
        fig = plots.tradeoff(df, current=dict(rule=rule, gamma=nearest, gap_free=bool(gap_free), verify=bool(verify)))
        where = " on the verified line" if verify else ""
        return fig, f"{self.status} · ring = nearest measured point to the current setting{where} (γ = {nearest:g})"


def compute_sweep(model, stop: threading.Event | None = None) -> list[dict] | None:
    """The suite sweep shown by the app, as JSON-ready rows (one ``analysis.sweep`` per rule; ``SWEEP_VERIFIED``
    also verified, over the same knob values). None if ``stop`` was set before the sweep measured every setting."""
    import pandas as pd

    from .. import analysis

    suite = tasks.load_suite("pyasserts", "test", per_family=SWEEP_PER_FAMILY)
    try:
        frames = [
            analysis.sweep(
                model,
                suite,
                rules=[rule],
                gammas=list(gammas),
                block_sizes=[model.block_size],
                progress=False,
                verify=(False, True) if rule == SWEEP_VERIFIED else (False,),
                stop=stop,
            )
            for rule, gammas in SWEEP_GRID.items()
        ]
    except analysis.SweepStopped:
        return None
    df = pd.concat(frames, ignore_index=True)
    ntp = df["rule"] == NTP.name
    df = pd.concat([df[~ntp], df[ntp].head(1)], ignore_index=True)
    return json.loads(df.to_json(orient="records"))  # NaN -> null, numpy -> plain


def precompute_sweep(model_path=None) -> Path:
    """Write ``sweep.json`` beside the model (commit it: the Space then shows the curve instantly)."""
    path = Path(model_path or sv.default_model_path())
    out = path / SWEEP_FILE
    model = sv.load_model(path)
    rows = compute_sweep(model)
    out.write_text(
        json.dumps(
            {
                "suite": f"pyasserts test, {SWEEP_PER_FAMILY} per family",
                "block_size": model.block_size,
                "verified": SWEEP_VERIFIED,
                "rows": rows,
            },
            indent=1,
        )
    )
    return out
