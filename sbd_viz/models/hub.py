"""A model by its Hugging Face Hub id (``"HuggingFaceTB/SmolLM2-135M-Instruct"``): its snapshot in the Hugging Face
cache, fetched by ``huggingface_hub`` when the Hub is reachable and allowed (``HF_HUB_OFFLINE`` unset), read from the
cache alone when it is not. ``sv.load_model`` then opens the snapshot's folder as it opens any local folder."""

from __future__ import annotations

import os
import re
from pathlib import Path

REPO_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")  # owner/name, as the Hub spells a repository
# what a model needs: weights, config, tokenizer; never pickled weights (*.bin, *.pt) nor other formats' copies
FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.tiktoken", "*.jinja"]


def is_repo_id(source) -> bool:
    """Whether ``source`` names a Hub repository (``owner/name``) and no local path of that name exists."""
    return isinstance(source, str) and bool(REPO_ID.match(source)) and not Path(source).exists()


def offline() -> bool:
    """``HF_HUB_OFFLINE`` as the user set it when the model is loaded (read now, not when huggingface_hub was
    imported)."""
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on")


def snapshot(repo_id: str, revision: str | None = None) -> Path:
    """The folder of ``repo_id``'s snapshot at ``revision`` (None: its main branch) in the Hugging Face cache,
    downloaded first unless offline. Refused by name, with how to fetch it, when the cache does not hold it."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError

    if revision is not None and (not isinstance(revision, str) or not revision.strip()):
        raise ValueError(f"revision: expected a branch, tag or commit of {repo_id!r}, got {revision!r}")
    try:
        folder = snapshot_download(repo_id, revision=revision, allow_patterns=FILES, local_files_only=offline())
    except LocalEntryNotFoundError:
        at = "" if revision is None else f" at revision {revision!r}"
        raise FileNotFoundError(
            f"path: {repo_id!r}{at} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; fetch it where the "
            f"Hub is reachable (huggingface-cli download {repo_id}), or unset HF_HUB_OFFLINE (no local folder has that "
            "name either)"
        ) from None
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise FileNotFoundError(f"path: {repo_id!r} is neither a local folder nor a Hub model ({exc})") from None
    return Path(str(folder))
