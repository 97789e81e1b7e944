"""Traces in the formats peers' tools write, and back: lmdeploy's ``step_map`` and d3LLM's per-step trajectories.

``to_step_map`` / ``from_step_map`` and ``to_trajectory`` / ``from_trajectory`` (one record each), ``save_step_maps``,
``save_trajectories``, ``load_step_maps`` and ``load_trajectories`` (files of them). Both formats, the fields of
sbd_viz's own the records carry, and what an import does not invent: docs/trace.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .checks import check_trace
from .commits import kept_commits
from .data import Commit, Step, Trace
from .file import from_json as trace_from_json

STEP_MAP_FORMAT = "lmdeploy step_map"
TRAJECTORY_FORMAT = "d3LLM trajectory"
_BLOCK_SIZE_KEYS = {STEP_MAP_FORMAT: "block_size", TRAJECTORY_FORMAT: "block_length"}  # a record's own block size


# -- export ------------------------------------------------------------------------------------------------------
def _exportable(trace: Trace) -> Trace:
    trace = check_trace(trace)
    if trace.has_canvas:
        raise ValueError(
            "trace: a canvas decoder's trace (slots renoised after a commit) has no single commit per "
            "position; these formats cannot hold it"
        )
    return trace


def _common(trace: Trace) -> dict:
    n0 = len(trace.prompt_ids)
    return {
        "prompt": trace.prompt,
        "prompt_ids": list(trace.prompt_ids),
        "output_texts": list(trace.output_texts),
        "block_size": trace.config.get("block_size", max((s.block_size for s in trace.steps), default=1)),
        "stop_reason": trace.stop_reason,
        "model_id": trace.model_id,
        "config": trace.config,
        "nfe": trace.nfe,
        "_n0": n0,
    }


def to_step_map(trace: Trace) -> dict:
    """lmdeploy's ``token_ids`` / ``step_map`` / ``text`` / ``finish_reason`` of ``trace``, with sbd_viz's own
    fields (docs/trace.md)."""
    trace = _exportable(trace)
    kept = kept_commits(trace)
    if len(kept) != trace.n_tokens:
        raise ValueError("trace: some output token has no commit, so it has no step")
    calls = sorted({k.step.call for k in kept})
    rank = {call: i + 1 for i, call in enumerate(calls)}
    common = _common(trace)
    n0 = common.pop("_n0")
    return {
        "token_ids": list(trace.output_ids),
        "step_map": [rank[k.step.call] for k in kept],
        "text": trace.text,
        "finish_reason": "length" if trace.stop_reason == "length" else "stop",
        **common,
        "token_texts": [k.commit.text for k in kept],
        "probs": [k.commit.prob for k in kept],
        "entropies": [k.commit.entropy for k in kept],
        "step_blocks": [[trace.steps[c].block_start - n0, trace.steps[c].block_size] for c in calls],
    }


def to_trajectory(trace: Trace, mask_token_id: int, idx: int = 0) -> dict:
    """d3LLM's trajectory record of ``trace`` (the sequence after every call), with sbd_viz's own fields
    (docs/trace.md). ``mask_token_id``: the id written where a position is still masked (the model's ``mask_id``)."""
    trace = _exportable(trace)
    if not isinstance(mask_token_id, int) or isinstance(mask_token_id, bool):
        raise ValueError(f"mask_token_id: must be a token id (an int), got {mask_token_id!r}")
    common = _common(trace)
    n0 = common.pop("_n0")
    end = max([s.block_start + s.block_size for s in trace.steps] + [n0 + trace.n_tokens])
    state = list(trace.prompt_ids) + [mask_token_id] * (end - n0)
    trajectory, scores, texts = [], [], {}
    for s in trace.steps:
        for c in s.commits:
            state[s.block_start + c.slot] = c.token_id
            texts[str(c.token_id)] = c.text
        if s.rollback is not None:
            for slot in s.rollback.dropped:
                state[s.block_start + slot] = mask_token_id
        trajectory.append(list(state))
        scores.append([[s.block_start + c.slot - n0, c.prob, c.entropy] for c in s.commits])
    return {
        "idx": idx,
        "question": trace.prompt,
        "prompt_ids": list(trace.prompt_ids),
        "trajectory": trajectory,
        "final_output": list(trace.prompt_ids) + list(trace.output_ids),
        "generated_text": trace.text,
        **common,
        "mask_token_id": mask_token_id,
        "block_length": common["block_size"],
        "token_texts": texts,
        "commit_scores": scores,
        "step_blocks": [[s.block_start - n0, s.block_size] for s in trace.steps],
    }


def _write_lines(records: list[dict], path: str | Path) -> Path:
    path = Path(path)
    path.write_text("".join(json.dumps(r, allow_nan=False) + "\n" for r in records), encoding="utf-8")
    return path


def _read_records(path: str | Path) -> list[dict]:
    """JSON lines (one record per line), or one JSON list of records (as d3LLM saves them)."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        whole = None
    if isinstance(whole, list):
        records = whole
    elif isinstance(whole, dict):
        records = [whole]
    else:
        records = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise ValueError(f"path: {path} line {n} is not JSON ({exc})") from None
    if not all(isinstance(r, dict) for r in records):
        raise ValueError(f"path: {path} must hold JSON objects, one per line")
    return records


def save_step_maps(traces, path: str | Path) -> Path:
    """Each trace's ``to_step_map`` record, one per line (JSON lines)."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    return _write_lines([to_step_map(t) for t in traces], path)


def save_trajectories(traces, path: str | Path, mask_token_id: int) -> Path:
    """Each trace's ``to_trajectory`` record (``idx`` its index), one per line (JSON lines)."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    return _write_lines([to_trajectory(t, mask_token_id, idx=i) for i, t in enumerate(traces)], path)


def load_step_maps(path: str | Path, tokenizer=None, block_size: int | None = None) -> list[Trace]:
    """The traces of a step-map file (JSON lines, or a JSON list), each read by ``from_step_map``."""
    return [from_step_map(r, tokenizer, block_size) for r in _read_records(path)]


def load_trajectories(
    path: str | Path, tokenizer=None, mask_token_id: int | None = None, block_size: int | None = None
) -> list[Trace]:
    """The traces of a trajectory file (JSON lines, or d3LLM's JSON list), each read by ``from_trajectory``."""
    return [from_trajectory(r, tokenizer, mask_token_id, block_size) for r in _read_records(path)]


# -- import ------------------------------------------------------------------------------------------------------
def _ids(value, name: str) -> list[int]:
    if not isinstance(value, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise ValueError(f"{name}: must be a list of token ids (ints)")
    return value


def _block_size(record: dict, block_size, key: str) -> int:
    k = block_size if block_size is not None else record.get(key, record.get("block_size"))
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"block_size: the record has no {key} and none was given (a whole number >= 1), got {k!r}")
    return k


def _text_of(record: dict, tokenizer):
    """token id -> its text alone: the record's ``token_texts`` (a list aligned with token_ids is handled by the
    caller), else the tokenizer (a model's ``token_text`` or a tokenizer's ``decode``)."""
    texts = record.get("token_texts")
    if isinstance(texts, dict):
        return lambda token_id: texts[str(token_id)]
    if tokenizer is not None:
        if hasattr(tokenizer, "token_text"):
            return tokenizer.token_text
        if hasattr(tokenizer, "decode"):
            return lambda token_id: tokenizer.decode([token_id])
        raise ValueError("tokenizer: must be an sbd_viz model (token_text) or a tokenizer (decode)")
    return None


def _blocks(step_positions: list[list[int]], record: dict, n0: int, block_size, key: str) -> list[tuple[int, int]]:
    """Each step's block ``(absolute start, size)``: the record's ``step_blocks``, else aligned blocks of the block
    size from the first generated position."""
    given = record.get("step_blocks")
    if given is not None:
        if (
            not isinstance(given, list)
            or len(given) != len(step_positions)
            or not all(isinstance(b, list) and len(b) == 2 for b in given)
        ):
            raise ValueError(f"step_blocks: must be one [start, size] per step ({len(step_positions)})")
        return [(n0 + b[0], b[1]) for b in given]
    k = _block_size(record, block_size, key)
    blocks = []
    for i, positions in enumerate(step_positions):
        starts = {n0 + (p - n0) // k * k for p in positions}
        if len(starts) != 1:
            raise ValueError(f"step_map: step {i + 1} commits tokens in more than one block of {k}")
        blocks.append((starts.pop(), k))
    return blocks


def _build(
    record: dict,
    fmt: str,
    block_size: int | None,
    prompt_ids: list[int],
    step_commits: list[list[tuple[int, int]]],
    text_of,
    scores,
    output_ids: list[int],
) -> Trace:
    """A trace from a record of the format ``fmt``: each step's commits ``(absolute position, token id)``, in the
    record's blocks (``_blocks``: its ``step_blocks``, else cut by ``block_size`` or the record's own), checked by
    ``sv.trace_from_json``."""
    positions = [[p for p, _ in commits] for commits in step_commits]
    blocks = _blocks(positions, record, len(prompt_ids), block_size, _BLOCK_SIZE_KEYS[fmt])
    n0, unmeasured = len(prompt_ids), ["wall_time", "slot predictions"] + ([] if scores else ["prob", "entropy"])
    done: set[int] = set()
    steps, block, previous = [], -1, None
    for call, (commits, (start, size)) in enumerate(zip(step_commits, blocks)):
        if (start, size) != previous:
            block, step, previous = block + 1, 0, (start, size)
        else:
            step += 1
        masked = [slot for slot in range(size) if start + slot not in done]
        after = set(masked) - {p - start for p, _ in commits}
        rows = []
        for position, token_id in sorted(commits):
            slot = position - start
            if not 0 <= slot < size:
                raise ValueError(
                    f"step {call + 1}: position {position - n0} lies outside its block "
                    f"[{start - n0}, {start - n0 + size})"
                )
            prob, entropy = scores[call][position] if scores else (0.0, 0.0)
            rows.append(
                Commit(
                    slot=slot,
                    token_id=token_id,
                    text=text_of(token_id),
                    prob=prob,
                    entropy=entropy,
                    gap=sum(1 for m in after if m < slot),
                )
            )
        steps.append(
            Step(
                call=call,
                block=block,
                block_start=start,
                block_size=size,
                step=step,
                masked=tuple(masked),
                slots=(),
                commits=tuple(rows),
                wall_time=0.0,
            )
        )
        done.update(p for p, _ in commits)
    output_texts = record.get("output_texts")
    if not (isinstance(output_texts, list) and len(output_texts) == len(output_ids)):
        output_texts = [text_of(t) for t in output_ids]
    text = record.get("text", record.get("generated_text"))
    config = record.get("config")
    if not isinstance(config, dict):
        config = {"decoder": "imported", "block_size": max((b[1] for b in blocks), default=1)}
    stop_reason = record.get("stop_reason")
    if stop_reason is None:
        stop_reason = "length" if record.get("finish_reason", "length") == "length" else "stop"
    trace = Trace(
        prompt=record.get("prompt", record.get("question", "")),
        prompt_ids=tuple(prompt_ids),
        config=config,
        model_id=record.get("model_id", "imported"),
        steps=tuple(steps),
        output_ids=tuple(output_ids),
        output_texts=tuple(output_texts),
        text=text if isinstance(text, str) else "".join(output_texts),
        stop_reason=stop_reason,
        meta={"imported_from": fmt, "unmeasured": unmeasured},
    )
    return trace_from_json(trace.to_json())  # a trace file's checks: what every view may assume


def _need_texts(text_of, name: str):
    if text_of is None:
        raise ValueError(
            f"tokenizer: the {name} record has no token_texts, so a tokenizer (or an sbd_viz model) must "
            "give each token's text"
        )
    return text_of


def from_step_map(record: dict, tokenizer=None, block_size: int | None = None) -> Trace:
    """The ``Trace`` an lmdeploy-style step-map record describes (docs/trace.md): one call per step number, each
    committing the tokens of that step. ``tokenizer`` gives token texts when the record has none; ``block_size``
    cuts the blocks when the record has neither ``step_blocks`` nor ``block_size``."""
    if not isinstance(record, dict):
        raise ValueError(f"record: must be a dict (a step-map record), got {type(record).__name__}")
    token_ids = _ids(record.get("token_ids"), "token_ids")
    step_map = record.get("step_map")
    if (
        not isinstance(step_map, list)
        or len(step_map) != len(token_ids)
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 1 for s in step_map)
    ):
        raise ValueError("step_map: must be one step number (an int >= 1) per token of token_ids")
    prompt_ids = _ids(record.get("prompt_ids", []), "prompt_ids")
    n0 = len(prompt_ids)
    texts = record.get("token_texts")
    if isinstance(texts, list) and len(texts) == len(token_ids):
        by_id = dict(zip(token_ids, texts))  # a token's text alone depends on its id only
        text_of = by_id.__getitem__
    else:
        text_of = _need_texts(_text_of(record, tokenizer), "step-map")
    numbers = sorted(set(step_map))
    position_of = {s: [n0 + i for i, t in enumerate(step_map) if t == s] for s in numbers}
    step_commits = [[(p, token_ids[p - n0]) for p in position_of[s]] for s in numbers]
    probs, entropies = record.get("probs"), record.get("entropies")
    scores = None
    if isinstance(probs, list) and isinstance(entropies, list) and len(probs) == len(entropies) == len(token_ids):
        scores = [{p: (probs[p - n0], entropies[p - n0]) for p in position_of[s]} for s in numbers]
    return _build(record, STEP_MAP_FORMAT, block_size, prompt_ids, step_commits, text_of, scores, token_ids)


def from_trajectory(
    record: dict, tokenizer=None, mask_token_id: int | None = None, block_size: int | None = None
) -> Trace:
    """The ``Trace`` a d3LLM-style trajectory record describes (docs/trace.md): one call per trajectory entry,
    committing every position whose mask became a token. ``mask_token_id`` defaults to the record's; ``tokenizer``
    gives token texts when the record has none; ``block_size`` cuts the blocks when the record has neither
    ``step_blocks`` nor ``block_length``."""
    if not isinstance(record, dict):
        raise ValueError(f"record: must be a dict (a trajectory record), got {type(record).__name__}")
    prompt_ids = _ids(record.get("prompt_ids"), "prompt_ids")
    n0 = len(prompt_ids)
    mask = record.get("mask_token_id") if mask_token_id is None else mask_token_id
    if not isinstance(mask, int) or isinstance(mask, bool):
        raise ValueError(f"mask_token_id: the record has none and none was given, got {mask!r}")
    states = record.get("trajectory")
    if not isinstance(states, list) or not states:
        raise ValueError("trajectory: must be a non-empty list of token-id sequences, one per call")
    length = len(states[0]) if isinstance(states[0], list) else -1
    before = prompt_ids + [mask] * (length - n0)
    step_commits = []
    for i, state in enumerate(states):
        state = _ids(state, f"trajectory[{i}]")
        if len(state) != length or state[:n0] != prompt_ids:
            raise ValueError(
                f"trajectory[{i}]: must be the prompt's ids then the generated positions, as long as every other entry"
            )
        commits = []
        for p in range(n0, length):
            if state[p] == before[p]:
                continue
            if before[p] != mask or state[p] == mask:
                raise ValueError(
                    f"trajectory[{i}]: position {p - n0} changes after it was written (a correction, a "
                    "rollback or a slot masked again), which this import does not read"
                )
            commits.append((p, state[p]))
        if not commits:
            raise ValueError(f"trajectory[{i}]: commits nothing (every call of a trace commits a token)")
        step_commits.append(commits)
        before = state
    text_of = _need_texts(_text_of(record, tokenizer), "trajectory")
    final = _ids(record.get("final_output", before), "final_output")
    output_ids = final[n0:]
    while output_ids and output_ids[-1] == mask:
        output_ids.pop()
    raw = record.get("commit_scores")
    scores = None
    if isinstance(raw, list) and len(raw) == len(states):
        scores = [{n0 + p: (prob, entropy) for p, prob, entropy in step} for step in raw]
    return _build(record, TRAJECTORY_FORMAT, block_size, prompt_ids, step_commits, text_of, scores, output_ids)


def same_commits(a: Trace, b: Trace, kept_only: bool = False) -> bool:
    """Whether two traces commit the same tokens at the same output positions (counted from the first generated
    one, so a record without the prompt's ids compares too) in the same order of calls, with the same gaps;
    ``kept_only`` compares only the commits the outputs hold (what a step map carries), their calls numbered as a
    step map numbers them."""

    def commits(trace: Trace) -> list[Any]:
        n0 = len(trace.prompt_ids)
        if kept_only:
            kept = kept_commits(trace)
            rank = {c: i for i, c in enumerate(sorted({k.step.call for k in kept}))}
            return [
                (rank[k.step.call], k.step.block_start + k.commit.slot - n0, k.commit.token_id, k.commit.gap)
                for k in kept
            ]
        return [(s.call, s.block_start + c.slot - n0, c.token_id, c.gap) for s in trace.steps for c in s.commits]

    return commits(check_trace(a, "a")) == commits(check_trace(b, "b"))
