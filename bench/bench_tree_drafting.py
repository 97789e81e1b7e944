"""Verified SBD's two draftings on a real adapted model: tokens per call of "single" (one block per call) and
"tree" (a block after every possible accepted length, ``sbd_viz.decoders.verified.single``), and whether each output's
ids equal greedy NTP's. Calls are counted, not timed (wall clock is benchmarked separately). Prints; writes nothing.

    python bench/bench_tree_drafting.py                                    # runs/sbd-adapter/checkpoint
    python bench/bench_tree_drafting.py --model smollm2-135m-sbd --prompts 2 --blocks 4

Prompts: the first ``--prompts`` held-out chat questions (``training.distill.HELDOUT_CHAT``, never trained on)
through the model's chat template (``distill.as_chat``), ``--max-new-tokens`` each; an output ends at the model's
EOS (``<|im_end|>`` for SmolLM2-Instruct). Per block size and commit rule, both draftings decode every prompt:

- tokens per call: the prompts' output tokens over their calls, the prompt's prefill call counted;
- rows per call: tokens fed per call (a tree call feeds every branch's slots), the prefill call left out;
- accepted: the drafts NTP accepted, of those it checked; rollbacks: calls that rejected one;
- = NTP: prompts whose output ids equal ``sv.decode_ntp``'s (HF ``generate`` on the same weights; the adapter is
  off on the causal rows, so this is the base's greedy text).

Two rules: the default (entropy-bounded at its default γ) and ``top_k`` with γ = block size (every slot drafted,
where tree drafting can only gain: a draft more adds to a call's accepted run, never takes from it).
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import run_info  # noqa: E402

DRAFTINGS = ("single", "tree")


@dataclass
class Tally:
    """One (block size, rule, drafting)'s counts over the prompts."""

    tokens: int = 0
    calls: int = 0
    rows: int = 0  # tokens fed by the calls after the prefill call
    later_calls: int = 0
    checked: int = 0
    accepted: int = 0
    rollbacks: int = 0
    same: int = 0
    prompts: int = 0
    differ: list = field(default_factory=list)

    def add(self, trace, ntp_ids, index: int) -> None:
        self.tokens += trace.n_tokens
        self.calls += trace.nfe
        self.rows += sum(s.n_input for s in trace.steps[1:])
        self.later_calls += max(trace.nfe - 1, 0)
        self.checked += len(trace.checks())
        self.accepted += sum(c.accepted for c in trace.checks())
        self.rollbacks += len(trace.rollbacks())
        self.prompts += 1
        if list(trace.output_ids) == list(ntp_ids):
            self.same += 1
        else:
            self.differ.append(index)

    def row(self) -> list[str]:
        return [f"{self.tokens / self.calls:.2f}", f"{self.tokens}/{self.calls}",
                f"{self.rows / max(self.later_calls, 1):.1f}",
                f"{self.accepted}/{self.checked}" if self.checked else "-", str(self.rollbacks),
                f"{self.same}/{self.prompts}" + (f" (differ: {self.differ})" if self.differ else "")]


def rules_for(k: int, default_rule: str, default_gamma: float) -> list[tuple[str, float]]:
    return [(default_rule, default_gamma), ("top_k", k)]


def table(head: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head] + rows]
    return "\n".join([lines[0], "  ".join("-" * w for w in widths)] + lines[1:])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="runs/sbd-adapter/checkpoint", help="an adapter folder or a model name")
    p.add_argument("--prompts", type=int, default=8)
    p.add_argument("--max-new-tokens", type=int, default=48)
    p.add_argument("--blocks", type=int, nargs="+", default=[4, 8])
    p.add_argument("--threads", type=int, default=1, help="torch threads (the CPU is shared)")
    args = p.parse_args(argv)

    import torch

    import sbd_viz as sv
    from sbd_viz.decoders.rules import DEFAULT_GAMMA, DEFAULT_RULE
    from sbd_viz.training import distill

    torch.set_num_threads(args.threads)
    model = sv.load_model(args.model)
    questions = distill.HELDOUT_CHAT[: args.prompts]
    prompts = [distill.as_chat(model.tokenizer, q) for q in questions]
    n = args.max_new_tokens
    print(f"# tree vs single drafting, verified SBD · {model!r} ({args.model}) · {run_info.utc_now()}")
    print(f"# {len(prompts)} held-out chat prompts, {n} new tokens max, fp32, torch threads {args.threads}")

    ntp = [sv.decode_ntp(model, prompt, max_new_tokens=n) for prompt in prompts]
    ntp_tokens, ntp_calls = sum(t.n_tokens for t in ntp), sum(t.nfe for t in ntp)
    print(f"# greedy NTP: {ntp_tokens} tokens in {ntp_calls} calls ({ntp_tokens / ntp_calls:.2f} tokens per call); "
          f"stops: {sorted({t.stop_reason for t in ntp})}")

    rows = []
    for k in args.blocks:
        for rule, gamma in rules_for(k, DEFAULT_RULE, DEFAULT_GAMMA):
            tallies = {d: Tally() for d in DRAFTINGS}
            for i, prompt in enumerate(prompts):
                for drafting in DRAFTINGS:
                    trace = sv.decode(model, prompt, decoder="sbd", verify=True, drafting=drafting, rule=rule,
                                      gamma=gamma, block_size=k, max_new_tokens=n)
                    tallies[drafting].add(trace, ntp[i].output_ids, i)
            for drafting in DRAFTINGS:
                rows.append([str(k), f"{rule} γ {gamma:g}", drafting] + tallies[drafting].row())
            print(f"# done: block {k}, {rule} γ {gamma:g}", flush=True)
    print()
    print(table(["block", "rule", "drafting", "tokens/call", "tokens/calls", "rows/call", "accepted",
                 "rollbacks", "= NTP"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
