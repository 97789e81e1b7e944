"""Writes the saved traces the tests read, with the library and the tests' own tiny models:

- ``trace_sbd.json``: plain SBD on ``sharp_model("llama")`` (conftest), "assert 1 + 2 == ", entropy_bounded γ 0.5,
  block 6, 14 tokens, top 2: ten calls, gap fills in every block.
- ``trace_verified.json``: verified SBD on ``sharp_model("llama")`` drafting NTP's own tokens except a wrong one at
  every generated position g with g % 7 in (2, 5) (``oracle_drafter`` of test_verify, soft), "x = [3, 1",
  confidence_threshold γ 0.5, block 6, 15 tokens, stop "q": its 11 calls reject drafts in a block (call 1), in a
  block's tail found by the next block's first call (calls 4 and 7), drop drafts after them, hold gap fills, and end
  with a checking-only call.

``plots_unverified.json`` beside them is ``test_plots.unverified_snapshot()`` saved as JSON.

Run from the repository's root: ``python tests/data/make_traces.py``. The decodes are greedy, so the files change
only where the trace format or the decoder changes (and in wall times and ``meta["created"]``).
"""

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import sbd_viz as sv  # noqa: E402
from conftest import sharp_model  # noqa: E402
from test_verify import oracle_drafter  # noqa: E402


def main() -> None:
    model = sharp_model("llama")
    sv.decode(model, "assert 1 + 2 == ", rule="entropy_bounded", gamma=0.5, block_size=6, max_new_tokens=14,
              top_n=2).save(HERE / "trace_sbd.json")
    prompt = "x = [3, 1"
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=15, stop=["q"])
    oracle_drafter(model, prompt, ntp.output_ids, {g for g in range(15) if g % 7 in (2, 5)}, soft=True)
    sv.decode(model, prompt, rule="confidence_threshold", gamma=0.5, block_size=6, max_new_tokens=15, stop=["q"],
              verify=True).save(HERE / "trace_verified.json")


if __name__ == "__main__":
    main()
