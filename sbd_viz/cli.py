"""The ``sbd-viz`` command: trace | ladder | eval | sweep | gaps | roofline | bench | train | site | app."""

from __future__ import annotations

import argparse
import math
import shlex
import sys


def _trace(args) -> int:
    import sbd_viz as sv

    model = sv.load_model(args.model, dtype=args.dtype, device=args.device)
    if args.ntp:
        trace = sv.decode_ntp(model, args.prompt, max_new_tokens=args.max_new_tokens, stop=args.stop)
    else:  # the one door: a setting the decoder does not take, set, is refused by name
        trace = sv.decode(
            model,
            args.prompt,
            decoder=args.decoder,
            rule=args.rule,
            gamma=_gamma(args),
            block_size=args.block_size,
            max_new_tokens=args.max_new_tokens,
            temperature=args.temperature,
            seed=args.seed,
            stop=args.stop,
            gap_free=args.gap_free,
            verify=args.verify,
            **_own_given(args),
        )
    print(sv.trace_summary(trace))
    if args.out:
        print(f"trace written to {trace.save(args.out)}")
    if args.html:
        sv.save_html(trace, args.html)
        print(f"animation written to {args.html}")
    if args.gif:
        from .plots.animation import save_animation

        print(f"GIF written to {save_animation(trace, args.gif)} ({trace.nfe} frames, one per call)")
    return 0


def _ladder(args) -> int:
    import sbd_viz as sv

    model = sv.load_model(args.model)
    df = sv.gamma_ladder(
        model,
        args.prompt,
        rule=args.rule,
        gammas=args.gammas,
        block_size=args.block_size,
        max_new_tokens=args.max_new_tokens,
        stop=args.stop,
        gap_free=args.gap_free,
        decoder=args.decoder,
        **_own_given(args),
    )
    knob = df.attrs["knob"]  # γ, or the chosen decoder's knob (Jacobi's block_size, ...)
    print(
        f"{args.prompt!r} across {knob}, decoder {df.attrs['decoder']}, rule {args.rule}; NTP: "
        f"{df.attrs['ntp_calls']} calls, {df.attrs['ntp_text']!r}"
    )
    from .analysis.divergence import DIVERGENCE_COLUMNS

    shown = df[[knob, "calls", "tokens_per_call", "same_as_ntp", *DIVERGENCE_COLUMNS, "gap_fills", "text"]].copy()
    for col in ("divergence_token", "divergence_ntp_token", "text"):
        shown[col] = shown[col].map(lambda t: "" if t is None else repr(t))
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.3g}"))
    safe = df.attrs["largest_safe_gamma"]
    name = "γ" if knob == "gamma" else knob
    print(
        f"largest safe {name}: {safe:g} (the text is NTP's from the smallest {name} that keeps it up to this one)"
        if safe is not None
        else f"largest safe {name}: none (no {name} tried writes NTP's text)"
    )
    if df.attrs.get("exact"):  # the ladder read the exact γ map: every safe γ range, exact ends
        print(
            f"exactly: {df.attrs['safe']}; the text changes at γ "
            f"{', '.join(repr(b) for b in df.attrs['breakpoints']) or 'no γ'}"
        )
    if args.html:
        from . import plots
        from .plots.ladder_figure import gamma_ladder_figure

        plots.save_html(gamma_ladder_figure(df), args.html)
        print(f"ladder figure written to {args.html}")
    return 0


def _eval(args) -> int:
    import json

    import sbd_viz as sv

    model = sv.load_model(args.model)
    suite = sv.tasks.load_suite(split=args.split, per_family=args.per_family)
    from .decoders.ntp import NTP

    decoder = NTP.name if args.ntp else args.decoder  # --ntp: the reference alone, no speedup beside itself
    result = sv.evaluate(
        model,
        suite,
        rule=args.rule,
        gamma=_gamma(args),
        block_size=args.block_size,
        gap_free=args.gap_free,
        decoder=decoder,
        progress=True,
        measure_speedup=decoder != NTP.name,
        verify=args.verify,
        **_own_given(args),
    )
    result.pop("rows")
    print(json.dumps(result, indent=1))
    return 0


def _sweep(args) -> int:
    import sbd_viz as sv

    from . import analysis

    model = sv.load_model(args.model)
    suite = sv.tasks.load_suite(
        split=args.split, per_family=args.per_family, families=tuple(args.families) if args.families else None
    )
    df = analysis.sweep(
        model,
        suite,
        rules=args.rules,
        gammas=args.gammas,
        block_sizes=args.block_sizes,
        gap_free=(False, True) if args.gap_free_too else (False,),
        verify=(False, True) if args.verify_too else (False,),
        max_new_tokens=args.max_new_tokens,
        cache_dir=None if args.no_cache else args.cache_dir,
        batch_size=args.batch_size,
        speed_batch_size={"1": 1, "batch": args.batch_size, "none": None}[args.speed_batch],
    )
    from .analysis.evaluation import is_main_process

    if not is_main_process():  # under accelerate launch: every process swept its share; one writes
        return 0
    df.to_csv(args.out, index=False)
    shown = [
        *analysis.suite_sweep.SWEEP_SETTING,
        "accuracy",
        "tokens_per_call",
        "speedup_calls",
        "speedup_wall",
        "gap_fill_rate",
        "ntp_agreement",
        "accuracy_with_gaps",
        "accuracy_without_gaps",
    ]
    print(df[shown].to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    print(f"sweep written to {args.out}")
    if args.gap_free_too:
        print("\ngap-free ablation:")
        print(analysis.gap_free_ablation(df).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if args.html:
        from . import plots

        plots.save_html(plots.tradeoff(df), args.html)
        print(f"speed/quality figure written to {args.html}")
    return 0


def _gaps(args) -> int:
    import sbd_viz as sv

    from . import analysis

    traces = [sv.load_trace(path) for path in args.traces]
    model = sv.load_model(args.model) if args.model else None
    df = analysis.gap_fill_report(traces, model=model)
    kept = sum(len(t.kept_gap_fills()) for t in traces)
    print(
        f"{len(traces)} trace(s), {sum(t.n_tokens for t in traces)} tokens, {kept} gap fill(s) kept in the output"
        + (f", {len(df) - kept} discarded by the stop" if len(df) > kept else "")
        + ("" if model else "  (pass --model DIR to add the NTP outcomes)")
    )
    if df.empty:
        return 0
    cols = ["trace", "call", "block", "slot", "gap", "text", "entropy", "prob", "kept"]
    cols += ["ntp_text", "ntp_agrees", "ntp_logprob"] if model else []
    cols += ["suspicion", "state"]
    shown = df[cols].head(args.top).copy()
    shown["text"] = shown["text"].map(repr)
    if model:
        shown["ntp_text"] = shown["ntp_text"].map(lambda t: "" if t is None else repr(t))
    print(shown.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    if len(df) > args.top:
        print(f"... and {len(df) - args.top} more (--top N shows more)")
    return 0


def _roofline(args) -> int:
    print(roofline_report(args))
    return 0


def add_roofline_args(parser: argparse.ArgumentParser) -> None:
    """The options of ``sbd-viz roofline``."""
    from .analysis import roofline as rf

    parser.add_argument(
        "--hardware",
        default=rf.DEFAULT_HARDWARE,
        help=f"comma-separated; one of {', '.join(rf.HARDWARE)}, or {rf.THIS_CPU} once measured",
    )
    parser.add_argument("--model", default=rf.DEFAULT_MODEL, help=f"one of {', '.join(rf.MODELS)}")
    parser.add_argument("--batch", default="1,4,8,16", help="comma-separated batch sizes")
    parser.add_argument(
        "--block", default="8,16,32,64", help="Table 4's block sizes (Table 3: 1, 2, 4, ... up to the largest)"
    )
    parser.add_argument("--kv", default=",".join(map(str, rf.PAPER_KV)), help="comma-separated KV lengths")
    parser.add_argument("--nfe", default=",".join(map(str, rf.PAPER_NFE)), help="Table 4's NFE speedups")
    parser.add_argument(
        "--mode",
        default="corrected",
        choices=rf.MODES,
        help="corrected shapes, or the paper's printed code (reproduces its tables)",
    )
    parser.add_argument("--trace", default=None, metavar="FILE", help="project this saved trace instead")


def _whole_numbers(option: str, text: str, lo: int = 1) -> list[int]:
    """A comma-separated option's whole numbers, each at least ``lo``; else a ValueError naming the option."""
    try:
        values = [int(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(v < lo for v in values):
        raise ValueError(f"{option}: expected comma-separated whole numbers >= {lo}, got {text!r}")
    return values


def _numbers(option: str, text: str) -> list[float]:
    """A comma-separated option's finite numbers, each at least 1; else a ValueError naming the option."""
    try:
        values = [float(v) for v in str(text).split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not math.isfinite(v) or v < 1 for v in values):
        raise ValueError(f"{option}: expected comma-separated numbers >= 1, got {text!r}")
    return values


def roofline_report(args) -> str:
    """``sbd-viz roofline``: Tables 3 and 4 (markdown), or a saved trace's projection with ``--trace``."""
    import sbd_viz as sv

    from .analysis import roofline as rf

    hws = [rf.get_hardware(h.strip()) for h in str(args.hardware).split(",") if h.strip()]
    if not hws:
        raise ValueError(f"--hardware: give at least one of {list(rf.hardware_names())}")
    shape, batches = rf.get_model(args.model), _whole_numbers("--batch", args.batch)
    if args.trace:
        trace = sv.load_trace(args.trace)
        lines = [
            f"{args.trace}: {trace.n_tokens} tokens in {trace.nfe} calls ({trace.config.get('decoder', '?')}), "
            f"prompt {len(trace.prompt_ids)} tokens; model {shape.name}, {args.mode} shapes",
            "",
            "| hardware | batch | calls | NTP calls | time (ms) | NTP time (ms) | speedup | after prefill |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for hw in hws:
            for b in batches:
                p = rf.project(trace, hw, shape, b, args.mode)
                lines.append(
                    f"| {hw.name} | {b} | {p['sbd_calls']} | {p['ntp_calls']} | {1e3 * p['sbd_s']:.3f} | "
                    f"{1e3 * p['ntp_s']:.3f} | {p['speedup']:.3f} | {p['decode_speedup']:.3f} |"
                )
        return "\n".join(lines)
    blocks, kvs = _whole_numbers("--block", args.block), _whole_numbers("--kv", args.kv, 0)
    nfes = _numbers("--nfe", args.nfe)
    t3_blocks = sorted({2**i for i in range(max(blocks).bit_length()) if 2**i <= max(blocks)} | set(blocks))
    out = []
    for hw in hws:
        out += [
            f"## {hw.name}, {shape.name}, {args.mode} shapes",
            "",
            "Table 3: time of one block forward / one NTP forward.",
            "",
            rf.table3(hw, shape, batches, kvs, t3_blocks, args.mode),
            "",
            f"Table 4: theoretical wall-clock speedup; blocks {' / '.join(map(str, blocks))}, KV "
            + " (→ ".join(rf.kv_label(kv) for kv in kvs)
            + ")" * (len(kvs) - 1)
            + ".",
            "",
            rf.table4(hw, shape, batches, kvs, blocks, nfes, args.mode),
            "",
        ]
    return "\n".join(out).rstrip() + "\n"


def _bench(args) -> int:
    """The speed benchmark is a script of the repository (``bench/scripts/bench_speed.py``), not of the installed
    package."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "bench" / "scripts" / "bench_speed.py"
    if not path.is_file():
        print(
            "sbd-viz bench: the benchmarks live in the sbd_viz repository's bench/ folder, which an installed "
            "package does not include; clone the repository and run `python bench/scripts/bench_speed.py` there",
            file=sys.stderr,
        )
        return 2
    sys.path.insert(0, str(path.parent))  # the script imports its neighbours (bench/scripts/run_info.py)
    spec = importlib.util.spec_from_file_location("sbd_viz_bench_speed", path)
    assert spec is not None and spec.loader is not None  # a .py file has a loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.main(args.rest) or 0


def _own_given(args) -> dict:
    """The decoder's own settings given as flags (``own_flags``, from ``_add_decoder_args``): those set, by name."""
    return {name: getattr(args, name) for name in args.own_flags if getattr(args, name) is not None}


def _gamma(args) -> float:
    """``--gamma``, or the chosen rule's default knob."""
    from .decoders.rules import COMMIT_RULES

    return COMMIT_RULES[args.rule].default if args.gamma is None else args.gamma


# The options several commands share, each written once: flag -> its add_argument keywords
_SHARED_OPTIONS: dict[str, dict] = {
    "--model": dict(default=None, help="model folder (default: the shipped model)"),
    "--block-size": dict(
        type=int, default=None, help="slots decoded together (default: the model's, recorded in its folder, else 16)"
    ),
    "--gap-free": dict(action="store_true", help="only commit a contiguous run from the left"),
    "--max-new-tokens": dict(type=int, default=64, help="new tokens at most (default: %(default)s)"),
    "--stop": dict(action="append", default=None, help="stop string (repeatable); e.g. --stop $'\\n'"),
    "--split": dict(
        default="test",
        choices=["test", "train"],
        help="the suite's held-out items (test) or training ones (default: %(default)s)",
    ),
}


def _add_shared(p: argparse.ArgumentParser, *flags: str) -> None:
    """The shared options ``flags`` (``_SHARED_OPTIONS``), in this order."""
    for flag in flags:
        p.add_argument(flag, **_SHARED_OPTIONS[flag])


def _add_decode_args(p: argparse.ArgumentParser) -> None:
    from .decoders.rules import COMMIT_RULES, DEFAULT_RULE, RULES

    knobs = "; ".join(f"{name}: {rule.meaning}, default {rule.default:g}" for name, rule in COMMIT_RULES.items())
    _add_shared(p, "--model")
    p.add_argument("--rule", default=DEFAULT_RULE, choices=RULES, help="the commit rule (default: %(default)s)")
    p.add_argument("--gamma", type=float, default=None, help=f"the rule's knob ({knobs})")
    _add_shared(p, "--block-size", "--gap-free")


def _own_settings() -> dict[str, list]:
    """Every registered decoder's own settings: name -> the specs that own it (each becomes a ``--flag``)."""
    from .decoders.registry import decoders

    owners: dict[str, list] = {}
    for spec in decoders():
        for name in spec.own:
            owners.setdefault(name, []).append(spec)
    return owners


def _setting_value(text: str):
    """A flag's text as a setting: a JSON number, true/false or null, else the text itself."""
    import json

    try:
        return json.loads(text)
    except ValueError:
        return text


def _add_decoder_args(p: argparse.ArgumentParser) -> None:
    """``--decoder`` (the registry's names) and one flag per decoder's own setting, all read from the registry."""
    from .decoders.registry import decoders

    specs = decoders()
    p.add_argument(
        "--decoder",
        default=None,
        choices=[s.name for s in specs],
        help="; ".join(f"{s.name}: {s.label}" + (" (greedy's text)" if s.exact else "") for s in specs)
        + " (default: the model's first, sbd for an SBD model)",
    )
    added = []
    for name, owners in _own_settings().items():
        default = ", ".join(f"{s.name}: {s.own[name]!r}" for s in owners)
        try:
            p.add_argument(
                f"--{name.replace('_', '-')}",
                dest=name,
                type=_setting_value,
                default=None,
                help=f"{', '.join(s.name for s in owners)}'s own setting (default {default})",
            )
        except argparse.ArgumentError:  # a plugin's setting named like a flag already here: it cannot be a flag
            continue
        added.append(name)
    p.set_defaults(own_flags=tuple(added))


def _add_load_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dtype", default=None, help="the weights' dtype, e.g. bfloat16 (default float32)")
    p.add_argument("--device", default=None, help="cpu, cuda, cuda:1, mps or auto (default the CPU)")


def build_parser() -> argparse.ArgumentParser:
    from .decoders.rules import DEFAULT_RULE, RULES

    parser = argparse.ArgumentParser(prog="sbd-viz", description="See and measure Set Block Decoding.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("trace", help="decode one prompt and print a one-screen summary")
    p.add_argument("prompt", help="the text to continue (quote it; $'\\n' for a newline)")
    _add_decode_args(p)
    _add_shared(p, "--max-new-tokens")
    p.add_argument("--temperature", type=float, default=0.0, help="0: greedy; above 0: sampling at this temperature")
    p.add_argument("--seed", type=int, default=0, help="the sampling seed (with --temperature above 0)")
    _add_shared(p, "--stop")
    p.add_argument("--ntp", action="store_true", help="decode with NTP (HF generate, greedy) instead")
    _add_decoder_args(p)
    p.add_argument(
        "--verify",
        action="store_true",
        help="check every draft against NTP greedy (temperature 0): the text is exactly NTP's",
    )
    p.add_argument("--out", help="write the trace JSON here")
    p.add_argument("--html", help="write the offline block-fill animation here")
    p.add_argument("--gif", help="write the block-fill animation here as a GIF, one frame per call")
    _add_load_args(p)
    p.set_defaults(func=_trace)

    p = sub.add_parser(
        "ladder",
        help="decode one prompt at each γ of the rule's slider range and with NTP; "
        "print the calls and the largest γ that keeps NTP's text",
    )
    p.add_argument("prompt", help="the text to continue at every γ")
    _add_shared(p, "--model")
    p.add_argument(
        "--rule",
        default=DEFAULT_RULE,
        choices=RULES,
        help="the commit rule whose knob is walked (default: %(default)s)",
    )
    p.add_argument(
        "--gammas",
        nargs="+",
        type=float,
        default=None,
        help="the knob values to try (default: nine spread over the rule's slider range, and its default)",
    )
    _add_shared(p, "--block-size", "--gap-free", "--max-new-tokens", "--stop")
    p.add_argument("--html", help="also write the ladder figure here")
    _add_decoder_args(p)  # any decoder with a knob climbs its own ladder; --gammas are then its knob's values
    p.set_defaults(func=_ladder)

    p = sub.add_parser("eval", help="score a decoder on the verifiable suite")
    _add_decode_args(p)
    _add_shared(p, "--split")
    p.add_argument("--per-family", type=int, default=40, help="items of each family (default: %(default)s)")
    p.add_argument("--ntp", action="store_true", help="score greedy NTP alone (the same as --decoder ntp)")
    _add_decoder_args(p)
    p.add_argument("--verify", action="store_true", help="verified SBD: every draft checked against NTP greedy")
    p.set_defaults(func=_eval)

    p = sub.add_parser("sweep", help="score settings on the suite beside NTP; write a CSV (cached on disk)")
    _add_shared(p, "--model")
    p.add_argument(
        "--rules",
        nargs="+",
        default=["entropy_bounded"],
        choices=RULES,
        help="commit rules to sweep (default: %(default)s)",
    )
    p.add_argument(
        "--gammas",
        nargs="+",
        type=float,
        default=[0.0, 0.1, 0.35, 1.0],
        help="each rule's knob values (default: %(default)s)",
    )
    p.add_argument(
        "--block-sizes",
        nargs="+",
        type=int,
        default=None,
        help="default: the model's block size (recorded in its folder, else 16)",
    )
    p.add_argument("--gap-free-too", action="store_true", help="also run every setting gap-free (the ablation)")
    p.add_argument(
        "--verify-too",
        action="store_true",
        help="also run every setting verified (lossless: exactly NTP's text; only the speed varies)",
    )
    _add_shared(p, "--split")
    p.add_argument("--per-family", type=int, default=20, help="items of each family (default: %(default)s)")
    p.add_argument("--families", nargs="+", default=None, help="only these suite families (default: all)")
    p.add_argument("--max-new-tokens", type=int, default=64, help="new tokens at most per item (default: %(default)s)")
    p.add_argument(
        "--cache-dir",
        default=".sbd_cache",
        help="where finished rows are kept, so a rerun decodes only what is new (default: %(default)s)",
    )
    p.add_argument("--no-cache", action="store_true", help="measure afresh and store nothing")
    p.add_argument("--batch-size", type=int, default=1, help="prompts per forward for the scored decodes")
    p.add_argument(
        "--speed-batch",
        choices=["1", "batch", "none"],
        default="1",
        help="measure speedup_wall item by item at batch 1 (default), between the batched runs, or not at all",
    )
    p.add_argument("--out", required=True, help="write the sweep table here (CSV)")
    p.add_argument("--html", help="also write the speed/quality figure here")
    p.set_defaults(func=_sweep)

    p = sub.add_parser("gaps", help="list the gap fills of saved traces, most suspicious first")
    p.add_argument(
        "traces", nargs="+", metavar="TRACE.json", help="trace files saved by sbd-viz trace --out or the app"
    )
    p.add_argument("--model", default=None, help="model folder: adds what NTP would have chosen (teacher forced)")
    p.add_argument("--top", type=int, default=30, help="show at most this many events")
    p.set_defaults(func=_gaps)

    p = sub.add_parser("roofline", help="project calls onto GPU hardware: the paper's Tables 3 and 4, or a saved trace")
    add_roofline_args(p)
    p.set_defaults(func=_roofline)

    p = sub.add_parser(
        "bench", help="SBD vs HF generate speed benchmark (bench/scripts/bench_speed.py)", add_help=False
    )
    p.set_defaults(func=_bench)
    p.add_argument(
        "rest", nargs=argparse.REMAINDER, help="the benchmark's own options (sbd-viz bench --help lists them)"
    )

    p = sub.add_parser(
        "lm-eval",
        add_help=False,
        help="lm-evaluation-harness's own command line with the model sbd_viz and the shipped tasks "
        '(sbd_viz/harness/cli.py; needs pip install "sbd-viz[eval]"): sbd-viz lm-eval run --model sbd_viz '
        "--model_args decoder=sbd,gamma=0.5 --tasks sbd_asserts",
    )
    p.set_defaults(func=lambda args: _forward("sbd_viz.harness.cli", args.rest))
    p.add_argument(
        "rest", nargs=argparse.REMAINDER, help="lm-eval's own arguments (sbd-viz lm-eval run --help lists them)"
    )

    p = sub.add_parser(
        "train",
        add_help=False,
        help="train an SBD model (sbd_viz/training/train.py), with --adapter a gated SBD adapter on "
        "a frozen causal LM (sbd_viz/training/adapter_train.py), or with --sampler-head a sampler "
        "head on a frozen adapter (sbd_viz/training/head_train.py); --help lists each one's "
        "options",
    )
    p.set_defaults(func=_train)
    p.add_argument(
        "rest",
        nargs=argparse.REMAINDER,
        help="the trainer's own options (sbd-viz train --help, --adapter --help or --sampler-head --help)",
    )

    p = sub.add_parser(
        "site",
        help="write the static site: the demo as plain files (every prompt's γ map precomputed, drawn in the page), "
        "opened from the disk or served by any static server or static Space",
    )
    p.add_argument("--out", required=True, help="the folder to write (new, empty, or a site written before)")
    p.add_argument(
        "--model",
        action="append",
        default=None,
        metavar="MODEL",
        help="a model to show, a name or a folder (repeatable; default: sbd-char-5m and smollm2-135m-sbd)",
    )
    p.add_argument(
        "--prompt",
        action="append",
        default=None,
        help="a prompt to show on every model (repeatable; default: each model's examples, the app's)",
    )
    p.add_argument("--per-model", type=int, default=None, help="at most this many prompts per model (default: all)")
    p.add_argument(
        "--max-new-tokens",
        type=int,
        default=None,
        help="new tokens at most (default: 64 for the character model, whose answers end at their line; 32 for a "
        "text model, whose γ maps take minutes a prompt on a 2-core CPU)",
    )
    _add_shared(p, "--block-size")
    p.add_argument(
        "--step",
        type=float,
        default=None,
        help="decode only the γ pieces holding a multiple of this slider step, e.g. 0.01 (default: the exact γ maps, "
        "every piece)",
    )
    p.set_defaults(func=_site)

    p = sub.add_parser("app", help="start the Gradio app")
    p.add_argument(
        "--model",
        action="append",
        default=None,
        metavar="MODEL",
        help="a model to serve, on the page's model menu (repeatable; the page opens on the first that loads): a "
        "folder, a Hub id, or a name (smollm2-135m-sbd: SmolLM2 with the shipped SBD adapter; smollm2-135m: the "
        "base alone; sbd-char-5m: the character model) (default: $SBD_VIZ_MODEL, one or a comma-separated list, "
        "else smollm2-135m-sbd and sbd-char-5m)",
    )
    p.add_argument("--port", type=int, default=7860, help="TCP port to serve on (default: %(default)s)")
    p.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default: %(default)s, this machine only; 0.0.0.0 for every interface)",
    )
    _add_load_args(p)
    p.set_defaults(func=_app)
    return parser


def _forward(module: str, rest: list[str]) -> int:
    import importlib

    importlib.import_module(module).main(rest)
    return 0


def _train(args) -> int:
    if "--sampler-head" in args.rest:
        return _forward("sbd_viz.training.head_train", [w for w in args.rest if w != "--sampler-head"])
    if "--adapter" in args.rest:
        return _forward("sbd_viz.training.adapter_train", [w for w in args.rest if w != "--adapter"])
    from .analysis.evaluation import training_probe
    from .training import train

    train.main(args.rest, probe=training_probe)  # the trainer measures each checkpoint with the evaluation
    return 0


def _site(args) -> int:
    import sbd_viz as sv

    site = sv.export_site(
        args.out,
        models=args.model,
        prompts=args.prompt,
        per_model=args.per_model,
        max_new_tokens=args.max_new_tokens,
        block_size=args.block_size,
        step=args.step,
        command=shlex.join(["sbd-viz", *args.argv]),  # as typed, for the site's README to say how it was made
        log=print,
    )
    print(f"site written: {site}; open {site.folder / 'index.html'}")
    return 0


def _app(args) -> int:
    from .app import main as serve

    serve(model_path=args.model, host=args.host, port=args.port, dtype=args.dtype, device=args.device)
    return 0


FORWARDED = ("train", "bench")  # commands whose options belong to another script's parser


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] in FORWARDED:
        # argparse.REMAINDER drops a leading option ("train --preset x"), so forward the words as they are
        args = parser.parse_args(argv[:1])
        args.rest = argv[1:]
    else:
        args = parser.parse_args(argv)
    args.argv = argv
    try:
        return args.func(args)
    except (ValueError, FileNotFoundError) as exc:
        print(f"sbd-viz: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
