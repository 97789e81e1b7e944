"""Claims a walkthrough's fixed prose makes about its own outputs, checked on the outputs.

Most numbers in the walkthroughs are printed by their cells, or written into Markdown built from the notebook's
variables, so they cannot drift. What stays is the fixed prose around them ("prompt lookup saves calls where the
answer quotes the prompt", "a single run's seconds are not a speed comparison: the cell below warms up"). Each check
here reads the text of a notebook's outputs (``executed_outputs`` of an executed notebook, or ``page_outputs`` of its
rendered page) and returns the claims that text contradicts, so a change that makes a notebook's output disagree with
its prose fails: on the rendered pages in tests/unit, on a fresh run in tests/notebooks.
"""

from __future__ import annotations

import re

# "quoting        prompt_lookup    4 calls   11 tokens  2.75 tokens/call" (notebook 7's decoder table)
DECODE_ROW = re.compile(r"^(quoting|open question)\s+(\w+)\s+(\d+) calls\s+(\d+) tokens", re.MULTILINE)


def real_lm(outputs: str) -> list[str]:
    """Notebook 7: the decode table exists, stays within the length its intro names, and prompt lookup saves calls on
    the quoting prompt (its Summary says so)."""
    rows = {(kind, decoder): (int(calls), int(tokens)) for kind, decoder, calls, tokens in DECODE_ROW.findall(outputs)}
    limit = re.search(r"each SmolLM2 decode below: at most (\d+) new tokens", outputs)
    if len(rows) != 6 or limit is None:
        return [f"the decoder table (6 rows) and the length line: found {len(rows)} rows, length line {bool(limit)}"]
    wrong = [f"{kind} {decoder}: {tokens} tokens, over the stated {limit.group(1)}"
             for (kind, decoder), (_, tokens) in rows.items() if tokens > int(limit.group(1))]
    if rows["quoting", "prompt_lookup"][0] >= rows["quoting", "ntp"][0]:
        wrong.append("the Summary says prompt lookup saves calls on the quoting prompt; the table shows none saved")
    if rows["open question", "prompt_lookup"][0] < rows["open question", "ntp"][0] and "drafting pays there too" \
            not in outputs:
        wrong.append("prompt lookup saves calls on the open question, and the text does not say so")
    return wrong


def what_is_sbd(outputs: str) -> list[str]:
    """Notebook 1: single runs' seconds are shown (trace_summary's wall clock line), so the paired, warmed timing the
    prose promises must be there, with both medians and both statistics named."""
    needed = ["after a warm-up run of each", "paired rounds: median SBD", "NTP's median time per token / SBD's",
              "median of the per-round ratios"]
    return [f"missing: {n!r}" for n in needed if n not in outputs]


def gamma_tradeoff(outputs: str) -> list[str]:
    """Notebook 2: the γ 0 against γ 0.1 comparison is shown beside the sweep table."""
    return [] if re.search(r"Here γ 0 scores [\d.]+ and γ 0\.1 [\d.]+", outputs) else ["no γ 0 against γ 0.1 line"]


def verified_sbd(outputs: str) -> list[str]:
    """Notebook 5: the grid says, per block size, how tokens per call move between its two largest γ, and the words
    agree with the numbers."""
    lines = re.findall(r"block size (\d+): ([\d.]+) tokens per call at γ [\d.]+, ([\d.]+) at γ [\d.]+: "
                       r"(no change|a larger γ changed the decodes)", outputs)
    if not lines:
        return ["no line on the two largest γ"]
    return [f"block size {k}: {a} and {b} read as {words!r}" for k, a, b, words in lines
            if (a == b) != (words == "no change")]


def parallel_decoders(outputs: str) -> list[str]:
    """Notebook 6: the decode-order section shows its table and reads it."""
    needed = ["Kendall τ, mean over items", "Left to right only, on every item:"]
    return [f"missing: {n!r}" for n in needed if n not in outputs]


CLAIMS = {"01_what_is_sbd": what_is_sbd, "02_gamma_tradeoff": gamma_tradeoff, "05_verified_sbd": verified_sbd,
          "06_parallel_decoders": parallel_decoders, "07_real_lm": real_lm}


def contradicted(stem: str, outputs: str) -> list[str]:
    """The claims of notebook ``stem`` that ``outputs`` (all its output text) contradicts; [] if it has none."""
    check = CLAIMS.get(stem)
    return check(outputs) if check else []
