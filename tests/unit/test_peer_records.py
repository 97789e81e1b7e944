"""Peer records built the way the peers' own code builds them, read back as the peers decoded them.

``lmdeploy_response`` follows lmdeploy's dLLM step map as its pull request 4057 writes it (InternLM/lmdeploy,
``lmdeploy/pytorch/strategies/dllm/sequence.py``, ``unmasking.py`` and ``model_agent.py`` at the PR's head
976486553b3445dc612a496441a1e94bf27e7afb; the response's fields in ``lmdeploy/serve/async_engine.py`` at
a15e396fce2c9cb160abe99eb44fae3c00521231, the PR's last commit before its merge of main): the prompt padded with
masks to a block boundary, so the first generated block is short when the prompt ends inside one; a step counter
that moves on every forward that unmasks a token (a forward that only caches a finished block has no number, one that
unmasks only tokens past the stop has one); the stop looked for once a block is fully unmasked, and the stop token
left out of ``token_ids`` and ``step_map`` (``include_stop_str_in_output`` appends it to ``token_ids`` alone).

``d3llm_record`` follows d3LLM's ``distill_1_data_prepare`` (hao-ai-lab/d3LLM at
e5bfcaccb775ee75759c24ccc9a28218b8372b34, ``d3llm_llada_generate_partly.py`` and ``d3llm_dream_generate_partly.py``):
the prompt's ids then ``gen_length`` masks, blocks from the prompt's end decoded one after another to their last
position (so the answer's end token is followed by filler), the whole sequence appended after every step, and
``generated_text`` the tokenizer's decode of the whole final sequence, the prompt with it.

The expected traces come from these builders' own bookkeeping, not from the exporters."""

import random

import pytest

import sbd_viz as sv
from sbd_viz.analysis.counts import tokens_per_call
from sbd_viz.trace.peer_formats import same_commits

from conftest import hand_trace

K = 4


@pytest.fixture(scope="module")
def tok():
    from sbd_viz.training.data import build_char_tokenizer

    return build_char_tokenizer()


def ids_of(tok, text):
    return [tok.convert_tokens_to_ids(c) for c in text]


# -- lmdeploy -------------------------------------------------------------------------------------------------------
def lmdeploy_response(tok, prompt_len, k, blocks, stop_ids=(), max_new_tokens=None, include_stop=False):
    """lmdeploy's ``Response`` of a dLLM decode, and what really happened. ``blocks``: the generated blocks as
    lmdeploy lays them out (the first ``k - prompt_len % k`` long when the prompt ends inside a block, the others
    ``k``), each ``(token ids, forwards)`` with ``forwards`` the slot sets each forward of that block unmasks.

    Returns ``(response, truth)``: ``truth`` is every unmasked token as ``(step number, position counted from the
    first generated one, token id, gap)``, and ``blocks`` each block's ``(start, size)`` counted the same way."""
    first = k - prompt_len % k if prompt_len % k else k  # the prompt's last block, padded with masks
    step, truth, layout, generated, start, cut = 0, [], [], [], 0, None
    for b, (token_ids, forwards) in enumerate(blocks):
        size = first if b == 0 else k
        assert len(token_ids) == size, "the blocks must be laid out as lmdeploy lays them out"
        masked = set(range(size))
        for slots in forwards:
            newly = set(slots) & masked
            if newly:  # the counter moves only on a forward that turns a masked token into an unmasked one
                step += 1
            masked -= newly
            truth += [(step, start + s, token_ids[s], sum(1 for m in masked if m < s)) for s in sorted(newly)]
        assert not masked, "a block is decoded to its end before the next"
        layout.append((start, size))
        generated += token_ids
        # the block is fully unmasked: the stop criteria look at it. lmdeploy's output_start_pos counts the prompt's
        # padding, so the prompt's own (short) block is never searched for stop words
        searched = [s for s in range(size) if token_ids[s] in stop_ids] if (b or not prompt_len % k) else []
        if max_new_tokens is not None and len(generated) >= max_new_tokens:
            cut = max_new_tokens
        elif searched:
            cut = start + searched[0] + 1  # set_stop_pos keeps the stop token in the sequence
        if cut is not None:
            break
        start += size  # (the next forward caches this block and unmasks nothing: no step number)
    out = generated if cut is None else generated[:cut]
    numbers = {pos: n for n, pos, _, _ in truth}
    steps = [numbers[i] for i in range(len(out))]
    finish = "stop" if out and out[-1] in stop_ids else "length"
    shown = len(out) - (finish == "stop")  # the async engine drops the stop token (hit_stop_token)
    token_ids, text = out[:shown], tok.decode(out[:shown], skip_special_tokens=True)
    if include_stop and finish == "stop":  # the last response: the stop token, its text with special tokens kept
        token_ids, text = token_ids + out[-1:], text + tok.decode(out[-1:], skip_special_tokens=False)
    response = dict(text=text, generate_token_len=shown, input_token_len=prompt_len, finish_reason=finish,
                    token_ids=token_ids, logprobs=None, logits=None, last_hidden_state=None,
                    step_map=steps[:shown], index=0)
    return response, dict(truth=truth, blocks=layout, n_output=shown)


def expected_commits(truth, n_output):
    """``same_commits(kept_only=True)``'s rows of what lmdeploy decoded: the output's tokens, each step ranked among
    the steps that hold one."""
    kept = [t for t in truth if t[1] < n_output]
    rank = {n: i for i, n in enumerate(sorted({t[0] for t in kept}))}
    return sorted((rank[n], pos, token, gap) for n, pos, token, gap in kept)


def imported_rows(trace):
    n0 = len(trace.prompt_ids)
    return sorted((s.call, s.block_start + c.slot - n0, c.token_id, c.gap) for s in trace.steps for c in s.commits)


def random_blocks(rng, tok, prompt_len, k, n_blocks, stop_block, stop_slot, stop_id):
    """Random tokens and forwards for lmdeploy's layout, the stop token at ``stop_slot`` of block ``stop_block``."""
    first = k - prompt_len % k if prompt_len % k else k
    letters = ids_of(tok, "abcdefghijklmnopqrstuvwxyz")
    blocks = []
    for b in range(n_blocks):
        size = first if b == 0 else k
        token_ids = [rng.choice(letters) for _ in range(size)]
        if b == stop_block:
            token_ids[stop_slot] = stop_id
        order = list(range(size))
        rng.shuffle(order)
        forwards, i = [], 0
        while i < size:
            n = rng.randint(1, size - i)
            forwards.append(set(order[i:i + n]))
            i += n
        if rng.random() < 0.3:
            forwards.insert(rng.randrange(len(forwards) + 1), set())  # a forward that unmasks nothing has no number
        blocks.append((token_ids, forwards))
    return blocks


@pytest.mark.parametrize("prompt_len", range(1, 10))
def test_lmdeploy_step_maps_of_any_prompt_length_read_as_lmdeploy_decoded(tok, prompt_len):
    eos = tok.eos_token_id
    rng = random.Random(prompt_len)
    for trial in range(20):
        blocks = random_blocks(rng, tok, prompt_len, K, 4, stop_block=rng.choice([1, 2, 3]),
                               stop_slot=rng.randrange(K), stop_id=eos)
        response, seen = lmdeploy_response(tok, prompt_len, K, blocks, stop_ids=(eos,))
        back = sv.from_step_map(response, tok, block_size=K)
        label = f"prompt {prompt_len}, trial {trial}"
        assert imported_rows(back) == expected_commits(seen["truth"], seen["n_output"]), label
        for s in back.steps:  # each step in lmdeploy's block: the first short when the prompt ends inside one
            for c in s.commits:
                pos = s.block_start + c.slot
                assert (s.block_start, s.block_size) == next(b for b in seen["blocks"] if b[0] <= pos < sum(b))
        held = {n for n, pos, _, _ in seen["truth"] if pos < seen["n_output"]}
        missing = sorted(set(range(1, max(held) + 1)) - held)
        assert back.meta.get("steps_without_output", []) == missing, label
        assert back.output_ids == tuple(response["token_ids"]) and back.text == response["text"], label
        assert back.stop_reason == "stop" and eos not in back.output_ids  # the response left the end token out
    # the first generated block is short exactly when the prompt ends inside a block
    first = next(s for s in back.steps if s.block == 0)
    assert first.block_size == (K - prompt_len % K if prompt_len % K else K)


def test_a_step_map_that_no_lmdeploy_blocks_fit_is_refused_by_name(tok):
    # prompt of 5, blocks of 4: the first generated block is positions 0..2 (absolute 5..7), then 3..6
    blocks = [(ids_of(tok, "abc"), [{2}, {0, 1}]), (ids_of(tok, "defg"), [{3}, {0, 1, 2}])]
    response, seen = lmdeploy_response(tok, 5, K, blocks)
    assert response["step_map"] == [2, 2, 1, 4, 4, 4, 3]
    back = sv.from_step_map(response, tok, block_size=K)
    assert [(s.block_start, s.block_size, s.step) for s in back.steps] == [(0, 3, 0), (0, 3, 1), (3, 4, 0), (3, 4, 1)]
    assert [c.gap for c in back.steps[0].commits] == [2]  # slot 2 first, slots 0 and 1 still masked: a gap fill
    bare = {k: v for k, v in response.items() if k != "input_token_len"}
    with pytest.raises(ValueError, match="prompt_length: lmdeploy pads the prompt to a block boundary"):
        sv.from_step_map(bare, tok, block_size=K)
    assert imported_rows(sv.from_step_map(bare, tok, block_size=K, prompt_length=5)) == imported_rows(back)
    # blocks cut from the first generated token instead (a prompt of 4, no padding): step 4 spans two blocks
    with pytest.raises(ValueError, match=r"step_map: step 4 commits tokens in more than one block of 4 after a "
                                         r"prompt of 4 tokens"):
        sv.from_step_map(bare, tok, block_size=K, prompt_length=4)
    with pytest.raises(ValueError, match="prompt_length: 4, but the record's input_token_len is 5"):
        sv.from_step_map(response, tok, block_size=K, prompt_length=4)
    # a step that goes back to a block already left: no lmdeploy decode does that
    with pytest.raises(ValueError, match=r"step_map: step 3: its block \[0, 3\) is not after the previous step's "
                                         r"\[3, 7\)"):
        sv.from_step_map({**response, "step_map": [1, 1, 3, 2, 2, 2, 2]}, tok, block_size=K)


def test_to_step_map_writes_what_lmdeploy_writes_for_the_same_decode(tok):
    """A decode whose blocks are lmdeploy's (a prompt of 5, blocks of 4: 3 then 4), one call committing only tokens
    past the stop: our export is lmdeploy's response, field for field, and each imports as the other."""
    schedule = [("abc", [{1}, {0, 2}]), ("d\nfg", [{0}, {2, 3}, {1}])]  # call 3 writes f, g, past the stop
    trace = hand_trace(schedule, stop_at=5)
    assert len(trace.prompt_ids) == 5 and trace.output_ids == tuple(ids_of(tok, "abcd\n"))
    response, seen = lmdeploy_response(tok, 5, K, [(ids_of(tok, t), f) for t, f in schedule],
                                       stop_ids=tuple(ids_of(tok, "\n")))
    assert response["step_map"] == [2, 1, 2, 3]  # 4 is the call past the stop, 5 the stop token's: neither shown
    ours = sv.to_step_map(trace)
    for key in ("token_ids", "step_map", "text", "finish_reason", "input_token_len", "generate_token_len"):
        assert ours[key] == response[key], key
    assert ours["end_token"]["token_id"] == tok.convert_tokens_to_ids("\n") and ours["end_token"]["step"] == 5
    back = sv.from_step_map(ours)  # our own fields give the end token back
    assert same_commits(trace, back, kept_only=True) and back.text == trace.text and back.stop_reason == "stop"
    peer = sv.from_step_map(response, tok, block_size=K)  # lmdeploy's: the output it returned, without the stop
    assert imported_rows(peer) == expected_commits(seen["truth"], seen["n_output"])
    assert "steps_without_output" not in peer.meta  # 4 and 5 come after the last step it shows
    assert peer.output_ids == trace.output_ids[:-1] and peer.stop_reason == "stop"
    with_stop, _ = lmdeploy_response(tok, 5, K, [(ids_of(tok, t), f) for t, f in schedule],
                                     stop_ids=tuple(ids_of(tok, "\n")), include_stop=True)
    assert len(with_stop["token_ids"]) == len(with_stop["step_map"]) + 1  # include_stop_str_in_output
    again = sv.from_step_map(with_stop, tok, block_size=K)
    assert imported_rows(again) == imported_rows(peer) and again.text == "abcd"


def test_a_length_stop_cuts_inside_the_last_block_as_lmdeploy_does(tok):
    blocks = [(ids_of(tok, "abc"), [{0, 1, 2}]), (ids_of(tok, "defg"), [{3}, {0}, {1, 2}])]
    response, seen = lmdeploy_response(tok, 5, K, blocks, max_new_tokens=5)
    assert response["finish_reason"] == "length" and response["step_map"] == [1, 1, 1, 3, 4]
    back = sv.from_step_map(response, tok, block_size=K)
    assert imported_rows(back) == expected_commits(seen["truth"], seen["n_output"])
    assert back.meta["steps_without_output"] == [2] and back.stop_reason == "length"


# -- d3LLM ----------------------------------------------------------------------------------------------------------
def d3llm_record(tok, question, answer, gen_length, block_length, steps, dream=False, idx=0):
    """A record as d3LLM's trajectory generation writes it. ``steps(b)``: the slot sets block ``b``'s steps unmask
    (LLaDA's low-confidence order; several a step under Dream's threshold). The sequence after the answer holds its
    end token, then the end token again as filler to ``gen_length``. Returns ``(record, truth)``: every unmasked
    token as ``(step, position from the first generated one, token id, gap)``."""
    mask, eos = tok.mask_token_id, tok.eos_token_id
    prompt_ids = tok(question, add_special_tokens=False)["input_ids"]
    tokens = ids_of(tok, answer) + [eos] * (gen_length - len(answer))
    x = prompt_ids + [mask] * gen_length
    n0, trajectory, truth = len(prompt_ids), [], []
    for b in range(gen_length // block_length):
        masked = set(range(block_length))
        for slots in steps(b):
            masked -= set(slots)
            for s in sorted(slots):
                x[n0 + b * block_length + s] = tokens[b * block_length + s]
                truth.append((len(trajectory), b * block_length + s, tokens[b * block_length + s],
                              sum(1 for m in masked if m < s)))
            trajectory.append(list(x))
    record = {"idx": idx, "question": question, "prompt_ids": prompt_ids, "trajectory": trajectory,
              "final_output": list(x), "generated_text": tok.decode(x, skip_special_tokens=True),
              "llm_answer": None, "gt_answer": None, "is_correct": True}
    if dream:
        record["nfe"] = len(trajectory)
    return record, truth


def right_to_left(b):
    return [{3}, {2}, {1, 0}] if b % 2 else [{1}, {3}, {0}, {2}]


@pytest.mark.parametrize("dream", [False, True])
def test_a_d3llm_record_reads_without_its_prompt_and_its_filler(tok, dream):
    record, truth = d3llm_record(tok, "Q: 2+3?\nA: ", "5 ok", 16, 4, right_to_left, dream=dream)
    assert record["generated_text"].startswith("Q: 2+3?")  # d3LLM's text decodes the prompt with the output
    back = sv.from_trajectory(record, tok, mask_token_id=tok.mask_token_id, block_size=4)
    eos = tok.eos_token_id
    assert back.output_ids == tuple(ids_of(tok, "5 ok")) + (eos,) and back.stop_reason == "eos"
    assert back.text == "5 ok" and back.prompt == "Q: 2+3?\nA: "
    assert back.nfe == len(record["trajectory"]) == 14  # every forward d3LLM ran, the filler's too
    assert back.tokens_per_call == 5 / 14 and tokens_per_call(back, end_token=False) == 4 / 14
    assert imported_rows(back) == sorted(truth)  # every commit, the filler's past the stop too
    assert len(back.gap_fills()) == sum(1 for t in truth if t[3])


def test_the_end_token_is_named_when_nothing_gives_it(tok):
    record, _ = d3llm_record(tok, "say hi: ", "hi", 8, 4, lambda b: [{0, 1, 2, 3}])

    class DecodeOnly:  # a tokenizer that spells tokens and knows no end of sequence
        def decode(self, ids, skip_special_tokens=False):
            return tok.decode(ids, skip_special_tokens=skip_special_tokens)

    with pytest.raises(ValueError, match="end_token_id: d3LLM decodes every block to the end"):
        sv.from_trajectory(record, DecodeOnly(), mask_token_id=tok.mask_token_id, block_size=4)
    back = sv.from_trajectory(record, DecodeOnly(), mask_token_id=tok.mask_token_id, block_size=4,
                              end_token_id=tok.eos_token_id)
    assert back.output_ids == tuple(ids_of(tok, "hi")) + (tok.eos_token_id,) and back.text == "hi"
    whole = sv.from_trajectory(record, DecodeOnly(), mask_token_id=tok.mask_token_id, block_size=4, end_token_id=[])
    assert whole.n_tokens == 8 and whole.stop_reason == "length"  # told there is none: the filler is output


def test_a_d3llm_decode_exports_and_imports_back(tok, tmp_path):
    record, _ = d3llm_record(tok, "Q: 7?\nA: ", "seven", 12, 4, right_to_left, dream=True)
    trace = sv.from_trajectory(record, tok, mask_token_id=tok.mask_token_id, block_size=4)
    ours = sv.to_trajectory(trace, tok.mask_token_id, is_correct=True)
    for key in ("idx", "question", "prompt_ids", "trajectory", "final_output", "generated_text", "is_correct", "nfe"):
        assert key in ours, key  # d3LLM's fields; its trainer keeps the records whose is_correct is true
    assert ours["trajectory"] == record["trajectory"] and ours["generated_text"].startswith("Q: 7?")
    back = sv.from_trajectory(ours)
    assert same_commits(trace, back) and back.text == trace.text == "seven" and back.output_ids == trace.output_ids
    step_map = sv.to_step_map(trace)  # the end token: left out of lmdeploy's fields, back from ours
    assert tok.eos_token_id not in step_map["token_ids"] and step_map["finish_reason"] == "stop"
    assert same_commits(trace, sv.from_step_map(step_map), kept_only=True)
    path = sv.save_trajectories([trace, trace], tmp_path / "t.jsonl", tok.mask_token_id, is_correct=[True, False])
    assert [r.stop_reason for r in sv.load_trajectories(path)] == ["eos", "eos"]
    with pytest.raises(ValueError, match="is_correct: got 1 verdicts for 2 traces"):
        sv.save_trajectories([trace, trace], tmp_path / "u.jsonl", tok.mask_token_id, is_correct=[True])
