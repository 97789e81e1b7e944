"""The side-by-side training scripts (bench/*.sh sourcing bench/train_arm.sh) start the arms they say,
with flags `sbd-viz train` accepts, without training anything: each script runs in a scratch tree where
`.venv/bin/sbd-viz` and `.venv/bin/python` only write down their arguments."""

import argparse
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from sbd_viz.train import add_arguments

ROOT = Path(__file__).resolve().parent.parent
RECORD = """#!/usr/bin/env bash
# writes its arguments down, one file per call (two arms start at once: one shared file could interleave);
# a stubbed training run also leaves the final/ folder a real one would
mkdir -p calls
printf '%s\\n' "$(basename "$0")" "$@" | python3 -c 'import json,sys; print(json.dumps(sys.stdin.read().splitlines()))' \\
  > "$(mktemp calls/XXXXXXXX)"
if [ "$(basename "$0")" = sbd-viz ]; then
  out=$(printf '%s\\n' "$@" | grep -A1 -x -- --out | tail -1)
  mkdir -p "$out/final" "$out/checkpoint"
fi
"""
# script -> (arguments, the arms (runs/ folders) it trains, whether a re-run keeps finished arms)
SCRIPTS = {
    "ctx_heavy.sh": ([], ["p_v36", "p_spec"], True),
    "ctx_add_alone.sh": ([], ["add_alone_d1", "add_alone_d2", "add_alone_d1_b", "add_alone_d2_b"], True),
    "upscale_equal_time.sh": (["5", "--widen 384"], ["upscale_same", "upscale_widen384"], False),
    "curriculum_equal_time.sh": (["5", "runs/start"], ["lookup_control", "lookup_parts"], False),
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(exit_on_error=False)
    add_arguments(p)
    return p


def _run(tree: Path, script: str, args: list[str]) -> list[list[str]]:
    shutil.rmtree(tree / "calls", ignore_errors=True)
    done = subprocess.run(["bash", f"bench/{script}", *args], cwd=tree, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return [json.loads(path.read_text()) for path in sorted((tree / "calls").glob("*"))]


@pytest.fixture
def tree(tmp_path):
    (tmp_path / "bench").mkdir()
    for script in (*SCRIPTS, "train_arm.sh"):
        shutil.copy(ROOT / "bench" / script, tmp_path / "bench")
    venv = tmp_path / ".venv" / "bin"
    venv.mkdir(parents=True)
    for name in ("sbd-viz", "python"):
        (venv / name).write_text(RECORD)
        (venv / name).chmod(0o755)
    (tmp_path / "models" / "sbd-char-5m").mkdir(parents=True)
    (tmp_path / "runs" / "start").mkdir(parents=True)
    return tmp_path


@pytest.mark.parametrize("script", SCRIPTS)
def test_side_by_side_script_starts_its_arms_with_flags_train_accepts(tree, script):
    args, arms, keeps_finished = SCRIPTS[script]
    if script == "ctx_heavy.sh":  # its second arm starts from the ctx_add_alone specialist
        _run(tree, "ctx_add_alone.sh", [])
    calls = _run(tree, script, args)
    parser = _parser()
    trained = []
    for call in calls:
        if call[0] != "sbd-viz":
            continue
        assert call[1] == "train", call
        cfg = parser.parse_args(call[2:])  # raises on a flag train does not know
        # what every arm shares (bench/train_arm.sh): two arms share the two cores, one thread each
        assert (cfg.seq_len, cfg.batch_size, cfg.threads, cfg.bf16) == (512, 8, 1, False)
        assert cfg.base and cfg.mix and cfg.time_budget_min > 0
        assert (tree / f"{cfg.out}.log").exists(), "each arm logs to runs/OUT.log"
        trained.append(cfg.out.removeprefix("runs/"))
    assert sorted(trained) == sorted(arms)
    rerun = [c for c in _run(tree, script, args) if c[0] == "sbd-viz"]
    assert len(rerun) == (0 if keeps_finished else len(arms))
