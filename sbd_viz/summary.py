"""Plain-text summaries of traces, for the CLI and for logs."""

from __future__ import annotations

from .trace import Trace


def _show(text: str) -> str:
    return text.replace("\n", "⏎").replace("\t", "⇥")


def trace_summary(trace: Trace, width: int = 100) -> str:
    """The generated text with each token's call number under it, and the headline measures."""
    cfg = trace.config
    if cfg.get("decoder") == "ntp":
        head = "NTP greedy (HF generate)"
    else:
        head = (f"SBD {'verified ' if trace.verified else ''}{cfg.get('rule')}"
                f"{' gap_free' if cfg.get('gap_free') else ''} gamma={cfg.get('gamma')} "
                f"block_size={cfg.get('block_size')}")
    lines = [f"{head}  model={trace.model_id}", f"prompt: {_show(trace.prompt)}", "", "output, with the call "
             "that committed each token:"]
    texts, calls = [_show(t) for t in trace.output_texts], trace.token_calls()
    row_t, row_c = "", ""
    for text, call in zip(texts, calls):
        cell = max(len(text), len(str(call))) + 1
        if len(row_t) + cell > width:
            lines += [row_t, row_c, ""]
            row_t, row_c = "", ""
        row_t += text.ljust(cell)
        row_c += str(call).ljust(cell)
    lines += [row_t, row_c, ""]
    gaps = trace.gap_fills()
    lines.append(f"tokens {trace.n_tokens}  calls (NFE) {trace.nfe}  tokens/call {trace.tokens_per_call:.2f}  "
                 f"blocks {trace.n_blocks}  gap fills {len(trace.kept_gap_fills())} kept  stop {trace.stop_reason}  "
                 f"time {1000 * trace.wall_time:.0f} ms")
    if trace.verified:
        checks = trace.checks()
        lines.append(f"verified: {sum(c.accepted for c in checks)}/{len(checks)} drafts accepted  "
                     f"rollbacks {len(trace.rollbacks())}  checking-only calls {trace.n_check_only}  "
                     "(the text is NTP greedy's)")
        for s in trace.rollbacks()[:10]:
            c = s.rejected[0]
            lines.append(f"  rollback: call {s.call} block {s.block} slot {s.rollback.slot}: drafted "
                         f"{_show(c.text)!r}, NTP wrote {_show(c.ntp_text)!r} (p={c.ntp_prob:.2f})")
    for g in gaps[:10]:
        lines.append(f"  gap fill: call {g.call} block {g.block} slot {g.slot} gap {g.gap}: {g.state}"
                     + ("" if g.kept else "  (after the stop: discarded)"))
    if len(gaps) > 10:
        lines.append(f"  ... and {len(gaps) - 10} more")
    return "\n".join(lines)
