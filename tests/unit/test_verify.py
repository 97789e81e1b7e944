"""Verified SBD: the text equals greedy NTP's on several architectures, rollbacks leave the cache exactly as a
fresh prefill of the accepted text, the verdicts are recorded as data, and version-1 traces still load."""

import json
from pathlib import Path

import pytest
import torch

import sbd_viz as sv

from conftest import fake_blocks, sharp_model as sharp, tiny_model

ARCHS = ["llama", "qwen3", "gpt_neox", "mistral"]
PROMPTS = ["assert 1 + 2 == ", "x = [3, 1", "def f(a):", "hi"]
SBD_TRACE = Path(__file__).parents[1] / "data" / "trace_sbd.json"


pytestmark = pytest.mark.usefixtures("one_thread")  # tiny forwards: one thread is faster here


@pytest.fixture(scope="module")
def models():
    return {arch: sharp(arch) for arch in ARCHS}


def _prefill(model, ids):
    cache = model.new_cache()
    with torch.no_grad():
        model.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True)
    return cache


def _decode_checking_cache(model, prompt, ntp_ids, **kwargs):
    """A verified decode that, after every call, compares the KV cache with a fresh causal prefill of the prompt
    and NTP's text up to the cache's length: after a rollback the cache must hold exactly the accepted text."""
    caches = []
    real_new_cache = model.new_cache

    def new_cache():
        caches.append(real_new_cache())
        return caches[-1]

    model.new_cache = new_cache
    try:
        decoding = sv.Decoding(model, prompt, sv.DecodeConfig(verify=True, **kwargs))
        prompt_ids = decoding.prompt_ids
        worst = 0.0
        for step in decoding.steps():
            cache = caches[0]
            n = cache.get_seq_length()
            assert n >= len(prompt_ids)
            if step.rollback is not None:
                assert n == step.rollback.position  # cut back to exactly the accepted text
            fresh = _prefill(model, list(prompt_ids) + list(ntp_ids[: n - len(prompt_ids)]))
            assert fresh.get_seq_length() == n
            for mine, ref in zip(cache.layers, fresh.layers):
                for got, want in ((mine.keys, ref.keys), (mine.values, ref.values)):
                    worst = max(worst, float((got - want).abs().max()))
    finally:
        del model.new_cache
    assert worst <= 1e-4, worst
    return decoding.trace()


SETTINGS = [  # (rule, gamma, block_size, max_new_tokens, stop)
    ("entropy_bounded", 0.5, 4, 13, None),  # the length limit mid-block
    ("entropy_bounded", 2.0, 16, 30, None),
    ("top_k", 5, 5, 17, None),
    ("top_k", 4, 8, 21, "]"),  # a stop mid-block (when the model writes one)
    ("confidence_threshold", 0.5, 6, 15, "q"),
    ("left_to_right", 0.0, 3, 10, None),
    ("entropy_bounded", 0.5, 1, 7, None),  # block size 1
]


NOISY = {g for g in range(64) if g % 7 in (2, 5)}  # where the noisy oracle drafts a wrong token


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("drafter", ["model", "noisy_oracle"])
@pytest.mark.heavy
def test_verified_text_is_ntp_greedy_text(models, arch, drafter):
    """The model's own drafts (a random model's block head mostly disagrees with its NTP head) and a noisy
    oracle's (mostly right, wrong at fixed positions): either way the text is NTP's."""
    model = models[arch]
    rollbacks = where = accepted = 0
    for prompt in PROMPTS:
        for rule, gamma, block_size, max_new, stop in SETTINGS:
            ntp = sv.decode_ntp(model, prompt, max_new_tokens=max_new, stop=stop)
            if drafter == "noisy_oracle":
                oracle_drafter(model, prompt, ntp.output_ids, NOISY, soft=True)
            try:
                trace = sv.decode(model, prompt, rule=rule, gamma=gamma, block_size=block_size,
                                  max_new_tokens=max_new, stop=stop, verify=True)
            finally:
                model.__dict__.pop("call", None)
            setting = (prompt, rule, gamma, block_size, max_new, stop)
            assert trace.output_ids == ntp.output_ids, setting
            assert (trace.stop_reason, trace.text) == (ntp.stop_reason, ntp.text), setting
            assert trace.verified and trace.config["verify"] is True
            rollbacks += len(trace.rollbacks())
            where += sum(1 for s in trace.rollbacks() if 0 < s.rollback.slot < s.block_size - 1)
            accepted += sum(c.accepted for c in trace.checks())
            if block_size == 1:  # every token is NTP's exact token: nothing is drafted, nothing checked
                assert trace.checks() == [] and trace.nfe == trace.n_tokens
    assert rollbacks >= 10 and where >= 1  # the drafts really disagreed with NTP, mid-block too
    if drafter == "noisy_oracle":  # and agreed (a random model's own drafts rarely do)
        assert accepted >= 20


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.heavy
def test_cache_equals_a_fresh_prefill_after_every_call(models, arch):
    model = models[arch]
    seen = 0
    for prompt, rule, gamma, block_size in [("assert 1 + 2 == ", "top_k", 6, 6),
                                              ("x = [3, 1", "entropy_bounded", 2.0, 8),
                                              ("def f(a):", "left_to_right", 0.0, 4)]:
        ntp = sv.decode_ntp(model, prompt, max_new_tokens=20)
        trace = _decode_checking_cache(model, prompt, ntp.output_ids, rule=rule, gamma=gamma,
                                       block_size=block_size, max_new_tokens=20)
        assert trace.output_ids == ntp.output_ids
        seen += len(trace.rollbacks())
    assert seen >= 1


def oracle_drafter(model, prompt, ntp_ids, wrong_at, soft=False):
    """Make ``model`` draft NTP's own greedy tokens, except a wrong token at the generated positions ``wrong_at``:
    rejections then happen exactly where the test wants them. The causal logits (the verifier) are untouched.
    ``soft``: raise the drafted token just above the model's own block logits by a margin that varies with the
    position, so the slots' entropies vary and the rules commit a varying number of slots per call."""
    n_prompt = len(model.encode(prompt))
    vocab = model.model.get_output_embeddings().weight.shape[0]
    filler = model.tokenizer.convert_tokens_to_ids(" ")

    def drafts(block, start):
        first = start - n_prompt  # generated index of the block's first slot
        fake = block.clone() if soft else torch.full_like(block, -10.0)
        for i in range(block.shape[0]):
            tok = ntp_ids[first + i] if first + i < len(ntp_ids) else filler
            if first + i in wrong_at:
                tok = next(t for t in range(tok + 1, tok + 4) if t % vocab != model.mask_token_id) % vocab
            fake[i, tok] = float(block[i].max()) + (first + i) % 4 if soft else 10.0
        return fake

    return fake_blocks(model, drafts)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("rule, gamma, wrong_at, expected", [
    # drafts a whole block per call: block 0 covers generated 0..7 and is rejected at slot 1 by block 1's first
    # call, so block 1 reopens at 2 and covers 2..9 (wrong at its middle slot 4, position 6), then 7..14 (wrong
    # at its last slot, position 14)
    ("top_k", 8, {1, 6, 14}, [(1, 1), (6, 4), (14, 7)]),
    # one draft per call after each exact token: rejected in the block (slots 1 and 5), then at the last slot by
    # the next block's first call
    ("left_to_right", 0.0, {1, 5, 7}, [(1, 1), (5, 5), (7, 7)]),
])
@pytest.mark.heavy
def test_rejections_at_the_first_a_middle_and_the_last_slot(arch, rule, gamma, wrong_at, expected):
    """Blocks of 8: slot 0 is always NTP's exact token (never drafted, so never rejected); drafts are rejected
    at slot 1 (the first drafted slot), a middle slot and slot 7 (the last), each rolled back exactly."""
    model = tiny_model(arch, seed=3)  # its NTP text runs to the length limit on all four architectures
    prompt, k = "assert 7 == ", 8
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=40)
    oracle_drafter(model, prompt, ntp.output_ids, wrong_at=wrong_at)
    trace = _decode_checking_cache(model, prompt, ntp.output_ids, rule=rule, gamma=gamma, block_size=k,
                                   max_new_tokens=40)
    del model.call
    assert trace.output_ids == ntp.output_ids
    rejected = [(c.position - len(trace.prompt_ids), c.slot) for c in trace.checks() if not c.accepted]
    assert rejected == expected
    for s in trace.rollbacks():
        fix = s.commits[0]
        assert fix.ntp and fix.slot == s.rollback.slot and fix.token_id == s.rejected[0].ntp_token_id
        assert fix.token_id == ntp.output_ids[s.rollback.position - len(trace.prompt_ids)]
    assert all(c.accepted for c in trace.checks() if c.position - len(trace.prompt_ids) not in wrong_at)
    # slot 0 of every block is NTP's exact token, never a draft
    assert all(c.ntp for s in trace.steps for c in s.commits if c.slot == 0)


def test_rejection_in_the_final_check_continues_the_decode():
    """The last block is verified before the decode ends: a wrong draft in it (at the length limit, or right
    before a stop) is caught by the checking-only call, which writes NTP's token, and decoding goes on."""
    model = tiny_model("qwen3", seed=3)
    prompt = "hi"
    ntp = sv.decode_ntp(model, prompt, max_new_tokens=12)
    oracle_drafter(model, prompt, ntp.output_ids, wrong_at={9})
    # blocks 0..7 and 8..11 (the limit cuts the second block of 8): the check rejects 9, the next call writes
    # 10 exactly and drafts 11, and a second check accepts it
    trace = _decode_checking_cache(model, prompt, ntp.output_ids, rule="top_k", gamma=8, block_size=8,
                                   max_new_tokens=12)
    del model.call
    assert trace.output_ids == ntp.output_ids and trace.stop_reason == "length"
    checks_only = [s for s in trace.steps if s.check_only]
    assert checks_only and checks_only[0].rollback is not None and checks_only[0].rollback.slot == 1
    assert trace.steps[-1].check_only and trace.steps[-1].rollback is None  # the end itself is checked
    assert trace.steps[-1].commits == ()


@pytest.mark.heavy
def test_stop_in_the_drafts_is_checked_and_cut():
    model = sharp("llama")
    reasons = set()
    for prompt in PROMPTS:
        for stop in ("[", "q", "1"):
            ntp = sv.decode_ntp(model, prompt, max_new_tokens=40, stop=stop)
            trace = sv.decode(model, prompt, rule="top_k", gamma=6, block_size=6, max_new_tokens=40, stop=stop,
                              verify=True)
            assert (trace.output_ids, trace.stop_reason) == (ntp.output_ids, ntp.stop_reason)
            reasons.add(ntp.stop_reason)
    assert reasons == {"stop", "length"}


@pytest.mark.heavy
def test_verdicts_are_ntp_teacher_forced_choices(models):
    """Every check records NTP's greedy token and probability at its position; the output holds only
    accepted drafts and NTP's own tokens; gap fills a rollback discarded are not kept."""
    verdicts = []
    for model in models.values():
        for prompt in PROMPTS:
            ntp = sv.decode_ntp(model, prompt, max_new_tokens=30, top_n=1)
            oracle_drafter(model, prompt, ntp.output_ids, NOISY, soft=True)
            trace = sv.decode(model, prompt, rule="entropy_bounded", gamma=2.0, block_size=8, max_new_tokens=30,
                              verify=True)
            del model.call
            _check_verdicts(ntp, trace)
            verdicts += [c.accepted for c in trace.checks()]
    assert 0.2 < sum(verdicts) / len(verdicts) < 0.9


def _check_verdicts(ntp, trace):
    n_prompt = len(trace.prompt_ids)
    for c in trace.checks():
        g = c.position - n_prompt
        assert c.ntp_token_id == ntp.output_ids[g]
        assert c.ntp_prob == pytest.approx(ntp.steps[g].slots[0].top[0].prob, abs=1e-4)
        assert c.accepted == (c.token_id == c.ntp_token_id)
        assert 0 <= c.draft_prob <= c.ntp_prob + 1e-6
    if trace.checks():
        assert trace.accepted_fraction == sum(c.accepted for c in trace.checks()) / len(trace.checks())
    # the last commit at each output position is the output token; kept commits are exactly those
    last = {}
    for s in trace.steps:
        for c in s.commits:
            last[s.block_start + c.slot] = (s, c)
    assert [last[n_prompt + i][1].token_id for i in range(trace.n_tokens)] == list(trace.output_ids)
    for s in trace.steps:
        for c in s.commits:
            assert trace.kept(s, c.slot) == (last.get(s.block_start + c.slot, (None,))[0] is s
                                             and s.block_start + c.slot < n_prompt + trace.n_tokens)
    assert len(trace.token_calls()) == trace.n_tokens
    for s in trace.rollbacks():  # the block after the step shows the correction and no discarded draft
        state = trace.block_state(s)
        assert state[s.rollback.slot] == s.commits[0].text
        assert all(state[d] is None for d in s.rollback.dropped)


def test_nfe_counts_every_forward(models, monkeypatch):
    model = models["mistral"]
    calls = []
    real = sv.SBDModel.call

    def counted(self, *args, **kwargs):
        if self is model:  # another test's background work (a γ map an app server builds) may call other models
            calls.append(1)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(sv.SBDModel, "call", counted)
    trace = sv.decode(model, "assert 1 + 2 == ", rule="top_k", gamma=4, block_size=4, max_new_tokens=18,
                      verify=True)
    assert trace.nfe == len(calls) == len(trace.steps)
    assert trace.n_check_only >= 1  # the final check is a call too
    for s in trace.steps:
        if s.check_only:
            assert s.slots == () and s.masked == () and s.checks


def test_verified_trace_round_trips_and_streams(models, tmp_path):
    model = models["llama"]
    config = sv.DecodeConfig(rule="top_k", gamma=4, block_size=6, max_new_tokens=20, verify=True)
    decoding = sv.Decoding(model, "assert 1 + 2 == ", config)
    steps = list(decoding.steps())
    trace = decoding.trace()
    assert trace.steps == tuple(steps) and trace.rollbacks()
    assert _same_decisions(sv.decode_steps(model, "assert 1 + 2 == ", config), steps)  # wall times differ
    again = sv.load_trace(trace.save(tmp_path / "v.json"))
    assert again == trace and again.to_dict()["version"] == sv.trace.SCHEMA_VERSION
    assert "rollback" in sv.trace_summary(trace) and "verified" in sv.trace_summary(trace)


def _same_decisions(a, b):
    return [(s.commits, s.checks, s.rollback, s.check_only) for s in a] == [
        (s.commits, s.checks, s.rollback, s.check_only) for s in b]


@pytest.mark.parametrize("mutate, message", [
    (lambda d: d["steps"][d["_rb"]]["checks"][-1].update(accepted=True), "rollback exactly"),
    (lambda d: d["steps"][d["_rb"]]["checks"][-1].update(accepted="no"), "true or false"),
    (lambda d: d["steps"][d["_rb"]]["rollback"].update(dropped=[99]), "outside the block"),
    (lambda d: d["steps"][0]["commits"][0].update(ntp=1), "true or false"),
    (lambda d: d["steps"][d["_rb"]]["checks"][-1].pop("ntp_prob"), "missing"),
])
def test_malformed_verified_traces_are_rejected(models, mutate, message):
    trace = sv.decode(models["llama"], "assert 1 + 2 == ", rule="top_k", gamma=4, block_size=6,
                      max_new_tokens=20, verify=True)
    d = json.loads(trace.to_json())
    d["_rb"] = next(i for i, s in enumerate(trace.steps) if s.rollback is not None)
    mutate(d)
    with pytest.raises(sv.TraceFormatError, match=message):
        sv.trace_from_dict(d)


def test_temperature_with_verify_names_both(tiny):
    with pytest.raises(ValueError, match="verify.*temperature"):
        sv.decode(tiny, "hi", temperature=0.7, verify=True)
    with pytest.raises(ValueError, match="verify"):
        sv.DecodeConfig(verify="yes")
    assert sv.DecodeConfig(temperature=0.7).verify is False  # sampling without verification still works


def test_a_saved_unverified_trace_has_no_verdicts():
    """tests/data/trace_sbd.json: plain SBD (``tests/data/make_traces.py``)."""
    raw = json.loads(SBD_TRACE.read_text())
    assert raw["config"]["verify"] is False
    trace = sv.load_trace(SBD_TRACE)
    assert (trace.nfe, trace.n_tokens, trace.verified, trace.n_check_only) == (10, 14, False, 0)
    assert trace.checks() == [] and trace.rollbacks() == [] and not any(c.ntp for s in trace.steps for c in s.commits)
    assert len(trace.kept_gap_fills()) == 7 and len(trace.token_calls()) == trace.n_tokens
    assert sv.trace_from_json(trace.to_json()) == trace


@pytest.mark.heavy
def test_cli_trace_verify(models, tmp_path, capsys):
    from sbd_viz.cli import main as cli_main

    model = models["llama"]
    model.model.save_pretrained(tmp_path / "m")
    model.tokenizer.save_pretrained(tmp_path / "m")
    args = ["trace", "assert 1 + 2 == ", "--model", str(tmp_path / "m"), "--rule", "top_k", "--gamma", "4",
            "--block-size", "6", "--max-new-tokens", "20", "--verify", "--out", str(tmp_path / "t.json")]
    assert cli_main(args) == 0
    out = capsys.readouterr().out
    assert "SBD verified top_k" in out and "drafts accepted" in out
    trace = sv.load_trace(tmp_path / "t.json")
    assert trace.verified
    assert trace.output_ids == sv.decode_ntp(model, "assert 1 + 2 == ", max_new_tokens=20).output_ids
    assert cli_main(args + ["--temperature", "0.5"]) == 2
    assert "verify" in capsys.readouterr().err


def generate_by_length(model, prompts, n, stop):
    """Greedy NTP as a transformers user writes it, in batches: ``generate`` with ``stop_strings`` and the tokenizer
    (the mask token suppressed: no decode writes it) on the prompts of one length at a time, so no row is padded;
    each row's new ids up to its first stop or EOS, as a single-prompt ``generate`` returns them."""
    encoded = [model.encode(prompt) for prompt in prompts]
    by_length = {}
    for i, ids in enumerate(encoded):
        by_length.setdefault(len(ids), []).append(i)
    out = [None] * len(prompts)
    for n_prompt, rows in by_length.items():
        ids = torch.tensor([encoded[i] for i in rows])
        with torch.inference_mode():
            new = model.model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=n, do_sample=False,
                                       stop_strings=[stop], tokenizer=model.tokenizer,
                                       suppress_tokens=[model.mask_token_id],
                                       pad_token_id=model.tokenizer.eos_token_id)[:, n_prompt:].tolist()
        for i, row in zip(rows, new):
            end = next((j + 1 for j, t in enumerate(row)
                        if t == model.eos_token_id or stop in model.tokenizer.decode(row[:j + 1])), len(row))
            out[i] = row[:end]
    return out


@pytest.mark.slow
def test_shipped_model_verified_equals_ntp_on_the_whole_suite(shipped):
    """On the shipped model, verified SBD writes greedy NTP's exact ids (transformers' ``generate``) on every
    test-suite item, for several γ and block sizes, and the drafts really were checked (some rejected, most
    accepted)."""
    model = shipped
    items = sv.tasks.load_suite("pyasserts", "test")
    assert len(items) >= 500
    settings = [(0.1, 8), (1.0, 16), (2.0, 32)]
    differ = {s: [] for s in settings}
    rollbacks = {s: 0 for s in settings}
    calls = {s: 0 for s in settings}
    references = generate_by_length(model, [item.prompt for item in items], 48, "\n")
    tokens = sum(map(len, references))
    for item, reference in zip(items, references):
        for gamma, block in settings:
            trace = sv.decode(model, item.prompt, gamma=gamma, block_size=block, max_new_tokens=48, stop="\n",
                              verify=True)
            if list(trace.output_ids) != reference:
                differ[(gamma, block)].append(item.prompt)
            rollbacks[(gamma, block)] += len(trace.rollbacks())
            calls[(gamma, block)] += trace.nfe
    assert all(not d for d in differ.values()), {s: d[:3] for s, d in differ.items()}
    for s in settings:
        assert rollbacks[s] > 0, f"no rollback at {s}: the check was never exercised"
        assert calls[s] < tokens / 2, f"{s}: {calls[s]} calls for {tokens} tokens"
