"""Wall-clock speedups timed honestly: both decoders side by side, repeated, reported as a median with its spread.

A speedup in seconds is the ratio of two timings, and a CPU shared with other work changes speed from one second to
the next (this project's 2-core machine by 1.7x over a day). Timing one side once and reusing it while the other is
timed afresh mixes those speeds, so each round here times both, in alternating order, and the speedup is the median of
the rounds' ratios, with their range.

    timing = side_by_side(lambda: sv.decode(model, prompt), lambda: sv.decode_ntp(model, prompt), rounds=5)
    timing.speedup(tokens=trace.n_tokens, ntp_tokens=ntp.n_tokens)   # (median, lowest, highest)
"""

from __future__ import annotations

import statistics
import time
from typing import Callable, NamedTuple

ROUNDS = 5  # rounds of side-by-side runs: enough for a median and a range, cheap on the shipped model


class Timing(NamedTuple):
    """Seconds of ``rounds`` side-by-side runs: ``seconds[i]`` and ``ntp_seconds[i]`` were timed in round ``i``."""

    seconds: tuple[float, ...]
    ntp_seconds: tuple[float, ...]

    @property
    def rounds(self) -> int:
        return len(self.seconds)

    def speedup(self, tokens: int = 1, ntp_tokens: int = 1) -> tuple[float, float, float]:
        """(median, lowest, highest) over the rounds of NTP's seconds per token / the decoder's: per generated
        token, so a decode that stops earlier or later than NTP is compared fairly."""
        ratios = [(n / max(1, ntp_tokens)) / max(1e-12, s / max(1, tokens))
                  for s, n in zip(self.seconds, self.ntp_seconds)]
        return statistics.median(ratios), min(ratios), max(ratios)

    def median_seconds(self) -> tuple[float, float]:
        """(the decoder's, NTP's) median seconds per run."""
        return statistics.median(self.seconds), statistics.median(self.ntp_seconds)


def side_by_side(run: Callable[[], object], ntp: Callable[[], object], rounds: int = ROUNDS) -> Timing:
    """Time ``run`` and ``ntp`` (callables doing one whole decode each) ``rounds`` times, both in every round, in
    alternating order (decoder first in even rounds, NTP first in odd ones), so a change of the machine's speed
    falls on both sides alike."""
    if not isinstance(rounds, int) or isinstance(rounds, bool) or rounds < 1:
        raise ValueError(f"rounds: must be a whole number of at least 1, got {rounds!r}")
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
    return Timing(tuple(seconds), tuple(ntp_seconds))
