"""The glossary reads for a newcomer: no entry is defined through an entry that is defined through it, the
toolkit's own coinages say so, and borrowed ideas name their source."""
import re
from pathlib import Path

GLOSSARY = Path(__file__).resolve().parents[2] / "sbd_viz" / "GLOSSARY.md"


def entries() -> dict[str, str]:
    text = GLOSSARY.read_text(encoding="utf-8")
    return {m.group(1).strip(): m.group(2)
            for m in re.finditer(r"^### ([^\n]+)\n(.*?)(?=^### |^## |\Z)", text, re.S | re.M)}


def test_block_is_defined_without_its_size():
    block = entries()["block"]
    assert "block size" not in block.lower() and "#block-size" not in block


def test_verified_sbd_draft_and_check_are_not_a_circle():
    e = entries()
    # verified SBD says what it does in plain words; a draft is defined without "check" and "verified decoding"
    assert not re.search(r"\bdrafts?\b|\bcheck", e["verified SBD"].split("Plain SBD")[0], re.I)
    assert not re.search(r"\bcheck|verified decoding", e["draft"], re.I)


COINED = ["verified SBD", "draft", "check", "rollback", "checking-only call", "tree drafting", "uncounted slot",
          "gap-free", "gap fill", "trace", "incoherent commit", "γ ladder and the largest safe γ", "γ range and γ map",
          "GIF export", "suite", "held-out split", "family", "long answers", "context family", "bucket",
          "NTP agreement"]


def test_the_toolkits_own_terms_say_so():
    e = entries()
    unmarked = [term for term in COINED if "**(toolkit" not in e[term]]
    assert not unmarked, f"coined here but not marked (toolkit): {unmarked}"


def test_remasking_credits_remdm_not_llada():
    remask = entries()["remasking"]
    assert "ReMDM" in remask and "2503.00307" in remask
    assert "LLaDA-style" not in remask
