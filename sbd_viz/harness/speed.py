"""Speed beside the score: each task's model calls, output tokens, tokens per call and wall clock, summed over its
generations by the count names every view uses (``sbd_viz.analysis.counts``).

``Tally.add(task, trace, seconds)`` after each generation, ``Tally.scoring(task, seconds)`` after log-likelihood
work; ``Tally.table()`` is what the results carry under ``config.sbd_viz.tasks`` (pooled: a task's tokens over its
calls, not a mean of per-sample ratios); ``speed_lines`` prints it.
"""

from __future__ import annotations

from collections import defaultdict

from ..analysis.counts import COUNT_LABELS, call_counts, counted

# the counts summed per task (call_counts' own names); the ratios are computed from the sums
SUMMED = ("calls", "tokens", "end_tokens", "prefill_calls", "prefill_tokens")


class Tally:
    """The counts of every generation so far, per lm-eval task."""

    def __init__(self):
        self._counts: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(SUMMED, 0))
        # per task and convention: [tokens, calls] as that convention counts them, summed over the generations
        self._ratios: dict[str, dict[str, list[int]]] = defaultdict(
            lambda: {label: [0, 0] for label in COUNT_LABELS.values()}
        )
        self._samples: dict[str, int] = defaultdict(int)
        self._seconds: dict[str, float] = defaultdict(float)
        self._scoring: dict[str, float] = defaultdict(float)

    def add(self, task: str, trace, seconds: float) -> None:
        counts = call_counts(trace)
        for name in SUMMED:
            self._counts[task][name] += counts[name]
        for (end, pre), label in COUNT_LABELS.items():
            tokens, calls = counted(trace, end_token=end, prefill=pre)
            self._ratios[task][label][0] += tokens
            self._ratios[task][label][1] += calls
        self._samples[task] += 1
        self._seconds[task] += seconds

    def scoring(self, task: str, seconds: float) -> None:
        self._scoring[task] += seconds

    def table(self) -> dict[str, dict]:
        """{task: its generations, calls, tokens, tokens_per_call, each COUNT_LABELS ratio, the generation and the
        log-likelihood wall clock in seconds}."""
        out = {}
        for task in sorted(set(self._samples) | set(self._scoring)):
            c = self._counts[task]
            row: dict = {"generations": self._samples[task], **{n: int(c[n]) for n in SUMMED}}
            row["tokens_per_call"] = c["tokens"] / c["calls"] if c["calls"] else None
            for label, (tokens, calls) in self._ratios[task].items():
                row[label] = round(tokens / calls, 6) if calls else None
            row["generate_seconds"] = round(self._seconds[task], 3)
            row["loglikelihood_seconds"] = round(self._scoring[task], 3)
            out[task] = row
        return out


def speed_lines(table: dict[str, dict]) -> list[str]:
    """The table as a markdown table: one row per task."""
    lines = [
        "| task | generations | calls | tokens | tokens per call | generate s | log-likelihood s |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for task, row in table.items():
        tpc = "" if row["tokens_per_call"] is None else f"{row['tokens_per_call']:.3f}"
        lines.append(
            f"| {task} | {row['generations']} | {row['calls']} | {row['tokens']} | {tpc} | "
            f"{row['generate_seconds']:.2f} | {row['loglikelihood_seconds']:.2f} |"
        )
    return lines
