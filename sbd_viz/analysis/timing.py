"""Wall-clock speedups timed honestly: both decoders side by side, repeated, reported as a median with its spread.

A speedup in seconds is the ratio of two timings, and a CPU shared with other work changes speed from one second to
the next (this project's 2-core machine by 1.7x over a day). Timing one side once and reusing it while the other is
timed afresh mixes those speeds, so each round here times both, in alternating order, and the speedup is the median of
the rounds' ratios, with their range. The first run of a decode pays one-time costs (allocations, first dispatch of
each kernel): ``warm_up=True`` runs each side once, untimed, before the rounds.

    timing = side_by_side(lambda: sv.decode(model, prompt), lambda: sv.decode_ntp(model, prompt), rounds=5)
    timing.speedup(tokens=trace.n_tokens, ntp_tokens=ntp.n_tokens)   # (median, lowest, highest) of per-round ratios
    timing.ratio_of_medians(tokens=trace.n_tokens, ntp_tokens=ntp.n_tokens)  # NTP's median / the decoder's
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import NamedTuple

ROUNDS = 5  # rounds of side-by-side runs: enough for a median and a range, cheap on the shipped model


class Timing(NamedTuple):
    """Seconds of ``rounds`` side-by-side runs: ``seconds[i]`` and ``ntp_seconds[i]`` were timed in round ``i``;
    ``warmed``: each side ran once, untimed, before the rounds."""

    seconds: tuple[float, ...]
    ntp_seconds: tuple[float, ...]
    warmed: bool = False

    @property
    def rounds(self) -> int:
        return len(self.seconds)

    def speedup(self, tokens: int = 1, ntp_tokens: int = 1) -> tuple[float, float, float]:
        """(median, lowest, highest) over the rounds of NTP's seconds per token / the decoder's: per generated
        token, so a decode that stops earlier or later than NTP is compared fairly."""
        ratios = [
            (n / max(1, ntp_tokens)) / max(1e-12, s / max(1, tokens)) for s, n in zip(self.seconds, self.ntp_seconds)
        ]
        return statistics.median(ratios), min(ratios), max(ratios)

    def median_seconds(self) -> tuple[float, float]:
        """(the decoder's, NTP's) median seconds per run."""
        return statistics.median(self.seconds), statistics.median(self.ntp_seconds)

    def ratio_of_medians(self, tokens: int = 1, ntp_tokens: int = 1) -> float:
        """NTP's median seconds per generated token over the decoder's: the ratio of the two medians that
        ``median_seconds`` gives. It can differ from ``speedup``'s median of per-round ratios (and even sit on the
        other side of 1 when the rounds' ratios scatter), so a view that shows one says which."""
        mine, ntp = self.median_seconds()
        return (ntp / max(1, ntp_tokens)) / max(1e-12, mine / max(1, tokens))


def side_by_side(
    run: Callable[[], object], ntp: Callable[[], object], rounds: int = ROUNDS, warm_up: bool = False
) -> Timing:
    """Time ``run`` and ``ntp`` (callables doing one whole decode each) ``rounds`` times, both in every round, in
    alternating order (decoder first in even rounds, NTP first in odd ones), so a change of the machine's speed
    falls on both sides alike. ``warm_up``: run each once first, untimed, so no round pays the one-time costs."""
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"rounds: must be a whole number of at least 1, got {rounds!r}")
    if warm_up:
        run()
        ntp()
    seconds, ntp_seconds = [], []
    for i in range(rounds):
        pair = (run, ntp) if i % 2 == 0 else (ntp, run)
        spent = []
        for fn in pair:
            t0 = time.perf_counter()
            fn()
            spent.append(time.perf_counter() - t0)
        seconds.append(spent[0] if i % 2 == 0 else spent[1])
        ntp_seconds.append(spent[1] if i % 2 == 0 else spent[0])
    return Timing(tuple(seconds), tuple(ntp_seconds), warmed=bool(warm_up))
