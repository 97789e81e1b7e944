"""Decoders as a choice (sv.decode(..., decoder=NAME), sbd_viz.decoders.registry): remask, Jacobi and prompt lookup recorded
into the same trace."""

import dataclasses
import random
import threading

import pytest
import torch

import sbd_viz as sv
from sbd_viz.decoders.lookup import lookup_drafts
from sbd_viz.trace.data import Trace

from conftest import reference_logits, sharp_model, tiny_model

PROMPTS = ["abc abc abc ", "go: 12 + 30 = ", "xyzzy"]


def _round_trip(trace: Trace) -> Trace:
    again = sv.trace_from_json(trace.to_json())
    assert again == trace
    return again


@pytest.mark.parametrize("decoder", ["jacobi", "prompt_lookup"])
@pytest.mark.parametrize("arch", ["llama", "qwen3"])
@pytest.mark.heavy
def test_exact_decoders_write_greedy_text_in_at_most_ntp_calls(decoder, arch):
    model = sharp_model(arch) if arch == "llama" else tiny_model(arch)
    for prompt in PROMPTS:
        ntp = sv.decode_ntp(model, prompt, max_new_tokens=24)
        trace = _round_trip(sv.decode(model, prompt, decoder=decoder, max_new_tokens=24))
        assert trace.output_ids == ntp.output_ids and trace.text == ntp.text
        assert trace.nfe <= ntp.nfe
        assert trace.config["decoder"] == decoder and trace.config["exact"] is True
        # every kept token is a commit of the call that kept it; the commits cover the output exactly once
        written = [c.token_id for s in trace.steps for c in s.commits]
        assert written[: trace.n_tokens] == list(trace.output_ids)
        for s in trace.steps:
            assert all(c.accepted for c in s.checks[:-1])
            assert (s.rollback is not None) == any(not c.accepted for c in s.checks)
            # a check's verdict is NTP's: accepted exactly when the draft is the row's argmax (the mask id aside:
            # no decode writes it, and the recorded candidates keep it where the model ranks it)
            for c in s.checks:
                assert c.accepted == (c.token_id == c.ntp_token_id)
                assert c.ntp_token_id == next(t.token_id for t in s.slots[c.slot].top if t.token_id != model.mask_id)


@pytest.mark.heavy
def test_jacobi_counts_every_call_and_keeps_at_least_one_token(sharp):
    trace = sv.decode(sharp, PROMPTS[0], decoder="jacobi", block_size=4, max_new_tokens=20)
    assert trace.nfe == len(trace.steps) and all(1 <= len(s.commits) <= 4 for s in trace.steps)
    assert sum(len(s.commits) for s in trace.steps) >= trace.n_tokens
    assert trace.steps[0].n_input == len(trace.prompt_ids) + 3  # the prompt and a 3-token guess


@pytest.mark.heavy
def test_exact_decoders_stop_where_greedy_stops(sharp):
    for decoder in ("jacobi", "prompt_lookup"):
        ntp = sv.decode_ntp(sharp, PROMPTS[1], max_new_tokens=30, stop=" ")
        trace = sv.decode(sharp, PROMPTS[1], decoder=decoder, max_new_tokens=30, stop=" ")
        assert trace.text == ntp.text and trace.stop_reason == ntp.stop_reason and trace.nfe <= ntp.nfe


# -- prompt lookup: transformers' drafting rule, this package's loop ---------------------------------------------
def _hf_drafts(ids, num_tokens, max_ngram, eos=None, suppress=None, vocab_size=None) -> list[int]:
    """The external reference: transformers' ``PromptLookupCandidateGenerator.get_candidates`` after ``ids``, built
    as a user (and ``generate(prompt_lookup_num_tokens=...)``) builds it: a ``max_length`` past the text, and
    optionally EOS and a ``SuppressTokensLogitsProcessor``."""
    from transformers import LogitsProcessorList, SuppressTokensLogitsProcessor
    from transformers.generation.candidate_generator import PromptLookupCandidateGenerator

    kwargs = {} if eos is None else {"eos_token_id": torch.tensor([eos])}
    if suppress is not None:
        kwargs.update(logits_processor=LogitsProcessorList([SuppressTokensLogitsProcessor([suppress], device="cpu")]),
                      vocab_size=vocab_size)
    generator = PromptLookupCandidateGenerator(num_output_tokens=num_tokens, max_matching_ngram_size=max_ngram,
                                               max_length=len(ids) + 64, **kwargs)
    candidates, logits = generator.get_candidates(torch.tensor([ids]))
    assert logits is None
    return candidates[0, len(ids):].tolist()


# (ids, num_tokens, max_ngram, eos, suppressed, the drafts): each a rule of the lookup, written out by hand
HAND_LOOKUPS = [
    ([1, 2, 3, 4, 1, 2], 2, 2, None, None, [3, 4]),            # the last bigram's earlier occurrence: what followed
    ([1, 2, 3, 4, 1, 2], 10, 2, None, None, [3, 4, 1, 2]),     # up to num_tokens, and up to the end of the text
    ([1, 2, 7, 1, 2, 8, 1, 2], 2, 2, None, None, [7, 1]),      # the first (leftmost) occurrence, not the latest
    ([3, 2, 9, 5, 2, 4, 5, 2], 3, 2, None, None, [4, 5, 2]),   # the longest n-gram first: (5, 2) ...
    ([3, 2, 9, 5, 2, 4, 5, 2], 3, 1, None, None, [9, 5, 2]),   # ... and with n at most 1, the first 2
    ([9, 4, 1, 4], 10, 2, None, None, [1, 4]),                 # no earlier (1, 4): the unigram 4
    ([7, 7, 7], 10, 2, None, None, [7]),                       # occurrences may overlap the n-gram itself
    ([1, 2, 3], 10, 2, None, None, []),                        # no earlier occurrence: no drafts
    ([5], 10, 2, None, None, []),                              # one token: no n-gram to look up
    ([1, 2, 6, 0, 3, 1, 2], 10, 2, 0, None, [6]),              # the drafts end before EOS
    ([1, 2, 0, 3, 1, 2], 10, 2, 0, None, []),                  # EOS first: no drafts (no other occurrence tried)
    ([1, 9, 3, 1, 5, 6, 1], 10, 2, None, 9, [5, 6, 1]),        # a suppressed first draft: the next occurrence
    ([1, 5, 9, 3, 1], 10, 2, None, 9, [5]),                    # a suppressed later draft ends the drafts
]


@pytest.mark.parametrize("ids, num_tokens, max_ngram, eos, suppressed, drafts", HAND_LOOKUPS)
def test_lookup_drafts_on_hand_made_texts_are_transformers_candidates(ids, num_tokens, max_ngram, eos, suppressed,
                                                                     drafts):
    ours = lookup_drafts(ids, num_tokens, max_ngram, () if eos is None else (eos,),
                         () if suppressed is None else (suppressed,))
    assert ours == drafts == _hf_drafts(ids, num_tokens, max_ngram, eos, suppressed, vocab_size=10)


def test_lookup_drafts_on_random_texts_are_transformers_candidates():
    rng, found = random.Random(0), 0
    for _ in range(1500):
        vocab = rng.choice([2, 3, 5, 20])
        ids = [rng.randrange(vocab) for _ in range(rng.randint(1, 40))]
        num_tokens, max_ngram = rng.randint(1, 12), rng.randint(1, 5)
        eos, suppressed = (rng.choice([None, rng.randrange(vocab)]) for _ in range(2))
        ours = lookup_drafts(ids, num_tokens, max_ngram, () if eos is None else (eos,),
                             () if suppressed is None else (suppressed,))
        assert ours == _hf_drafts(ids, num_tokens, max_ngram, eos, suppressed, vocab), \
            (ids, num_tokens, max_ngram, eos, suppressed)
        found += bool(ours)
    assert found > 500  # most texts draft something: the rule is exercised, not only its empty case


@pytest.mark.heavy
def test_prompt_lookup_feeds_the_lookup_drafts_of_the_text_so_far(sharp):
    """Each call feeds ``lookup_drafts`` of the prompt and the text so far (as many as the length leaves room to
    keep), after the prompt (first call) or the last kept token; it keeps NTP's text, in fewer calls."""
    cases = [(PROMPTS[0], {}, ()), ("ab ab ab ab ab ab", {"prompt_lookup_num_tokens": 3}, ()),
             (PROMPTS[0], {"max_matching_ngram_size": 1}, " "), ("xyzzy", {"max_matching_ngram_size": 3}, ())]
    fewer = False
    for prompt, kw, stop in cases:
        ntp = sv.decode_ntp(sharp, prompt, max_new_tokens=24, stop=stop)
        trace = sv.decode(sharp, prompt, decoder="prompt_lookup", max_new_tokens=24, stop=stop, **kw)
        assert trace.output_ids == ntp.output_ids and trace.stop_reason == ntp.stop_reason
        fewer |= trace.nfe < ntp.nfe
        n_prompt, text = len(trace.prompt_ids), list(trace.prompt_ids)
        for s in trace.steps:
            drafts = lookup_drafts(text, kw.get("prompt_lookup_num_tokens", 10), kw.get("max_matching_ngram_size", 2),
                                   (sharp.eos_token_id,), (sharp.mask_id,))[: 24 - (len(text) - n_prompt) - 1]
            assert (s.block_start, s.block_size) == (len(text), len(drafts) + 1)
            assert s.n_input == (n_prompt if s.call == 0 else 1) + len(drafts)
            assert [c.token_id for c in s.checks] == drafts[: min(len(drafts), len(s.commits))]
            text += [c.token_id for c in s.commits]
        assert text[n_prompt:][: trace.n_tokens] == list(trace.output_ids)
    assert fewer


def _untimed(trace: Trace) -> Trace:
    """The trace without what the clock says (each step's wall time, the meta's time of creation)."""
    return dataclasses.replace(trace, steps=tuple(dataclasses.replace(s, wall_time=0.0) for s in trace.steps),
                               meta={k: v for k, v in trace.meta.items() if k != "created"})


@pytest.mark.heavy
def test_prompt_lookup_in_two_threads_at_once_gives_the_traces_of_one_at_a_time(sharp):
    """The app decodes two prompts at a time: no lock, nothing shared, the same traces."""
    jobs = [(PROMPTS[0], {}), ("ab ab ab ab ab ab", {"prompt_lookup_num_tokens": 3, "max_matching_ngram_size": 1})]

    def run(prompt, kw):
        return _untimed(sv.decode(sharp, prompt, decoder="prompt_lookup", max_new_tokens=24, **kw))

    alone = [run(*job) for job in jobs]
    together: list[list[Trace]] = [[], []]
    start, errors = threading.Barrier(len(jobs)), []

    def worker(i):
        try:
            start.wait()
            together[i].extend(run(*jobs[i]) for _ in range(3))
        except BaseException as exc:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, traces in enumerate(together):
        assert len(traces) == 3 and all(t == alone[i] for t in traces), jobs[i]


@pytest.mark.heavy
def test_remask_takes_back_low_confidence_gap_fills(sharp):
    # threshold 1: every pending gap fill is re-read below it, so each is remasked (once)
    trace = _round_trip(sv.decode(sharp, PROMPTS[0], decoder="remask", gamma=2.0, remask_threshold=1.0,
                                  max_new_tokens=24))
    gap_fills = [(s.block, c.slot) for s in trace.steps for c in s.commits if c.gap]
    renoised = [(s.block, slot) for s in trace.steps for slot in s.renoised]
    assert gap_fills and renoised and len(set(renoised)) == len(renoised)
    assert set(renoised) <= set(gap_fills)
    assert trace.has_canvas and trace.config["remask_threshold"] == 1.0
    for s in trace.steps:
        for slot in s.renoised:
            assert not s.canvas[slot].accepted and slot not in s.committed_slots
    # threshold 0 never remasks, and the output is the held tokens
    plain = sv.decode(sharp, PROMPTS[0], decoder="remask", gamma=2.0, remask_threshold=0.0, max_new_tokens=24)
    assert not any(s.renoised for s in plain.steps)
    assert [d.held_id for b in range(plain.n_blocks) for d in plain.block_steps(b)[-1].canvas][: plain.n_tokens] \
        == list(plain.output_ids)


def test_decoder_arguments_are_checked_by_name(tiny):
    with pytest.raises(ValueError, match="decoder"):
        sv.decode(tiny, "ab", decoder="beam")
    with pytest.raises(ValueError, match="remask_threshold"):
        sv.decode(tiny, "ab", decoder="remask", remask_threshold=1.5)
    with pytest.raises(ValueError, match="gamma"):
        sv.decode(tiny, "ab", decoder="jacobi", gamma=0.5)
    with pytest.raises(ValueError, match="prompt_lookup_num_tokens"):
        sv.decode(tiny, "ab", decoder="prompt_lookup", prompt_lookup_num_tokens=0)
    with pytest.raises(ValueError, match="verify"):
        sv.decode(tiny, "ab", decoder="remask", verify=True)


def _reference_sbd(model, prompt: str, gamma: float, block_size: int, max_new_tokens: int):
    """Plain SBD written out from the paper (Algorithms 2-3, the entropy-bounded rule of eq. 8) on uncached forwards,
    sharing no code with the decoders: each call predicts the block's masked slots; the lowest-entropy ones are
    committed while the entropies of those before them sum to at most gamma. Returns the output ids and the slots
    each call committed. Inputs with no stop, EOS or mask id among the commits (asserted)."""
    final, out, calls = model.encode(prompt), [], []
    while len(out) < max_new_tokens:
        k = min(block_size, max_new_tokens - len(out))
        block, masked = [model.mask_token_id] * k, list(range(k))
        while masked:
            logp = torch.log_softmax(reference_logits(model, final + out, block)[masked], -1)
            entropy, proposal = -(logp.exp() * logp).sum(-1), logp.argmax(-1)
            chosen, spent = [], 0.0
            for i in sorted(range(len(masked)), key=lambda i: float(entropy[i])):
                if spent > gamma:
                    break
                chosen.append(masked[i])
                block[masked[i]] = int(proposal[i])
                spent += float(entropy[i])
            assert not {block[s] for s in chosen} & {model.mask_token_id, model.eos_token_id}
            calls.append(sorted(chosen))
            masked = [s for s in masked if s not in chosen]
        out += block
    return out, calls


@pytest.mark.heavy
def test_the_default_decoder_and_sbd_are_plain_sbd(sharp):
    """``sv.decode``'s default and ``decoder="sbd"`` each write what SBD written out independently writes."""
    ids, calls = _reference_sbd(sharp, PROMPTS[1], gamma=2.0, block_size=4, max_new_tokens=10)
    assert max(len(c) for c in calls) > 1  # some call commits several slots: the rule is exercised
    for kwargs in ({}, {"decoder": "sbd"}):
        trace = sv.decode(sharp, PROMPTS[1], gamma=2.0, block_size=4, max_new_tokens=10, **kwargs)
        assert list(trace.output_ids) == ids and trace.config["decoder"] == "sbd", kwargs
        assert [[c.slot for c in s.commits] for s in trace.steps] == calls, kwargs


@pytest.mark.slow
def test_exact_decoders_on_held_out_suite_items(shipped):
    model = shipped
    for item in sv.tasks.load_suite(split="test", per_family=2):
        ntp = sv.decode_ntp(model, item.prompt, stop="\n")
        for decoder in ("jacobi", "prompt_lookup"):
            trace = _round_trip(sv.decode(model, item.prompt, decoder=decoder, stop="\n"))
            assert trace.text == ntp.text, (decoder, item.prompt)
            assert trace.nfe <= ntp.nfe, (decoder, item.prompt)
        remask = _round_trip(sv.decode(model, item.prompt, decoder="remask", stop="\n"))
        assert remask.n_tokens >= 1


@pytest.mark.heavy
def test_compare_decoders_data(sharp):
    from sbd_viz import plots

    prompt = PROMPTS[0]
    traces = [sv.decode(sharp, prompt, decoder=d, max_new_tokens=16, **kw)
              for d, kw in [("ntp", {}), ("sbd", {"gamma": 2.0}), ("sbd", {"verify": True}),
                            ("remask", {"gamma": 2.0, "remask_threshold": 1.0}), ("jacobi", {}), ("prompt_lookup", {})]]
    fig = plots.compare_decoders(traces)
    rows = fig.layout.meta["rows"]
    # each row is named by its decoder's spec: its label, or its variant's
    assert [r["label"] for r in rows] == ["NTP", "SBD", "verified SBD", "SBD + remasking", "Jacobi", "prompt lookup"]
    assert [r["decoder"] for r in rows] == ["ntp", "sbd", "sbd", "remask", "jacobi", "prompt_lookup"]
    for r, t in zip(rows, traces):
        assert (r["calls"], r["tokens"]) == (t.nfe, t.n_tokens)
        assert r["equals_greedy"] == (t.text == traces[0].text)
        assert r["renoised"] == sum(len(s.renoised) for s in t.steps)
    assert all(r["equals_greedy"] for r in rows if r["label"] in ("NTP", "verified SBD", "Jacobi", "prompt lookup"))
    assert rows[3]["renoised"] > 0
    # each decoder's cells spell its whole output, token by token as the pictures label them; each cell's shade is
    # the call that wrote it
    from sbd_viz.plots.side_by_side import LABEL_CHARS
    from sbd_viz.plots.style import cell_label
    from sbd_viz.trace.labels import output_labels

    for i, t in enumerate(traces):
        panel = fig.data[i]
        assert [x for row in panel.text for x in row if x] == [cell_label(label, LABEL_CHARS)
                                                               for label, _ in output_labels(t)]
        assert [z for row in panel.z for z in row if z is not None] == t.token_calls()
    assert fig.data[len(traces)].x == tuple(t.nfe for t in traces)
    with pytest.raises(ValueError, match="traces"):
        plots.compare_decoders([traces[0], sv.decode(sharp, "other", max_new_tokens=4)])


@pytest.mark.heavy
def test_draft_and_check_traces_in_words(sharp):
    from sbd_viz.trace import words as summary
    from sbd_viz.plots.style import settings_line

    trace = sv.decode(sharp, PROMPTS[0], decoder="jacobi", block_size=4, max_new_tokens=12)
    first, later = (summary.step_text(trace, s).splitlines()[0] for s in trace.steps[:2])
    assert f"the prompt's {len(trace.prompt_ids)} tokens and 3 draft(s) causally" in first
    assert "the last accepted token and 3 draft(s) causally" in later
    assert summary.trace_summary(trace).startswith("jacobi (drafts checked by NTP")
    assert "rule" not in settings_line(trace) and "γ" not in settings_line(trace)


@pytest.mark.heavy
def test_sweep_decoders_frame_and_its_tradeoff(sharp):
    from sbd_viz import plots

    prompts = PROMPTS[:2]
    df = sv.sweep_decoders(sharp, prompts, gammas=(0.5, 2.0), verify=(False, True), max_new_tokens=12)
    # the labels are the specs'; remasking's own setting is at its default, named in its rows' settings
    assert list(df["label"]) == ["NTP"] + ["SBD", "verified SBD"] * 2 + ["SBD + remasking"] * 2 + ["Jacobi",
                                                                                                  "prompt lookup"]
    assert set(df.loc[df["decoder"] == "remask", "settings"]) == {"remask_threshold 0.5"}
    ntp = [sv.decode_ntp(sharp, p, max_new_tokens=12) for p in prompts]
    row = df[(df["label"] == "SBD") & (df["gamma"] == 2.0)].iloc[0]
    traces = [sv.decode(sharp, p, gamma=2.0, max_new_tokens=12) for p in prompts]
    assert row["calls"] == sum(t.nfe for t in traces) and row["tokens"] == sum(t.n_tokens for t in traces)
    assert row["speedup_calls"] == pytest.approx(sum(t.nfe for t in ntp) / row["calls"])
    assert row["same_as_ntp"] == sum(t.text == n.text for t, n in zip(traces, ntp)) / 2
    exact = df[df["label"].isin(["verified SBD", "Jacobi", "prompt lookup", "NTP"])]
    assert (exact["same_as_ntp"] == 1.0).all() and df["accuracy"].isna().all()  # plain prompts are not scored
    fig = plots.decoder_tradeoff(df, y="same_as_ntp")
    lines = fig.layout.meta["lines"]
    assert set(lines) == set(df["label"]) and len(lines["SBD"]) == 2
    assert [p[2] for p in lines["SBD"]] == sorted([0.5, 2.0], key=lambda g: df[(df.label == "SBD") & (df.gamma == g)]
                                                   .speedup_calls.iloc[0])
    # each line in its decoder's colour (the spec's); the variant's line dashed
    by_name = {t.name: t for t in fig.data}
    assert by_name["SBD"].line.color == by_name["verified SBD"].line.color == sv.registry.get_decoder("sbd").color
    assert by_name["Jacobi"].line.color == sv.registry.get_decoder("jacobi").color
    assert by_name["verified SBD"].line.dash == "dash" and by_name["SBD"].line.dash == "solid"
    assert any("remask_threshold 0.5" in text for text in by_name["SBD + remasking"].text)
    with pytest.raises(ValueError, match="decoders"):
        sv.sweep_decoders(sharp, prompts, decoders=("beam",))


@pytest.mark.heavy
def test_the_cli_traces_with_another_decoder_and_refuses_what_it_does_not_take(capsys, tmp_path, shipped):
    from sbd_viz import cli

    out = tmp_path / "t.json"
    assert cli.main(["trace", "assert 1 + 2 == ", "--decoder", "jacobi", "--stop", "\n", "--out", str(out)]) == 0
    trace = sv.load_trace(out)
    assert trace.config["decoder"] == "jacobi" and trace.text == sv.decode_ntp(shipped, "assert 1 + 2 == ",
                                                                                stop="\n").text
    assert cli.main(["trace", "assert 1 + 2 == ", "--decoder", "jacobi", "--verify"]) == 2
    assert "verify" in capsys.readouterr().err


@pytest.mark.heavy
def test_a_remask_trace_whose_last_block_is_cut_short_draws(tiny):
    """max_new_tokens 24 at block 16: the last block's canvas holds 8 slots; the other 8 are drawn as not decoded."""
    from sbd_viz import plots

    trace = sv.decode(tiny, "assert 48 + 37 == ", decoder="remask", gamma=1.0, block_size=16, max_new_tokens=24)
    assert trace.n_tokens == 24 and len(trace.steps[-1].canvas) == 8
    spec = plots.block_fill_spec(trace)
    assert len(spec["frames"]) == trace.nfe
