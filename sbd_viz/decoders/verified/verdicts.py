"""NTP's verdicts: a verified call's causal rows read as greedy NTP reads them (``Rows``), which accept or reject the
drafts the call fed."""

from __future__ import annotations

from typing import NamedTuple

import torch

from ...models.call import Model
from ..base import greedy


class Rows(NamedTuple):
    """A call's causal rows as NTP reads them: row r predicts generated position ``n_ok + r``."""

    probs: torch.Tensor  # (n_causal, V)
    logp: torch.Tensor  # (n_causal, V)
    ntp: list[int]  # each row's greedy token


def read_rows(model: Model, causal: torch.Tensor) -> Rows:
    logp = torch.log_softmax(causal, -1)
    probs = logp.exp()
    return Rows(probs, logp, greedy(model, probs).tolist())
