"""The ``sbd-viz`` command: trace | eval | train | app (and the analysis commands)."""

from __future__ import annotations

import argparse
import sys


def _trace(args) -> int:
    import sbd_viz as sv

    model = sv.load_model(args.model)
    if args.ntp:
        trace = sv.decode_ntp(model, args.prompt, max_new_tokens=args.max_new_tokens, stop=args.stop)
    else:
        trace = sv.decode(model, args.prompt, solver=args.solver, gamma=args.gamma, block_size=args.block_size,
                          max_new_tokens=args.max_new_tokens, temperature=args.temperature, seed=args.seed,
                          stop=args.stop, gap_free=args.gap_free)
    print(trace.summary())
    if args.out:
        print(f"trace written to {trace.save(args.out)}")
    if args.html:
        trace.to_html(args.html)
        print(f"animation written to {args.html}")
    return 0


def _eval(args) -> int:
    import json

    import sbd_viz as sv

    model = sv.load_model(args.model)
    suite = sv.tasks.load_suite(split=args.split, per_family=args.per_family)
    result = sv.evaluate(model, suite, solver=args.solver, gamma=args.gamma, block_size=args.block_size,
                         gap_free=args.gap_free, decoder="ntp" if args.ntp else "sbd", progress=True,
                         measure_speedup=not args.ntp)
    result.pop("rows")
    print(json.dumps(result, indent=1))
    return 0


def _add_decode_args(p: argparse.ArgumentParser) -> None:
    from .solvers import RULES

    p.add_argument("--model", default=None, help="model folder (default: the shipped model)")
    p.add_argument("--solver", default="entropy_bounded", choices=RULES)
    p.add_argument("--gamma", type=float, default=0.1, help="the rule's knob (entropy budget in nats by default)")
    p.add_argument("--block-size", type=int, default=16)
    p.add_argument("--gap-free", action="store_true", help="only commit a contiguous run from the left")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="sbd-viz", description="See and measure Set Block Decoding.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("trace", help="decode one prompt and print a one-screen summary")
    p.add_argument("prompt")
    _add_decode_args(p)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--stop", action="append", default=None, help="stop string (repeatable); e.g. --stop $'\\n'")
    p.add_argument("--ntp", action="store_true", help="decode with NTP (HF generate, greedy) instead")
    p.add_argument("--out", help="write the trace JSON here")
    p.add_argument("--html", help="write the offline block-fill animation here")
    p.set_defaults(func=_trace)

    p = sub.add_parser("eval", help="score a decoder on the verifiable suite")
    _add_decode_args(p)
    p.add_argument("--split", default="test", choices=["test", "train"])
    p.add_argument("--per-family", type=int, default=40)
    p.add_argument("--ntp", action="store_true")
    p.set_defaults(func=_eval)

    p = sub.add_parser("train", help="train an SBD model (see sbd_viz/train.py)", add_help=False)
    p.set_defaults(func=lambda a: _forward("sbd_viz.train", a.rest))
    p.add_argument("rest", nargs=argparse.REMAINDER)

    p = sub.add_parser("app", help="start the Gradio app")
    p.add_argument("--model", default=None)
    p.add_argument("--port", type=int, default=7860)
    p.add_argument("--host", default="127.0.0.1")
    p.set_defaults(func=_app)
    return parser


def _forward(module: str, rest: list[str]) -> int:
    import importlib

    importlib.import_module(module).main(rest)
    return 0


def _app(args) -> int:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "app.py"
    spec = importlib.util.spec_from_file_location("sbd_viz_app", path)
    if spec is None or not path.is_file():
        print(f"app.py not found next to the sbd_viz package ({path})", file=sys.stderr)
        return 2
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    app.main(model_path=args.model, host=args.host, port=args.port)
    return 0


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"sbd-viz: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
