"""Tokens as the pictures show them, from plain trace data alone (no model): a leading space as ␣, a character whose
bytes span byte-level tokens whole where it completes (``BYTE_PIECE`` before it), special tokens marked. The same on
the real SmolLM2 tokenizer is in tests/integration/test_causal_lm.py."""

import sbd_viz as sv
from sbd_viz import plots
from sbd_viz.trace.words import trace_summary
from sbd_viz.trace.labels import BYTE_PIECE, mark_special, output_labels, special_label, token_label
from sbd_viz.trace.data import Candidate, Commit, SlotView, Step, Trace

# A byte-level decode of " 日 is<|im_end|>": ' 日' spans three tokens, which alone decode to ' �', '�', '�';
# read in context they are ' ', '' and '日'.
ALONE = [" \ufffd", "\ufffd", "\ufffd", " is", "<|im_end|>"]
IN_CONTEXT = [" ", "", "日", " is", "<|im_end|>"]
SPECIAL = ["<|im_end|>", "<|im_start|>"]


def ntp_like(alone=ALONE, in_context=IN_CONTEXT, special=SPECIAL) -> Trace:
    """One token per call, as greedy NTP records it."""
    n0 = 3
    steps = tuple(Step(call=i, block=i, block_start=n0 + i, block_size=1, step=0, masked=(0,),
                       slots=(SlotView(0, 0.5, (Candidate(100 + i, text, 0.9), Candidate(7, " \ufffd", 0.05))),),
                       commits=(Commit(0, 100 + i, text, 0.9, 0.5, 0),), wall_time=0.01, n_input=1)
                  for i, text in enumerate(alone))
    return Trace(prompt="<|im_start|>user\nhi<|im_end|>\n", prompt_ids=(1, 2, 3), config={"decoder": "ntp"},
                 model_id="tiny-bytes", steps=steps, output_ids=tuple(100 + i for i in range(len(alone))),
                 output_texts=tuple(in_context), text=" 日 is", stop_reason="eos",
                 meta={"special_tokens": special, "model_kind": "pretrained LM, not SBD-trained"})


def test_labels_read_each_token_in_context():
    labels = output_labels(ntp_like())
    assert [label for label, _ in labels] == ["␣" + BYTE_PIECE, BYTE_PIECE, "日", "␣is", "⟨im_end⟩"]
    assert "'日'" in labels[0][1] and "output token 2" in labels[0][1] and "completes '日'" in labels[2][1]
    assert labels[3][1] == "" and labels[4][1] == "special token <|im_end|>"


def test_a_character_cut_off_by_the_length_limit_shows_as_the_tokenizer_decodes_it():
    labels = output_labels(ntp_like(ALONE[:2], [" ", "\ufffd"], []))  # the last piece never completes
    assert [label for label, _ in labels] == ["␣" + BYTE_PIECE, "\ufffd"]


def test_a_trace_without_recorded_special_tokens_draws_as_before():
    trace = ntp_like(special=[])
    assert trace.special_tokens == frozenset() and output_labels(trace)[4][0] == "<|im_end|>"
    assert token_label(" x") == "␣x" and token_label("<|a|>", {"<|a|>"}) == special_label("<|a|>") == "⟨a⟩"
    assert mark_special("<|im_start|>user", {"<|im_start|>"}) == "⟨im_start⟩user"


def test_block_fill_summary_and_heatmap_show_the_labels():
    trace = ntp_like()
    fig = plots.block_fill(trace)
    rows = fig.layout.meta["rows"]
    cells = [t for r in range(rows) for t in fig.data[r].text[0] if t]
    assert cells == ["␣" + BYTE_PIECE, BYTE_PIECE, "日", "␣is", "⟨im_end⟩"]
    hovers = " ".join(h for r in range(rows) for h in fig.data[r].hovertext[0])
    assert "(id 7)" in hovers  # a byte-piece candidate: its id tells it apart from another
    assert "not SBD-trained" in " ".join(a.text for a in fig.layout.annotations)
    assert "⟨im_start⟩user" in " ".join(a.text for a in fig.layout.annotations)
    text = trace_summary(trace)
    assert "model=tiny-bytes (pretrained LM, not SBD-trained)" in text and "⟨im_end⟩" in text and "日" in text
    assert "日" in str(plots.entropy_heatmap(trace, 2).data[0].text)
    assert sv.trace_from_json(trace.to_json()) == trace
