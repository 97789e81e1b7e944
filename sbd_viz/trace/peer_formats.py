"""Traces in the formats peers' tools write, and back: lmdeploy's ``step_map`` and d3LLM's per-step trajectories.

``to_step_map`` / ``from_step_map`` and ``to_trajectory`` / ``from_trajectory`` (one record each), ``save_step_maps``,
``save_trajectories``, ``load_step_maps`` and ``load_trajectories`` (files of them). Both formats as the peers' own
code writes them (the lmdeploy and d3LLM commits read), the fields of sbd_viz's own the records carry, and what an
import does not invent: docs/trace.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeGuard

from .checks import check_trace
from .commits import kept_commits
from .data import Commit, Step, Trace
from .file import STOP_REASONS
from .file import from_json as trace_from_json

STEP_MAP_FORMAT = "lmdeploy step_map"
TRAJECTORY_FORMAT = "d3LLM trajectory"


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
    return {
        "prompt": trace.prompt,
        "prompt_ids": list(trace.prompt_ids),
        "output_texts": list(trace.output_texts),
        "output_text": trace.text,
        "block_size": trace.config.get("block_size", max((s.block_size for s in trace.steps), default=1)),
        "stop_reason": trace.stop_reason,
        "model_id": trace.model_id,
        "config": trace.config,
        "nfe": trace.nfe,
    }


def to_step_map(trace: Trace) -> dict:
    """lmdeploy's dLLM response fields of ``trace`` (``token_ids``, ``step_map``, ``text``, ``finish_reason``,
    ``input_token_len``, ``generate_token_len``) as lmdeploy's code fills them, with sbd_viz's own fields
    (docs/trace.md): steps numbered from 1 over the calls that commit any token (one that commits only past the
    stop counts too), and the token that ended the output left out of the response (kept in ``end_token``)."""
    trace = _exportable(trace)
    kept = kept_commits(trace)
    if len(kept) != trace.n_tokens:
        raise ValueError("trace: some output token has no commit, so it has no step")
    n0 = len(trace.prompt_ids)
    counted = [s for s in trace.steps if s.commits]  # lmdeploy's counter moves on a forward that unmasks a token
    number = {s.call: i + 1 for i, s in enumerate(counted)}
    ended = trace.stop_reason != "length" and bool(kept)  # the stop token: lmdeploy's response leaves it out
    shown = kept[:-1] if ended else kept
    text = trace.text
    if ended and trace.output_texts[-1] and text.endswith(trace.output_texts[-1]):
        text = text[: -len(trace.output_texts[-1])]
    end = kept[-1] if ended else None
    return {
        "token_ids": list(trace.output_ids[: len(shown)]),
        "step_map": [number[k.step.call] for k in shown],
        "text": text,
        "finish_reason": "stop" if ended else "length",
        "input_token_len": n0,
        "generate_token_len": len(shown),
        **_common(trace),
        "token_texts": [k.commit.text for k in shown],
        "probs": [k.commit.prob for k in shown],
        "entropies": [k.commit.entropy for k in shown],
        "end_token": None
        if end is None
        else {
            "token_id": end.commit.token_id,
            "step": number[end.step.call],
            "text": end.commit.text,
            "prob": end.commit.prob,
            "entropy": end.commit.entropy,
        },
        "step_blocks": [[s.block_start - n0, s.block_size] for s in counted],
    }


def to_trajectory(trace: Trace, mask_token_id: int, idx: int = 0, is_correct: bool | None = None) -> dict:
    """d3LLM's trajectory record of ``trace`` (the sequence after every call), with sbd_viz's own fields
    (docs/trace.md). ``mask_token_id``: the id written where a position is still masked (the model's ``mask_id``);
    ``is_correct``: d3LLM's verdict on the answer, which its trainer keeps records by (written only when given)."""
    trace = _exportable(trace)
    if not isinstance(mask_token_id, int) or isinstance(mask_token_id, bool):
        raise ValueError(f"mask_token_id: must be a token id (an int), got {mask_token_id!r}")
    if is_correct is not None and not isinstance(is_correct, bool):
        raise ValueError(f"is_correct: must be True, False or None, got {is_correct!r}")
    common = _common(trace)
    n0 = len(trace.prompt_ids)
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
    verdict = {} if is_correct is None else {"is_correct": is_correct}
    return {
        "idx": idx,
        "question": trace.prompt,
        "prompt_ids": list(trace.prompt_ids),
        "trajectory": trajectory,
        "final_output": list(trace.prompt_ids) + list(trace.output_ids),
        "generated_text": trace.prompt + trace.text,  # d3LLM decodes the whole sequence, the prompt with it
        **verdict,
        **common,
        "mask_token_id": mask_token_id,
        "block_length": common["block_size"],
        "end_token_id": trace.output_ids[-1] if trace.stop_reason == "eos" and trace.n_tokens else None,
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


def save_trajectories(traces, path: str | Path, mask_token_id: int, is_correct=None) -> Path:
    """Each trace's ``to_trajectory`` record (``idx`` its index), one per line (JSON lines). ``is_correct``: one
    verdict per trace (d3LLM's ``is_correct``), or None to write none."""
    traces = [traces] if isinstance(traces, Trace) else list(traces)
    verdicts = [None] * len(traces) if is_correct is None else list(is_correct)
    if len(verdicts) != len(traces):
        raise ValueError(f"is_correct: got {len(verdicts)} verdicts for {len(traces)} traces; pass one per trace")
    return _write_lines(
        [to_trajectory(t, mask_token_id, idx=i, is_correct=v) for i, (t, v) in enumerate(zip(traces, verdicts))],
        path,
    )


def load_step_maps(
    path: str | Path, tokenizer=None, block_size: int | None = None, prompt_length: int | None = None
) -> list[Trace]:
    """The traces of a step-map file (JSON lines, or a JSON list), each read by ``from_step_map``."""
    return [from_step_map(r, tokenizer, block_size, prompt_length) for r in _read_records(path)]


def load_trajectories(
    path: str | Path,
    tokenizer=None,
    mask_token_id: int | None = None,
    block_size: int | None = None,
    end_token_id=None,
) -> list[Trace]:
    """The traces of a trajectory file (JSON lines, or d3LLM's JSON list), each read by ``from_trajectory``."""
    return [from_trajectory(r, tokenizer, mask_token_id, block_size, end_token_id) for r in _read_records(path)]


# -- import ------------------------------------------------------------------------------------------------------
def _is_int(value) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def _ids(value, name: str) -> list[int]:
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        raise ValueError(f"{name}: must be a list of token ids (ints)")
    return value


def _block_size(record: dict, block_size, key: str) -> int:
    k = block_size if block_size is not None else record.get(key, record.get("block_size"))
    if not _is_int(k) or k < 1:
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


def _need_texts(text_of, name: str):
    if text_of is None:
        raise ValueError(
            f"tokenizer: the {name} record has no token_texts, so a tokenizer (or an sbd_viz model) must "
            "give each token's text"
        )
    return text_of


def _cut_blocks(
    step_positions: list[list[int]], n0: int, k: int, lead: int, labels: list[str]
) -> list[tuple[int, int]]:
    """Each step's block ``(absolute start, size)``, blocks of ``k`` over a sequence whose first generated position
    (``n0`` here) has ``lead`` positions before it: lmdeploy's, aligned to the whole sequence (``lead`` the prompt's
    length), the first one short where the prompt ends inside it; d3LLM's from the first generated position
    (``lead`` 0). A step whose tokens lie in two blocks, or in a block before the previous step's, is refused, named
    by its ``labels`` entry."""
    blocks = []
    for i, positions in enumerate(step_positions):
        starts = {(lead + p - n0) // k * k - lead for p in positions}  # relative to the first generated position
        if len(starts) != 1:
            where = f" after a prompt of {lead} tokens" if lead else ""
            raise ValueError(f"{labels[i]} commits tokens in more than one block of {k}{where}")
        start = starts.pop()
        blocks.append((n0 + max(start, 0), start + k - max(start, 0)))
    for i in range(1, len(blocks)):  # both peers decode a block to its end before the next
        (a, m), (b, n) = blocks[i - 1], blocks[i]
        if b != a and b < a + m:
            raise ValueError(
                f"{labels[i]}: its block [{b - n0}, {b - n0 + n}) is not after the previous step's "
                f"[{a - n0}, {a - n0 + m}): the blocks do not line up with the decode (a block visited twice, or the "
                "wrong prompt length or block size)"
            )
    return blocks


def _given_blocks(given, n_steps: int, n0: int) -> list[tuple[int, int]]:
    if (
        not isinstance(given, list)
        or len(given) != n_steps
        or not all(isinstance(b, list) and len(b) == 2 and all(_is_int(v) for v in b) for b in given)
    ):
        raise ValueError(f"step_blocks: must be one [start, size] per step ({n_steps})")
    return [(n0 + b[0], b[1]) for b in given]


def _build(
    record: dict,
    fmt: str,
    prompt_ids: list[int],
    step_commits: list[list[tuple[int, int]]],
    blocks: list[tuple[int, int]],
    labels: list[str],
    text_of,
    scores,
    output_ids: list[int],
    text: str,
    stop_reason: str,
    meta: dict,
) -> Trace:
    """A trace from a record of the format ``fmt``: each step's commits ``(absolute position, token id)`` in its
    block ``(absolute start, size)``, checked by ``sv.trace_from_json``; ``labels`` name the steps in errors."""
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
                    f"{labels[call]}: position {position - n0} lies outside its block "
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
    config = record.get("config")
    if not isinstance(config, dict):
        config = {"decoder": "imported", "block_size": max((b[1] for b in blocks), default=1)}
    trace = Trace(
        prompt=record.get("prompt", record.get("question", "")),
        prompt_ids=tuple(prompt_ids),
        config=config,
        model_id=record.get("model_id", "imported"),
        steps=tuple(steps),
        output_ids=tuple(output_ids),
        output_texts=tuple(output_texts),
        text=text,
        stop_reason=stop_reason,
        meta={"imported_from": fmt, "unmeasured": unmeasured, **meta},
    )
    return trace_from_json(trace.to_json())  # a trace file's checks: what every view may assume


def _prompt_length(record: dict, prompt_length, prompt_ids: list[int]) -> int | None:
    """The prompt's length lmdeploy aligned its blocks to: ``prompt_length``, else the record's ``input_token_len``
    (lmdeploy's), else its ``prompt_ids``' length; None if none is known. Two that disagree are refused."""
    given = record.get("input_token_len")
    if given is not None and (not _is_int(given) or given < 0):
        raise ValueError(f"input_token_len: must be a whole number >= 0, got {given!r}")
    if prompt_length is not None:
        if not _is_int(prompt_length) or prompt_length < 0:
            raise ValueError(f"prompt_length: must be a whole number >= 0, got {prompt_length!r}")
        if given is not None and given != prompt_length:
            raise ValueError(f"prompt_length: {prompt_length}, but the record's input_token_len is {given}")
        given = prompt_length
    if prompt_ids and given is not None and given != len(prompt_ids):
        raise ValueError(f"prompt_length: {given}, but the record's prompt_ids hold {len(prompt_ids)} tokens")
    return given if given is not None else (len(prompt_ids) if "prompt_ids" in record else None)


def _end_token(record: dict) -> dict | None:
    """sbd_viz's own ``end_token`` of a step map (the token that ended the output, which lmdeploy's response leaves
    out), checked; None if the record has none."""
    end = record.get("end_token")
    if end is None:
        return None
    if not (
        isinstance(end, dict)
        and _is_int(end.get("token_id"))
        and _is_int(end.get("step"))
        and end["step"] >= 1
        and isinstance(end.get("text"), str)
        and all(isinstance(end.get(k), (int, float)) and not isinstance(end.get(k), bool) for k in ("prob", "entropy"))
    ):
        raise ValueError("end_token: must be {token_id, step (>= 1), text, prob, entropy} or null")
    return end


def from_step_map(
    record: dict, tokenizer=None, block_size: int | None = None, prompt_length: int | None = None
) -> Trace:
    """The ``Trace`` an lmdeploy step-map record describes (docs/trace.md): one call per step number the output
    holds, committing the tokens of that step. ``tokenizer`` gives token texts when the record has none. Without the
    record's ``step_blocks``, blocks of ``block_size`` (else the record's) are aligned as lmdeploy aligns them, to
    the whole sequence: ``prompt_length`` (else lmdeploy's ``input_token_len``, else the ``prompt_ids``) tokens of
    prompt padded to a block boundary, so the first generated block is short when the prompt ends inside one; a
    record no such blocks fit is refused, naming the step."""
    if not isinstance(record, dict):
        raise ValueError(f"record: must be a dict (a step-map record), got {type(record).__name__}")
    token_ids = list(_ids(record.get("token_ids"), "token_ids"))
    step_map = record.get("step_map")
    if not isinstance(step_map, list) or not all(_is_int(s) and s >= 1 for s in step_map):
        raise ValueError("step_map: must be one step number (an int >= 1) per token of token_ids")
    step_map = list(step_map)
    stop_id = None
    if record.get("finish_reason") == "stop" and len(token_ids) == len(step_map) + 1:
        stop_id = token_ids.pop()  # include_stop_str_in_output: lmdeploy appends the stop token, with no step
    if len(step_map) != len(token_ids):
        raise ValueError("step_map: must be one step number (an int >= 1) per token of token_ids")
    prompt_ids = _ids(record.get("prompt_ids", []), "prompt_ids")
    lead = _prompt_length(record, prompt_length, prompt_ids)
    n0 = len(prompt_ids)
    texts, probs, entropies = record.get("token_texts"), record.get("probs"), record.get("entropies")
    lists = [v if isinstance(v, list) and len(v) == len(token_ids) else None for v in (texts, probs, entropies)]
    end = _end_token(record)
    if end is not None:  # ours: the token that ended the output, back at its step
        token_ids.append(end["token_id"])
        step_map.append(end["step"])
        lists = [None if v is None else [*v, end[k]] for v, k in zip(lists, ("text", "prob", "entropy"))]
    if lists[0] is not None:
        by_id = dict(zip(token_ids, lists[0]))  # a token's text alone depends on its id only
        text_of = by_id.__getitem__
    else:
        text_of = _need_texts(_text_of(record, tokenizer), "step-map")
    numbers = sorted(set(step_map))
    position_of = {s: [n0 + i for i, t in enumerate(step_map) if t == s] for s in numbers}
    step_commits = [[(p, token_ids[p - n0]) for p in position_of[s]] for s in numbers]
    scores = None
    if lists[1] is not None and lists[2] is not None:
        scores = [{p: (lists[1][p - n0], lists[2][p - n0]) for p in position_of[s]} for s in numbers]
    labels = [f"step_map: step {s}" for s in numbers]
    given = record.get("step_blocks")
    if given is not None:  # ours: one [start, size] per step number
        last = max(numbers, default=0)
        if not isinstance(given, list) or len(given) < last:
            raise ValueError(f"step_blocks: must be one [start, size] per step number (up to {last})")
        blocks = _given_blocks([given[s - 1] for s in numbers], len(numbers), n0)
    else:
        k = _block_size(record, block_size, "block_size")
        if lead is None:
            raise ValueError(
                "prompt_length: lmdeploy pads the prompt to a block boundary and aligns every block to the whole "
                "sequence, so its blocks need the prompt's length; the record has no input_token_len (nor "
                "prompt_ids) and none was given"
            )
        blocks = _cut_blocks([position_of[s] for s in numbers], n0, k, lead, labels)
    text = record.get("output_text")
    if not isinstance(text, str):
        text = record.get("text")
        text = text if isinstance(text, str) else "".join(text_of(t) for t in token_ids)
        if stop_id is not None:  # lmdeploy's text then ends with the stop token's, special tokens kept
            try:
                stop_text = text_of(stop_id)
            except (KeyError, IndexError):
                stop_text = ""
            if stop_text and text.endswith(stop_text):
                text = text[: -len(stop_text)]
    stop_reason = record.get("stop_reason")
    if stop_reason not in STOP_REASONS:
        stop_reason = "length" if record.get("finish_reason", "length") == "length" else "stop"
    missing = sorted(set(range(1, max(numbers, default=0) + 1)) - set(numbers))
    meta = {"steps_without_output": missing} if missing else {}
    return _build(
        record,
        STEP_MAP_FORMAT,
        prompt_ids,
        step_commits,
        blocks,
        labels,
        text_of,
        scores,
        token_ids,
        text,
        stop_reason,
        meta,
    )


def _end_ids(end_token_id, record: dict, tokenizer) -> tuple[int, ...]:
    """The ids that end a d3LLM output: ``end_token_id`` (an id, or a list of them; an empty list for none), else
    the record's own ``end_token_id`` (null: none), else the tokenizer's end of sequence (a model's ``eos_ids``, a
    tokenizer's ``eos_token_id``)."""
    if end_token_id is None and "end_token_id" in record:
        end_token_id = [] if record["end_token_id"] is None else record["end_token_id"]
    if end_token_id is None and tokenizer is not None:
        if hasattr(tokenizer, "eos_ids"):
            end_token_id = list(tokenizer.eos_ids)
        elif getattr(tokenizer, "eos_token_id", None) is not None:
            end_token_id = tokenizer.eos_token_id
    if end_token_id is None:
        raise ValueError(
            "end_token_id: d3LLM decodes every block to the end, so its final_output runs past the end token with "
            "filler; the record has no end_token_id and none was given (an id, a list of ids, or [] if the output "
            "has no end token; or a tokenizer with eos_token_id)"
        )
    ids = [end_token_id] if _is_int(end_token_id) else end_token_id
    if not isinstance(ids, (list, tuple)) or not all(_is_int(i) for i in ids):
        raise ValueError(f"end_token_id: must be a token id, a list of them or [], got {end_token_id!r}")
    return tuple(ids)


def _output_text(record: dict, tokenizer, text_of, output_ids: list[int], ended: bool) -> str:
    """The output's text: the record's own ``output_text``, else the tokenizer's decode of the output (special tokens
    skipped), else its tokens' texts without the end token. Never d3LLM's ``generated_text``, which decodes the
    prompt with the output."""
    text = record.get("output_text")
    if isinstance(text, str):
        return text
    if tokenizer is not None and hasattr(tokenizer, "token_text") and hasattr(tokenizer, "text"):
        return tokenizer.text(output_ids)  # an sbd_viz model
    if tokenizer is not None and hasattr(tokenizer, "decode"):
        return tokenizer.decode(list(output_ids), skip_special_tokens=True)
    return "".join(text_of(t) for t in (output_ids[:-1] if ended else output_ids))


def from_trajectory(
    record: dict,
    tokenizer=None,
    mask_token_id: int | None = None,
    block_size: int | None = None,
    end_token_id=None,
) -> Trace:
    """The ``Trace`` a d3LLM trajectory record describes (docs/trace.md): one call per trajectory entry,
    committing every position whose mask became a token; the output is ``final_output`` without the prompt, cut
    after its first end token (d3LLM's runs on with filler, which stays in the trajectory as commits past the
    stop). ``mask_token_id`` and ``end_token_id`` default to the record's (``end_token_id`` else the tokenizer's end
    of sequence); ``tokenizer`` gives token texts when the record has none; ``block_size`` cuts the blocks, from
    the first generated position, when the record has neither ``step_blocks`` nor ``block_length``."""
    if not isinstance(record, dict):
        raise ValueError(f"record: must be a dict (a trajectory record), got {type(record).__name__}")
    prompt_ids = _ids(record.get("prompt_ids"), "prompt_ids")
    n0 = len(prompt_ids)
    mask = record.get("mask_token_id") if mask_token_id is None else mask_token_id
    if not _is_int(mask):
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
    if final[:n0] != prompt_ids:
        raise ValueError("final_output: must start with the prompt's ids (d3LLM's holds the whole sequence)")
    ends = _end_ids(end_token_id, record, tokenizer)
    output_ids = final[n0:]
    hit = next((i for i, t in enumerate(output_ids) if t in ends), None)
    if hit is not None:
        output_ids = output_ids[: hit + 1]
    while output_ids and output_ids[-1] == mask:
        output_ids.pop()
    raw = record.get("commit_scores")
    scores = None
    if isinstance(raw, list) and len(raw) == len(states):
        scores = [{n0 + p: (prob, entropy) for p, prob, entropy in step} for step in raw]
    labels = [f"trajectory[{i}]" for i in range(len(step_commits))]
    given = record.get("step_blocks")
    if given is not None:
        blocks = _given_blocks(given, len(step_commits), n0)
    else:
        k = _block_size(record, block_size, "block_length")
        blocks = _cut_blocks([[p for p, _ in c] for c in step_commits], n0, k, 0, labels)
    stop_reason = record.get("stop_reason")
    if hit is not None:
        stop_reason = "eos"
    elif stop_reason not in STOP_REASONS:
        stop_reason = "length"
    text = _output_text(record, tokenizer, text_of, output_ids, hit is not None)
    return _build(
        record,
        TRAJECTORY_FORMAT,
        prompt_ids,
        step_commits,
        blocks,
        labels,
        text_of,
        scores,
        output_ids,
        text,
        stop_reason,
        {},
    )


def same_commits(a: Trace, b: Trace, kept_only: bool = False) -> bool:
    """Whether two traces commit the same tokens at the same output positions (counted from the first generated
    one, so a record without the prompt's ids compares too) in the same order of calls, with the same gaps;
    ``kept_only`` compares only the commits the outputs hold (what a step map carries), each call ranked among the
    calls that hold an output token (a step map's numbers, less those of calls whose tokens all fell past the
    stop)."""

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
