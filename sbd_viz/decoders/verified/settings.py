"""Verified SBD's own settings, checked: how it drafts (``drafting``: single or tree), a token tree's widths
(``tree_widths``) and the most blocks a tree call feeds (``tree_blocks``); and its drafting modes, named, as a page
offers them (``MODES``, ``mode_label``, ``fastest_mode``)."""

from __future__ import annotations

from typing import Any

DRAFTING = ("single", "tree")  # how verified SBD drafts: one block per call, or a block per possible accepted length


def check_drafting(drafting, config) -> str:
    """``drafting`` as a decode with ``config`` (a ``DecodeConfig``) can run it, else a ``ValueError`` naming it."""
    if not isinstance(drafting, str) or drafting not in DRAFTING:
        raise ValueError(f"drafting: must be one of {', '.join(map(repr, DRAFTING))}, got {drafting!r}")
    if drafting == "tree" and config.temperature != 0:
        raise ValueError(
            f"drafting: tree drafting picks each branch by NTP's greedy verdicts, so it needs "
            f"temperature 0, got temperature={config.temperature!r}"
        )
    if drafting == "tree" and not config.verify:
        raise ValueError(
            "drafting: tree drafting is a mode of verified SBD (NTP's verdicts choose the branch); "
            "pass verify=True, or drafting='single'"
        )
    return drafting


MAX_TREE_WIDTH = 16  # candidates at a slot: a call feeds a block after each, so wider trees cost rows fast


def check_tree_widths(widths, drafting: str) -> tuple[int, ...] | None:
    """``tree_widths`` (whole numbers, or their text as the CLI gives it: ``"3,1,1"``) as a decode drafting
    ``drafting`` can run it (a tuple, or None for the chain), else a ``ValueError`` naming it."""
    if widths is None:
        return None
    if isinstance(widths, str) and all(part.strip().isdigit() for part in widths.split(",")):
        widths = [int(part) for part in widths.split(",")]
    if isinstance(widths, (str, bytes)) or not hasattr(widths, "__iter__"):
        raise ValueError(f"tree_widths: must be a list of whole numbers, one per slot after slot 0, got {widths!r}")
    widths = tuple(widths)
    if not widths or any(isinstance(w, bool) or not isinstance(w, int) or not 1 <= w <= MAX_TREE_WIDTH for w in widths):
        raise ValueError(
            f"tree_widths: must be whole numbers in [1, {MAX_TREE_WIDTH}], one per slot after slot 0, "
            f"got {list(widths)!r}"
        )
    if drafting != "tree":
        raise ValueError(
            f"tree_widths: a token tree is a way of tree drafting; pass drafting='tree', got drafting={drafting!r}"
        )
    return widths


def check_tree_blocks(blocks, drafting: str) -> int | None:
    """``tree_blocks`` (a whole number >= 1, or its text as the CLI gives it) as a decode drafting ``drafting`` can
    run it, or None (a block after every fed node), else a ``ValueError`` naming it."""
    if blocks is None:
        return None
    if isinstance(blocks, str) and blocks.strip().isdigit():
        blocks = int(blocks)
    if isinstance(blocks, bool) or not isinstance(blocks, int) or blocks < 1:
        raise ValueError(f"tree_blocks: must be a whole number >= 1 (the most blocks a call feeds), got {blocks!r}")
    if drafting != "tree":
        raise ValueError(
            f"tree_blocks: it limits tree drafting's blocks; pass drafting='tree', got drafting={drafting!r}"
        )
    return blocks


# Verified SBD's drafting modes as a menu offers them, by the names the bench pages and the γ strip give them
# (``mode_label``). On smollm2-135m-sbd bench/TREE_BLOCKS.md measured the first the fastest on this CPU (1.12x HF's
# generate); the last is what a decode with verify=True does unless told otherwise.
_MODES: list[dict[str, Any]] = [
    dict(drafting="tree", tree_blocks=1),
    dict(drafting="tree", tree_widths=(2, 1, 1), tree_blocks=1),
    dict(drafting="tree"),
    dict(drafting="single"),
]


def mode_label(config) -> str:
    """How a decode with ``config`` (a trace's config, or a decode's settings) drafted, in words: ``"single
    drafting"``, ``"tree: chain, 1 block a call"``, ``"tree: token tree 2,1,1, every block"``; "" where it is not
    verified SBD."""
    if not config.get("verify"):
        return ""
    if config.get("drafting", "single") != "tree":
        return "single drafting"
    widths = config.get("tree_widths")
    tree = "token tree " + ",".join(map(str, widths)) if widths and any(w > 1 for w in widths) else "chain"
    cap = config.get("tree_blocks")
    return f"tree: {tree}, " + ("every block" if cap is None else f"{cap} block{'s' if cap != 1 else ''} a call")


MODES: dict[str, dict[str, Any]] = {mode_label(dict(verify=True, **m)): m for m in _MODES}


def fastest_mode(model) -> str:
    """The drafting mode (a ``MODES`` label) measured fastest on ``model``: an SBD adapter with its sampler head
    (smollm2-135m-sbd): tree drafting of the chain, one block a call (bench/TREE_BLOCKS.md); another (the character
    model, no sampler head: bench/VERIFIED_MODES.md, where every tree mode ran slower than single drafting): single."""
    if getattr(model, "adapter", None) is not None:
        return mode_label(dict(verify=True, **_MODES[0]))
    return mode_label(dict(verify=True, drafting="single"))
