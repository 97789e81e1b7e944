"""``sv.load_model`` by a Hugging Face Hub id: the snapshot in the Hugging Face cache (here a cache in the Hub's own
layout, ``tests/hub_cache.py``) loads as the same folder loads, named by its id, at a ``revision``; with
HF_HUB_OFFLINE=1 an id the cache lacks is refused by name with how to fetch it. Each check runs in a fresh interpreter,
as huggingface_hub reads its cache folder when it is imported."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

import sbd_viz as sv
from conftest import ROOT, tiny_model
from hub_cache import add_snapshot

pytestmark = pytest.mark.heavy

CHECKS = textwrap.dedent('''
    import json, sys
    import sbd_viz as sv

    out = {}
    def ids(model):
        return list(sv.decode_ntp(model, "assert 1 + 2 == ", max_new_tokens=6).output_ids)
    causal = sv.load_model("tiny/causal")
    out["causal"] = [type(causal).__name__, causal.name, ids(causal)]
    sbd = sv.load_model("tiny/sbd")
    trace = sv.decode(sbd, "assert 1 + 2 == ", max_new_tokens=6)
    out["sbd"] = [type(sbd).__name__, sbd.name, ids(sbd), trace.model_id]
    other = sv.load_model("tiny/sbd", revision="v2")
    out["revision"] = [other.name, other.fingerprint() != sbd.fingerprint()]
    for source, revision in (("nobody/nothing", None), ("tiny/sbd", "no-such-tag"), ("smollm2-135m-sbd", "v2")):
        try:
            sv.load_model(source, revision=revision)
            out.setdefault("refused", []).append(None)
        except (FileNotFoundError, ValueError) as exc:
            out.setdefault("refused", []).append(str(exc))
    print(json.dumps(out))
''')


def test_a_model_loads_by_its_hub_id_from_the_cache_offline(tmp_path):
    cache = tmp_path / "hub"
    folders = {}
    for name, seed, mask in (("causal", 0, False), ("sbd", 0, True), ("sbd2", 5, True)):
        model = tiny_model("llama", seed=seed)
        if not mask:
            model.model.config.mask_token_id = None
        folders[name] = tmp_path / name
        model.model.save_pretrained(folders[name])
        model.tokenizer.save_pretrained(folders[name])
        if not mask:  # a causal LM: no mask token anywhere
            config = json.loads((folders[name] / "tokenizer_config.json").read_text())
            config.pop("mask_token", None)
            (folders[name] / "tokenizer_config.json").write_text(json.dumps(config))
    add_snapshot(cache, "tiny/causal", folders["causal"])
    add_snapshot(cache, "tiny/sbd", folders["sbd"])
    add_snapshot(cache, "tiny/sbd", folders["sbd2"], refs=("v2",))
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache), "HF_HOME": str(tmp_path / "home")}
    done = subprocess.run([sys.executable, "-c", CHECKS], capture_output=True, text=True, env=env, cwd=ROOT,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    direct = {name: list(sv.decode_ntp(sv.load_model(folders[name]), "assert 1 + 2 == ", max_new_tokens=6).output_ids)
              for name in ("causal", "sbd")}
    assert out["causal"] == ["CausalLM", "tiny/causal", direct["causal"]]  # the folder's own decode, named by its id
    assert out["sbd"] == ["SBDModel", "tiny/sbd", direct["sbd"], "tiny/sbd"]
    assert out["revision"] == ["tiny/sbd@v2", True]  # another snapshot, another model
    missing, no_tag, not_hub = out["refused"]
    assert missing.startswith("path: 'nobody/nothing'") and "huggingface-cli download nobody/nothing" in missing
    assert no_tag.startswith("path: 'tiny/sbd' at revision 'no-such-tag'")
    assert not_hub.startswith("revision:")
