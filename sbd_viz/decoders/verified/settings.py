"""Verified SBD's own settings, checked: how it drafts (``drafting``: single or tree), a token tree's widths
(``tree_widths``) and the most blocks a tree call feeds (``tree_blocks``)."""

from __future__ import annotations

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
