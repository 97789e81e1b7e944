"""The pinned package lists agree, and the front-door files exist."""

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _pins(path: Path) -> set[str]:
    lines = (ln.split("#")[0].strip() for ln in path.read_text().splitlines())
    return {ln for ln in lines if ln}


def test_environment_yml_names_the_same_pins_as_requirements():
    env = set()
    for line in (ROOT / "environment.yml").read_text().splitlines():
        s = line.strip()
        if s.startswith("- ") and "==" in s:
            env.add(s[2:].strip())
    reqs = _pins(ROOT / "requirements.txt") | _pins(ROOT / "requirements-dev.txt")
    assert env == reqs, f"only in environment.yml: {env - reqs}; only in requirements: {reqs - env}"
    assert all("==" in r for r in reqs), "every requirement is pinned"
    assert "torch==2.13.0" in reqs


def test_fixed_top_level_exists():
    for name in ("sbd_viz", "notebooks", "tests", "app.py", "environment.yml", "README.md", ".ci/run"):
        assert (ROOT / name).exists(), name
