"""The SBD decoding loop (paper Algorithms 2-3), recorded as a trace; the NTP baseline is ``sbd_viz.decoders.ntp``.

``Decoding.steps()`` is a generator: one ``Step`` per model call, so a UI can stream steps and a
progress bar can count them; ``Decoding.trace()`` then gives the whole ``Trace``, and ``decode``
does both in one call. With ``verify=True`` the block loop also checks every drafted token
against greedy NTP on the same weights, from the causal logits each call computes anyway, and
rolls back at the first disagreement: the output is then exactly ``decode_ntp``'s (that loop is
``sbd_viz.decoders.verified.single``). Both loops are coroutines of cache requests (``Decoding.requests()``), so
``decode_batch`` serves many of them with the same logic; ``sbd_viz.decoders.steps`` builds their steps.
Verified SBD drafts one block per call (``drafting="single"``, the default) or a block after every possible
accepted length (``drafting="tree"``, SBD's own setting: its requests are ``ModelCall``s with a block after each
fed token, which ``serve`` answers and ``decode_batch`` does not).
"""

from __future__ import annotations

import time
from collections.abc import Generator

import torch

from ..models.base import CausalModel
from ..models.sbd_model import MAX_BLOCK_SIZE
from ..trace.data import Step
from . import registry
from .base import Block, BlockLoop, Reply, propose
from .config import DecodeConfig
from .rules import COMMIT_RULES, Interval
from .run import DecodeRun, serve
from .steps import draft, slot_views
from .verified.settings import check_drafting, check_tree_blocks, check_tree_widths
from .verified.single import VerifiedDecode
from .verified.tree import TreeDecode

# MAX_BLOCK_SIZE, DecodeConfig and serve are read from here too: SBD's largest block, its settings, its engine
__all__ = ["MAX_BLOCK_SIZE", "SBD", "DecodeConfig", "Decoding", "decode_steps", "serve"]


class Decoding(BlockLoop, DecodeRun):
    """One SBD decode of ``prompt``: iterate ``steps()`` (one ``Step`` per model call), then ``trace()``.

    Everything is checked on construction (the settings, the prompt, the model's trained context),
    so a streaming UI hears of a bad request before it starts, not at the first ``next``::

        decoding = sv.Decoding(model, "assert 48 + 37 == ", sv.DecodeConfig(gamma=0.5, stop="\\n"))
        for step in decoding.steps():
            ...  # show the step while the block fills
        trace = decoding.trace()

    ``drafting``: how a verified decode drafts, ``"single"`` or ``"tree"`` (``sbd_viz.decoders.verified.single``).
    ``tree_widths``: with ``drafting="tree"``, draft a token tree: the best ``tree_widths[s - 1]`` candidates at slot
    s after each candidate before it (``TreeDecode``); None drafts the chain of best tokens.
    ``tree_blocks``: with ``drafting="tree"``, the most blocks a call feeds: after the fed tokens the accepted path
    most likely ends at, by the drafter's probabilities (a path that ends elsewhere writes NTP's token there and the
    next call drafts afresh); None puts a block after every fed token.
    """

    def __init__(
        self,
        model: CausalModel,
        prompt: str,
        config: DecodeConfig | None = None,
        drafting: str = "single",
        tree_widths=None,
        tree_blocks=None,
    ):
        super().__init__(model, prompt, config)
        self.drafting = check_drafting(drafting, self.config)
        self.tree_widths = check_tree_widths(tree_widths, self.drafting)
        self.tree_blocks = check_tree_blocks(tree_blocks, self.drafting)
        self.knob_intervals: list = []  # each commit-rule choice's knob interval (``draft``): the γ range

    def loop(self):
        """Plain SBD's block loop, or with ``verify`` the verified loop (``sbd_viz.decoders.verified.single``). Returns
        the output ids and their ``Stop``."""
        if self.config.verify and self.drafting == "tree":  # the chain is a token tree of width one
            return (
                yield from TreeDecode(
                    self.model,
                    self.config,
                    self.prompt_ids,
                    self.record,
                    self.knob_intervals,
                    self.tree_widths or (1,),
                    self.tree_blocks,
                ).requests()
            )
        if self.config.verify:
            return (
                yield from VerifiedDecode(
                    self.model, self.config, self.prompt_ids, self.record, self.knob_intervals
                ).requests()
            )
        return (yield from self._plain_requests())

    def _plain_requests(self):
        """Plain SBD: the rule commits from each call's block logits, block after block (``BlockLoop``). Returns
        the output ids and their ``Stop``."""
        # a sampled decode draws from its own generator, on the device the logits are on
        self._gen = torch.Generator(device=self.model.device).manual_seed(self.config.seed)
        return (yield from self.block_loop())

    def read_call(self, block: Block, live: list[int], reply: Reply, call: int, n_input: int, started: float) -> Step:
        """The rule commits among the ``live`` slots, from the call's block logits."""
        model, config = self.model, self.config
        proposal = propose(model, reply.blocks[0][live], config.temperature, self._gen)  # (m, V) for the live slots
        commits, _ = draft(model, config.commit_rule, live, proposal, self.knob_intervals)
        for c in commits:
            block.write(c.slot, c.token_id)
        views = slot_views(model, live, proposal, config.top_n)
        return Step(
            call=call,
            block=block.index,
            block_start=len(self.prompt_ids) + block.start,
            block_size=block.size,
            step=block.steps,
            masked=tuple(live),
            slots=views,
            commits=tuple(commits),
            wall_time=time.perf_counter() - started,
            n_input=n_input,
        )

    def check_batchable(self) -> None:
        if self.drafting != "single":  # a tree call has a block per possible accepted length
            raise ValueError(
                f"drafting: {self.drafting!r} is not batched (a batched forward holds one block per "
                "row); decode such prompts one at a time with sv.decode"
            )

    def trace_settings(self) -> dict:
        config = self.config.as_dict()
        if self.drafting != "single":  # the default is left out: a single-drafting trace is the file it always was
            config["drafting"] = self.drafting
        if self.tree_widths is not None:
            config["tree_widths"] = list(self.tree_widths)
        if self.tree_blocks is not None:
            config["tree_blocks"] = self.tree_blocks
        return config

    def gamma_range(self):
        """The γ values at which this decode results (``Trace.gamma_range``): the intersection of every rule
        choice's knob interval, rolled-back drafts' included (they shaped what came after); None when sampled."""
        if self.config.temperature != 0:
            return None
        valid = COMMIT_RULES[self.config.rule].valid
        found = Interval(valid.lo, valid.hi, not valid.lo_open, True, valid.whole)  # no choice: every γ
        for interval in self.knob_intervals:
            found = found & interval
        return found


def decode_steps(model: CausalModel, prompt: str, config: DecodeConfig | None = None) -> Generator[Step, None, None]:
    """Decode ``prompt`` with SBD, yielding one ``Step`` per model call (``Decoding`` also gives the trace)."""
    return Decoding(model, prompt, config).steps()


# verified SBD is a mode of SBD's block loop, not a decoder of its own: its traces say decoder "sbd", verify true
SBD = registry.DecoderSpec(
    name="sbd",
    label="SBD",
    decoding=Decoding,
    model="sbd",
    knob=registry.Knob("gamma"),
    takes=("rule", "gamma", "block_size", "temperature", "seed", "gap_free", "verify"),
    # verified SBD's drafting: "single" or "tree", and tree drafting's token tree (sbd_viz.decoders.verified.single)
    own={"drafting": "single", "tree_widths": None, "tree_blocks": None},
    variants={"verified SBD": {"verify": True}},
    color="#0072B2",
)
SPECS = (SBD,)
