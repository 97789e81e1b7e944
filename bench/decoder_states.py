"""The masked side in the states the decoder leaves a block in, against NTP on the same characters.

Training masks each slot i.i.d. (the paper's eq. 13), so a slot rarely sees every earlier slot of its block
committed; a block's later calls commit in just that state. For each model and each slot of a 16-slot block this
prints, on the answer characters of held-out documents (``sbd_viz.objective.decoder_state_accuracy``):
NTP's accuracy for the same character, MATP's with the slot's block prefix committed (a later call) and with the
whole block masked (a block's first call), and how many characters NTP gets right where MATP, with the prefix
committed, does not (and the reverse). Deterministic: nothing is sampled or timed.

    python bench/decoder_states.py --model sbd_viz/models/sbd-char-5m runs/leg_y/final_ema --windows 120 --threads 1
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

import sbd_viz as sv
from sbd_viz.objective import decoder_state_accuracy

import run_info  # beside this file

ROWS = (("ntp", "NTP, same character"), ("committed_prefix", "MATP, block prefix committed"),
        ("whole_block", "MATP, whole block masked"))


def markdown(header: dict, results: dict[str, dict]) -> str:
    first = next(iter(results.values()))
    k, n = first["block_size"], first["seq_len"]
    lines = ["# The masked side in the decoder's states", "",
             f"Produced by `{header['command']}` on {header['date']} ({header['machine']}; {header['minutes']:.1f} "
             "min). Nothing is sampled or timed.", "",
             f"{header['windows']} windows of {n} characters of held-out documents (4-16 suite lines each), the "
             f"answer characters of every block but a window's first; accuracy by slot of a {k}-slot block.", "",
             "| model | characters | NTP right, MATP (prefix committed) wrong | MATP right, NTP wrong |",
             "| --- | --- | --- | --- |"]
    for name, r in results.items():
        lines.append(f"| {name} | {sum(r['n_chars'])} | {r['ntp_right_prefix_wrong']} | {r['prefix_right_ntp_wrong']} |")
    lines += ["", "| model | state | " + " | ".join(f"slot {b}" for b in range(k)) + " |",
              "| --- | --- | " + " | ".join("---" for _ in range(k)) + " |"]
    for name, r in results.items():
        for key, label in ROWS:
            lines.append(f"| {name} | {label} | " + " | ".join(f"{v:.3f}" for v in r[key]) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", nargs="+", default=[None], help="model folders (default: the shipped model)")
    p.add_argument("--windows", type=int, default=120)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default=None, help="write the markdown here (default: print it)")
    p.add_argument("--json", default=None, help="also write every number here")
    p.add_argument("--from-json", default=None, help="render a run's --json again, computing nothing")
    args = p.parse_args(argv)
    if args.from_json:
        data = json.loads(Path(args.from_json).read_text())
        header, results = data["header"], data["results"]
    else:
        if args.windows < 1:
            p.error(f"--windows: need at least one window, got {args.windows}")
        torch.set_num_threads(args.threads)
        header = {"windows": args.windows, "date": run_info.utc_now(),
                  "command": "python bench/decoder_states.py " + " ".join(sys.argv[1:] if argv is None else argv),
                  "machine": run_info.machine(args.threads)}
        t0 = time.perf_counter()
        results = {}
        for path in args.model:
            results[path or "the shipped model"] = decoder_state_accuracy(sv.load_model(path), n_windows=args.windows)
            print(path, "done", flush=True)
        header["minutes"] = (time.perf_counter() - t0) / 60
    text = markdown(header, results)
    if args.out:
        Path(args.out).write_text(text)
    else:
        print(text)
    if args.json and not args.from_json:
        Path(args.json).write_text(json.dumps({"header": header, "results": results}, indent=1, allow_nan=False))


if __name__ == "__main__":
    main()
