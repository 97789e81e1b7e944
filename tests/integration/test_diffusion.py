"""DiffusionGemma through sbd_viz: tiny random-init folders (about 1M parameters, CPU) load, decode with
transformers' own ``generate``, and record every denoising step. Nothing is downloaded."""

import itertools

import pytest
import torch
from transformers import EntropyBoundSamplerConfig

import sbd_viz as sv
from sbd_viz.decoders import diffusion
from sbd_viz.models.diffusion import DiffusionModel

from diffusion_folders import tiny_folder

PROMPT = "def f(x):\n"
STEPS = 12  # max_denoising_steps in these tests (generate's default is 48)
EOS, PAD = 1, 0


# heavy: tiny DiffusionGemma folders built and decoded once per module; tiny forwards: one thread is faster
pytestmark = [pytest.mark.heavy, pytest.mark.usefixtures("one_thread")]


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """Canvas lengths 4 and 8; sharpened so the sampler accepts several slots, renoises some, and adaptive
    stopping ends some canvases early."""
    root = tmp_path_factory.mktemp("diffusion_gemma")
    return {k: tiny_folder(root / f"canvas{k}", canvas_length=k, sharpen=30.0) for k in (4, 8)}


@pytest.fixture(scope="module")
def models(folders):
    return {k: sv.load_model(path) for k, path in folders.items()}


def reference(model: DiffusionModel, prompt_ids, seed: int, **kwargs):
    """transformers' generate, unrecorded, after torch.manual_seed(seed): (new tokens up to the first EOS,
    decoder forwards counted by a hook, tokens_per_forward)."""
    forwards = []
    hook = model.model.model.decoder.register_forward_pre_hook(lambda *a: forwards.append(1))
    try:
        torch.manual_seed(seed)
        out = model.model.generate(torch.tensor([list(prompt_ids)]), eos_token_id=[EOS], pad_token_id=PAD, **kwargs)
    finally:
        hook.remove()
    new = out.sequences[0, len(prompt_ids):].tolist()
    new = new[: new.index(EOS) + 1] if EOS in new else new
    return new, len(forwards), float(out.tokens_per_forward[0])


CASES = list(itertools.product((4, 8), (0.1, 2.0), (True, False), (0, 1, 2)))


@pytest.fixture(scope="module")
def traces(models):
    """Each case's trace, decoded once."""
    return {(k, gamma, adaptive, seed): diffusion.decode(models[k], PROMPT, gamma=gamma, max_new_tokens=16, seed=seed,
                                                         max_denoising_steps=STEPS, adaptive_stopping=adaptive)
            for k, gamma, adaptive, seed in CASES}


@pytest.mark.parametrize("k, gamma, adaptive, seed", CASES)
def test_output_and_nfe_equal_generate(models, traces, k, gamma, adaptive, seed):
    model, trace = models[k], traces[(k, gamma, adaptive, seed)]
    # built as a transformers user builds it: the sampler's bound travels in its own config object
    kwargs = dict(max_new_tokens=16, sampler_config=EntropyBoundSamplerConfig(entropy_bound=gamma),
                  max_denoising_steps=STEPS)
    if not adaptive:
        kwargs["stability_threshold"] = STEPS  # a canvas can never be stable for all its steps: no early stop
    new, forwards, tokens_per_forward = reference(model, trace.prompt_ids, seed, **kwargs)
    assert list(trace.output_ids) == new
    assert trace.nfe == forwards
    assert trace.tokens_per_call == pytest.approx(tokens_per_forward)
    if not adaptive:
        assert all(n == STEPS for n in trace.calls_per_block())
    # every block's output is its last step's drafts (the argmax canvas generate appends)
    for b in range(trace.n_blocks):
        last = trace.block_steps(b)[-1]
        got = [d.token_id for d in last.canvas][: max(0, trace.n_tokens - b * k)]
        assert list(trace.output_ids[b * k:(b + 1) * k]) == got
    # one encoder pass before each block's first step: the prompt, then the previous canvas
    passes = [(s.step, [p.n_input for p in s.passes]) for s in trace.steps if s.passes or s.step == 0]
    assert passes == [(0, [len(trace.prompt_ids) if i == 0 else k]) for i in range(trace.n_blocks)]
    assert sv.trace_from_json(trace.to_json()) == trace


def test_gamma_reaches_the_sampler(models, traces):
    """γ is the sampler's bound: on the sharpened model a tight and a loose bound write different decodes
    (fails if γ stops reaching generate's sampler)."""
    tight = diffusion.decode(models[8], PROMPT, gamma=0.01, max_new_tokens=16, seed=0, max_denoising_steps=STEPS)
    loose = traces[(8, 2.0, True, 0)]
    assert (tight.output_ids, tight.nfe) != (loose.output_ids, loose.nfe)
    assert tight.config["gamma"] == 0.01 and loose.config["gamma"] == 2.0


def test_the_cases_cover_early_stops_renoising_and_end_of_text(traces):
    """The tiny models are not so flat that the equality above is vacuous: across the cases, adaptive stopping
    ends canvases early, accepted slots are renoised, several slots are accepted in one step, and a decode ends
    at the end-of-text token."""
    seen = set()
    for (k, gamma, adaptive, seed), trace in traces.items():
        if adaptive and min(trace.calls_per_block()) < STEPS:
            seen.add("early stop")
        if any(s.renoised for s in trace.steps):
            seen.add("renoised")
        if any(len(s.commits) > 1 for s in trace.steps):
            seen.add("several")
        if trace.stop_reason == "eos":
            seen.add("eos")
    assert seen == {"early stop", "renoised", "several", "eos"}


def test_load_model_recognises_the_folder(folders, models):
    model = models[8]
    assert isinstance(model, DiffusionModel) and sv.models.diffusion.is_diffusion_folder(folders[8])
    assert (model.canvas_length, model.block_size, model.context_length) == (8, 8, 96)
    assert not model.supports_verify and not model.supports_gap_free
    assert model.eos_ids == (EOS,)


def test_trace_records_the_settings(models):
    trace = diffusion.decode(models[4], PROMPT, gamma=0.5, max_new_tokens=8, max_denoising_steps=STEPS)
    c = trace.config
    assert (c["decoder"], c["rule"], c["gamma"], c["block_size"], c["max_denoising_steps"]) == (
        "diffusion_gemma", "entropy_bounded", 0.5, 4, STEPS)
    assert c["t_max"] > c["t_min"] > 0 and c["verify"] is False and c["gap_free"] is False


@pytest.mark.parametrize("kwargs, name", [
    (dict(verify=True), "verify"),
    (dict(gap_free=True), "gap_free"),
    (dict(rule="top_k"), "rule"),
    (dict(block_size=16), "block_size"),
    (dict(temperature=0.7), "temperature"),
    (dict(stop="\n"), "stop"),
    (dict(gamma=0), "gamma"),
    (dict(max_denoising_steps=0), "max_denoising_steps"),
    (dict(max_new_tokens=0), "max_new_tokens"),
    (dict(max_new_tokens=90), "max_new_tokens"),  # past the context of 96 positions
    (dict(prompt="x" * 100), "prompt"),
])
def test_bad_arguments_and_limits_are_refused_by_name(models, kwargs, name):
    kwargs = {"prompt": PROMPT, **kwargs}
    with pytest.raises(ValueError, match=f"^{name}:"):
        diffusion.decode(models[8], kwargs.pop("prompt"), **kwargs)


def test_block_size_equal_to_the_canvas_is_accepted(models):
    trace = diffusion.decode(models[4], PROMPT, block_size=4, max_new_tokens=4, max_denoising_steps=2)
    assert trace.n_blocks == 1 and trace.nfe <= 2


def test_not_a_diffusion_folder(tmp_path):
    assert not sv.models.diffusion.is_diffusion_folder(tmp_path)
    with pytest.raises(FileNotFoundError, match="path:"):
        DiffusionModel.from_pretrained(tmp_path)


# -- pictures ------------------------------------------------------------------------------------
@pytest.mark.parametrize("k, gamma, adaptive, seed", CASES)
def test_block_fill_builds_from_each_trace(traces, k, gamma, adaptive, seed):
    from sbd_viz import plots

    trace = traces[(k, gamma, adaptive, seed)]
    spec = plots.block_fill_spec(trace)
    rows = spec["layout"]["meta"]["rows"]
    assert "renoised" in spec["layout"]["meta"]["states"] and len(spec["frames"]) == trace.nfe
    for step in trace.steps:  # every renoised slot is grey and outlined in its call's frame, not after it
        frame = spec["frames"][step.call]
        at = {t: d for t, d in zip(frame["traces"], frame["data"])}
        row, outline = step.block, at[2 * rows + step.block]
        cells = at[row]["customdata"][0]
        assert sorted(tag[1] for tag in outline["customdata"] if tag) == sorted(
            s for s in step.renoised for _ in range(5))
        assert all(cells[s][0] == "renoised" for s in step.renoised)
        assert all(cells[d.slot][0] in ("done", "now") for d in step.canvas if d.accepted)
    # the finished view shows each block's output: the text of the last step's drafts
    final = spec["data"][:rows]
    shown = [final[b]["text"][0][s] for b in range(trace.n_blocks) for s in range(k)]
    assert len(shown) >= trace.n_tokens and all(label for label in shown)


def test_heatmap_and_timeline_draw_renoised_slots(traces):
    from sbd_viz import plots

    trace = next(t for t in traces.values() if any(s.renoised for s in t.steps))
    block = next(s.block for s in trace.steps if s.renoised)
    heat = plots.entropy_heatmap(trace, block)
    steps = trace.block_steps(block)
    outlined = {(tag[1], tag[2]) for tag in heat.data[3].customdata if tag}
    assert outlined == {(slot, s.call) for s in steps for slot in s.renoised}
    assert all(heat.data[0].text[r][slot] == "↺" for r, s in enumerate(steps) for slot in s.renoised)
    timeline = plots.calls_timeline(trace)
    bar = next(t for t in timeline.data if t.meta and t.meta.get("role") == "renoised")
    assert list(bar.customdata) == [len(s.renoised) for s in trace.steps]
    assert sum(t.y[c] or 0 for t in timeline.data[2:3] for c in range(trace.nfe)) == trace.n_tokens


# -- roofline ------------------------------------------------------------------------------------
def test_roofline_reads_the_shape_with_active_experts_and_projects_a_trace(folders, models, traces):
    import json

    from sbd_viz.analysis import roofline

    shape = roofline.shape_from_config(models[8])
    # the text model: 2 layers of 64, a gated dense MLP of 128 plus 2 of 4 experts of 64 active per token
    assert (shape.name, shape.n_layers, shape.hidden, shape.n_heads, shape.n_kv_heads, shape.head_dim) == (
        "canvas8", 2, 64, 2, 1, 32)
    assert (shape.ffn, shape.gated, shape.vocab) == (128 + 2 * 64, True, 100)
    assert "2 of 4 experts active" in shape.source
    as_dict = roofline.shape_from_config(json.loads((folders[8] / "config.json").read_text()), name="canvas8")
    assert as_dict.ffn == shape.ffn and as_dict.vocab == shape.vocab
    trace = traces[(8, 2.0, True, 0)]
    out = roofline.project(trace, "h100-bf16", models[8])
    assert out["sbd_calls"] == trace.nfe and out["tokens"] == trace.n_tokens
    assert out["sbd_s"] > 0 and out["ntp_s"] > 0 and out["hardware"] == "h100-bf16"


# -- through sv.decode and the CLI -----------------------------------------------------------------
def test_sv_decode_routes_a_diffusion_model_with_sbd_s_argument_order(models, traces):
    want = traces[(4, 2.0, True, 1)]
    got = sv.decode(models[4], PROMPT, "entropy_bounded", 2.0, None, 16, 0.0, 1, max_denoising_steps=STEPS)
    assert (got.output_ids, got.nfe, got.config["gamma"]) == (want.output_ids, want.nfe, 2.0)
    with pytest.raises(ValueError, match="^verify:"):
        sv.decode(models[4], PROMPT, verify=True)


def test_cli_trace_decodes_a_diffusion_folder(folders, tmp_path, capsys):
    from sbd_viz import cli

    out = tmp_path / "t.json"
    assert cli.main(["trace", PROMPT, "--model", str(folders[4]), "--gamma", "0.5", "--max-new-tokens", "8",
                     "--out", str(out), "--dtype", "float32", "--device", "cpu"]) == 0
    trace = sv.load_trace(out)
    assert trace.config["decoder"] == "diffusion_gemma" and trace.has_canvas
    assert f"{trace.nfe}" in capsys.readouterr().out
    assert cli.main(["trace", PROMPT, "--model", str(folders[4]), "--gap-free"]) == 2
    assert "gap_free: DiffusionGemma" in capsys.readouterr().err


def test_a_prompt_that_starts_with_bos_gets_it_once(models):
    """A chat template's text starts with the BOS token: encoding it must not add a second one."""
    model = models[4]
    assert model.encode("<bos>" + PROMPT) == model.encode(PROMPT) == [2] + model.encode(PROMPT)[1:]
    assert model.encode(PROMPT)[0] == 2 and model.encode(PROMPT).count(2) == 1


def test_two_recorded_decodes_at_once_keep_their_own_steps(models, traces):
    """The app decodes two requests at a time on one model: the recording hooks must not mix them."""
    from concurrent.futures import ThreadPoolExecutor

    cases = [(4, 0.1, True, 0), (4, 2.0, False, 1)]
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda c: diffusion.decode(models[c[0]], PROMPT, gamma=c[1], max_new_tokens=16, seed=c[3],
                                                       max_denoising_steps=STEPS, adaptive_stopping=c[2]), cases))
    for case, trace in zip(cases, got):
        assert (trace.output_ids, trace.nfe) == (traces[case].output_ids, traces[case].nfe)
        assert sum(len(s.passes) for s in trace.steps) == trace.n_blocks
