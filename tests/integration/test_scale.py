"""Sweeps at scale: batched sweeps and evaluations equal unbatched ones, greedy NTP on the batch engine equals
``decode_ntp``, a sweep under ``accelerate launch`` with two processes equals the one-process sweep row for row,
and ``load_model`` takes a device and a dtype."""

import os
import subprocess
import sys

import pandas as pd
import pytest
import torch

import sbd_viz as sv

from conftest import free_port, tiny_model

pytestmark = pytest.mark.heavy  # the shipped model's sweeps, batched and across processes: seconds per test

QUALITY = ["rule", "gamma", "block_size", "gap_free", "verify", "accuracy", "calls_per_token", "tokens_per_call",
           "speedup_calls", "gap_fill_rate", "n_gap_fills", "ntp_agreement", "same_as_ntp", "accuracy_with_gaps",
           "accuracy_without_gaps", "n_with_gaps", "n_items", "calls", "tokens", "max_new_tokens", "fingerprint"]


@pytest.fixture(scope="module")
def items():
    return sv.tasks.load_suite(per_family=2)


def test_batched_ntp_equals_decode_ntp(shipped, items):
    prompts = [item.prompt for item in items]
    batched = sv.decode_batch(shipped, prompts, decoder="ntp", stop="\n", batch_size=8)
    for prompt, trace in zip(prompts, batched):
        one = sv.decode_ntp(shipped, prompt, stop="\n")
        assert trace.output_ids == one.output_ids, prompt
        assert trace.nfe == one.nfe and trace.config["decoder"] == "ntp"


@pytest.mark.parametrize("arch", ["llama", "gpt_neox"])
def test_batched_ntp_equals_decode_ntp_on_random_models(arch):
    model = tiny_model(arch, seed=2)
    prompts = ["assert 1 + 2 == ", "x = [3, 1", "hi", "def f(a):\n    return a"]
    batched = sv.decode_batch(model, prompts, decoder="ntp", max_new_tokens=11, batch_size=3)
    assert [t.output_ids for t in batched] == [sv.decode_ntp(model, p, max_new_tokens=11).output_ids
                                               for p in prompts]


def test_batched_sweep_equals_unbatched(shipped, items):
    one = sv.sweep(shipped, items, gammas=[0.1, 1.0], verify=(False, True), cache_dir=None, progress=False)
    many = sv.sweep(shipped, items, gammas=[0.1, 1.0], verify=(False, True), cache_dir=None, progress=False,
                    batch_size=8, speed_batch_size=None)
    pd.testing.assert_frame_equal(one[QUALITY], many[QUALITY])
    assert (one["batch_size"] == 1).all() and (one["speed_batch_size"] == 1).all()
    assert (many["batch_size"] == 8).all() and many["speed_batch_size"].isna().all()
    assert many["speedup_wall"].isna().all() and one["speedup_wall"].notna().all()  # None: no wall clock at all
    timed = sv.sweep(shipped, items[:6], gammas=[0.35], cache_dir=None, progress=False, batch_size=4,
                     speed_batch_size=4)
    assert (timed["speed_batch_size"] == 4).all() and timed["speedup_wall"].notna().all()


def test_batched_evaluate_says_how_it_was_timed(shipped, items):
    result = sv.evaluate(shipped, items[:8], batch_size=4)  # quality batched, the wall clock at batch 1
    assert result["settings"]["batch_size"] == 4 and result["settings"]["speed_batch_size"] == 1
    assert all(r["wall_time"] > 0 and r["ntp_wall_time"] > 0 for r in result["rows"])
    plain = sv.evaluate(shipped, items[:8])
    assert [r["output"] for r in result["rows"]] == [r["output"] for r in plain["rows"]]
    assert [r["ntp_output"] for r in result["rows"]] == [r["ntp_output"] for r in plain["rows"]]


def test_bad_batch_arguments_are_named(shipped, items):
    with pytest.raises(ValueError, match="batch_size"):
        sv.evaluate(shipped, items[:2], batch_size=0)
    with pytest.raises(ValueError, match="speed_batch_size"):
        sv.evaluate(shipped, items[:2], batch_size=4, speed_batch_size=2)
    with pytest.raises(ValueError, match="speed_batch_size"):
        sv.sweep(shipped, items[:2], gammas=[0.1], cache_dir=None, progress=False, batch_size=4, speed_batch_size=8)
    with pytest.raises(ValueError, match="decoder"):
        sv.decode_batch(shipped, ["a"], decoder="beam")


SCRIPT = """
import atexit
import os
import sys
import torch
torch.set_num_threads(1)
# registered first, so it runs last at exit: by then the library has destroyed the process group
# (a file per rank: two ranks printing at once can interleave their lines)
atexit.register(lambda: open(sys.argv[1] + ".alive_at_exit." + os.environ["RANK"], "w").write(
    str(torch.distributed.is_initialized())))
import sbd_viz as sv
from sbd_viz.analysis.evaluation import is_main_process, split_items

items = sv.tasks.load_suite(per_family=1)
with split_items(items) as (share, gather):
    shares = gather([len(share)])
df = sv.sweep(sv.load_model(), items, gammas=[0.1, 0.35], cache_dir=sys.argv[2], progress=False,
              batch_size=int(sys.argv[3]), speed_batch_size=None)
if is_main_process():
    df.to_csv(sys.argv[1], index=False)
    print("shares", *shares)
"""


def _launch(tmp_path, out, cache, batch_size):
    script = tmp_path / "sweep2.py"
    script.write_text(SCRIPT)
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
           "--main_process_port", str(free_port()), "--num_machines", "1", "--mixed_precision", "no",
           "--dynamo_backend", "no", str(script), str(out), str(cache), str(batch_size)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_two_process_sweep_equals_one_process(tmp_path, shipped):
    items = sv.tasks.load_suite(per_family=1)
    out, cache = tmp_path / "two.csv", tmp_path / "cache"
    stdout = _launch(tmp_path, out, cache, batch_size=4)
    n = len(items)
    assert f"shares {n // 2} {n - n // 2}" in stdout  # each process decoded half of the items
    # a gloo group left alive at interpreter shutdown can abort a rank after its work is done
    assert [(tmp_path / f"two.csv.alive_at_exit.{rank}").read_text() for rank in (0, 1)] == ["False", "False"]
    two = pd.read_csv(out)
    one = sv.sweep(shipped, items, gammas=[0.1, 0.35], cache_dir=None, progress=False, batch_size=4,
                   speed_batch_size=None)
    two["fingerprint"] = two["fingerprint"].astype(str)
    pd.testing.assert_frame_equal(one[QUALITY], two[QUALITY], check_dtype=False)
    # the cache the main process wrote serves the same rows, to one process and to two
    cached = sv.sweep(shipped, items, gammas=[0.1, 0.35], cache_dir=cache, progress=False, batch_size=4,
                      speed_batch_size=None)
    assert list(cached["measured_at"]) == list(two["measured_at"])  # read back, not recomputed
    pd.testing.assert_frame_equal(cached[QUALITY], one[QUALITY])
    _launch(tmp_path, tmp_path / "again.csv", cache, batch_size=4)
    again = pd.read_csv(tmp_path / "again.csv")
    assert list(again["measured_at"]) == list(two["measured_at"])


def test_load_model_takes_a_device_and_a_dtype():
    model = sv.load_model(device="cpu", dtype="bfloat16")
    assert model.model.dtype == torch.bfloat16 and model.device.type == "cpu"
    assert sv.decode(model, "assert 2 + 2 == ", stop="\n", max_new_tokens=8).n_tokens >= 1
    assert sv.load_model(device="auto").device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="dtype"):
        sv.load_model(dtype="int8")
    with pytest.raises(ValueError, match="device"):
        sv.load_model(device="warp9")
