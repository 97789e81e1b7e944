"""Model kinds are open: a kind registered by a plugin (in a notebook with ``sv.register_model_kind``, or by an
installed package's ``sbd_viz.model_kinds`` entry point) is what ``sv.load_model`` opens, and a decoder that
declares that kind serves it, through the one door; the built-in kinds are the SmolLM2 loaders' and the character
model's."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import sbd_viz as sv
from sbd_viz.models import adapted_lm, causal_lm, kinds as model_kinds
from sbd_viz.models import sbd_model as model_module
from sbd_viz.decoders import registry

from conftest import tiny_model


class TinyLM(sv.SBDModel):
    """A plugin's model class: a tiny random LM, opened from the name ``"tiny:SEED"``."""

    kind = "tiny"


def open_tiny(source) -> bool:
    return isinstance(source, str) and source.startswith("tiny:")


def load_tiny(source, dtype, device):
    base = tiny_model(seed=int(source.split(":")[1]))
    return TinyLM(base.model.to(dtype), base.tokenizer, name=source)


class TinyGreedy(sv.NTPDecoding):
    """The plugin's decoder: greedy on its own kind."""


@pytest.fixture
def plugin():
    """The kind and a decoder that declares it, registered as a notebook would; removed afterwards."""
    kind = sv.register_model_kind(sv.ModelKind("tiny", "a tiny random LM (TinyLM): greedy on its logits", TinyLM,
                                               opens=open_tiny, load=load_tiny))
    spec = sv.register_decoder(sv.DecoderSpec(name="tiny_greedy", label="tiny greedy", decoding=TinyGreedy,
                                              exact=True, model="tiny"))
    try:
        yield kind, spec
    finally:
        registry.REGISTRY.unregister(spec.name)
        model_kinds.REGISTRY.unregister(kind.name)


def test_a_registered_kind_is_loaded_and_served_by_its_decoder(plugin):
    kind, spec = plugin
    model = sv.load_model("tiny:3")
    assert type(model) is TinyLM and model.name == "tiny:3"
    assert model_kinds.kind_of(model) is kind and model_kinds.kinds()[0] is kind  # asked before the built-ins
    assert sv.decoders(model) == (spec,)  # its kind only: no SBD decoder, no causal one
    trace = sv.decode(model, "abc ", max_new_tokens=6)  # the model's first decoder: the plugin's
    assert trace.config["decoder"] == "tiny_greedy"
    same_weights = sv.SBDModel(model.model, model.tokenizer)  # NTP serves a plain SBD model, not this kind
    assert trace.output_ids == sv.decode_ntp(same_weights, "abc ", max_new_tokens=6).output_ids
    with pytest.raises(ValueError, match=r"^decoder: 'sbd' decodes with an SBD-trained model .*; this model is "
                                         r"a tiny random LM \(TinyLM\) \(its decoders: tiny_greedy\)"):
        sv.decode(model, "abc ", decoder="sbd")
    assert not spec.serves(sv.load_model())  # the shipped SBD model is not its kind
    with pytest.raises(ValueError, match="^decoder: 'tiny_greedy' decodes with a tiny random LM"):
        sv.decode(sv.load_model(), "abc ", decoder="tiny_greedy")


def test_a_kind_that_is_also_causal_gets_the_causal_decoders(plugin):
    kind, spec = plugin
    sv.register_model_kind(sv.ModelKind("tiny", kind.description, TinyLM, open_tiny, load_tiny, also=("causal",)),
                           replace_existing=True)
    model = sv.load_model("tiny:3")
    names = [s.name for s in sv.decoders(model)]
    assert "tiny_greedy" in names and "ntp" in names and "jacobi" in names and "sbd" not in names
    assert sv.decode(model, "abc ", decoder="ntp", max_new_tokens=6).output_ids == \
        sv.decode(model, "abc ", decoder="tiny_greedy", max_new_tokens=6).output_ids


def test_the_built_in_kinds_are_the_loaders_and_the_character_model():
    built = {k.name: k for k in model_kinds.kinds() if k.name in model_kinds.BUILTIN}
    assert tuple(built) == tuple(model_kinds.BUILTIN)  # the order load_model asks them
    assert built["sbd"] is model_module.MODEL_KIND and built["sbd"].model_class is sv.SBDModel
    assert built["causal"] is causal_lm.MODEL_KIND and built["causal"].load is causal_lm.load
    assert built["adapted"] is adapted_lm.MODEL_KIND and built["adapted"].load is adapted_lm.load
    assert built["diffusion"].model_class is sv.DiffusionModel
    assert model_kinds.opening(sv.default_model_path()) is built["sbd"]
    assert model_kinds.opening("smollm2-135m") is built["causal"]
    assert model_kinds.opening("smollm2-135m-sbd") is built["adapted"]
    assert model_kinds.kind_of(sv.load_model()) is built["sbd"]
    assert {s.model for s in sv.decoders()} <= set(model_kinds.names())
    # which decoders serve which kind: an adapted LM is an SBD model and a causal LM; a causal LM only causal
    assert built["adapted"].is_a("sbd") and built["adapted"].is_a("causal") and not built["adapted"].is_a("diffusion")
    assert built["sbd"].is_a("causal") and not built["causal"].is_a("sbd")


@pytest.mark.parametrize("field, value, message", [
    ("name", "two words", "name"), ("description", "", "description"), ("model_class", "SBDModel", "model_class"),
    ("opens", open_tiny, "opens"), ("also", ("tiny",), "also"),
])
def test_a_bad_kind_is_refused_by_field(field, value, message):
    fields = dict(name="tiny", description="a tiny LM (TinyLM)", model_class=TinyLM)
    with pytest.raises((ValueError, TypeError), match=f"^{message}:"):
        sv.ModelKind(**{**fields, field: value})


def test_a_decoder_of_an_unknown_kind_and_a_second_kind_of_one_name_are_refused(plugin):
    kind, _ = plugin
    with pytest.raises(ValueError, match=r"^model: .* serves one of diffusion, adapted, causal, sbd, tiny, got 'tiy'"):
        sv.DecoderSpec(name="typo", label="typo", decoding=TinyGreedy, model="tiy")
    with pytest.raises(ValueError, match="^kind: a model kind named 'tiny' is already registered"):
        sv.register_model_kind(sv.ModelKind("tiny", "another", TinyLM))
    with pytest.raises(TypeError, match=r"^model: expected a model of kind 'tiny' \(class TinyLM"):
        class Impostor:
            kind = "tiny"
        sv.decode(Impostor(), "abc ", decoder="tiny_greedy")


# -- an installed package's kind, found through its entry point ------------------------------------------------
PLUGIN = textwrap.dedent('''
    """A model kind and its decoder in one package: a tiny random LM opened from "tiny:SEED"."""
    import torch
    import transformers as tf

    import sbd_viz as sv
    from sbd_viz.training.data import build_char_tokenizer


    class TinyLM(sv.SBDModel):
        kind = "tiny"


    def load(source, dtype, device):
        tok = build_char_tokenizer()
        config = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=64, max_position_embeddings=128)
        torch.manual_seed(int(source.split(":")[1]))
        model = tf.AutoModelForCausalLM.from_config(config, attn_implementation="sdpa").to(dtype)
        model.config.mask_token_id = tok.mask_token_id
        return TinyLM(model, tok, name=source)


    class TinyGreedy(sv.NTPDecoding):
        pass


    KIND = sv.ModelKind("tiny", "a tiny random LM (TinyLM)", TinyLM,
                        opens=lambda source: str(source).startswith("tiny:"), load=load)
    SPEC = sv.DecoderSpec(name="tiny_greedy", label="tiny greedy", decoding=TinyGreedy, exact=True, model="tiny")
''')
CHECKS = textwrap.dedent('''
    import json, warnings
    warnings.simplefilter("error", RuntimeWarning)  # a plugin that failed to load would only warn
    import sbd_viz as sv

    model = sv.load_model("tiny:5")
    trace = sv.decode(model, "abc ", max_new_tokens=6)
    print(json.dumps({"class": type(model).__module__ + "." + type(model).__name__,
                      "decoders": [s.name for s in sv.decoders(model)], "decoder": trace.config["decoder"],
                      "same": list(trace.output_ids) == list(sv.decode_ntp(sv.SBDModel(model.model, model.tokenizer),
                                                                           "abc ", max_new_tokens=6).output_ids),
                      "shipped": [s.name for s in sv.decoders(sv.load_model())]}))
''')


@pytest.mark.heavy
def test_an_installed_kind_is_loaded_and_served_through_its_entry_point(tmp_path):
    site = tmp_path / "site"
    dist = site / "tiny_kind-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "tiny_kind.py").write_text(PLUGIN)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: tiny-kind\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[sbd_viz.model_kinds]\ntiny = tiny_kind:KIND\n\n"
                                           "[sbd_viz.decoders]\ntiny_greedy = tiny_kind:SPEC\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["class"] == "tiny_kind.TinyLM"  # the installed package's class, opened by its kind
    assert out["decoders"] == ["tiny_greedy"] and out["decoder"] == "tiny_greedy" and out["same"]
    assert "tiny_greedy" not in out["shipped"] and "sbd" in out["shipped"]


def test_a_shipped_model_loads_by_the_name_readme_gives_it(tmp_path, monkeypatch):
    """``sv.load_model("sbd-char-5m")`` is the shipped model (its folder's weights), from any folder; a local folder
    of that name is that folder, not the shipped one."""
    monkeypatch.chdir(tmp_path)
    named, default = sv.load_model("sbd-char-5m"), sv.load_model()
    assert named.name == "sbd-char-5m" and named.fingerprint() == default.fingerprint()
    (tmp_path / "sbd-char-5m").mkdir()
    with pytest.raises(FileNotFoundError, match="not a model folder"):
        sv.load_model("sbd-char-5m")
