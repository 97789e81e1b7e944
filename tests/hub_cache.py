"""A Hugging Face cache in the Hub's own layout, written by hand from local model folders, for the tests that load a
model by its Hub id with HF_HUB_OFFLINE=1: ``models--{owner}--{name}/blobs/<sha256>`` holds each file once,
``snapshots/<commit>/<file>`` links to its blob, and ``refs/<branch or tag>`` names the commit, as huggingface_hub's
own downloads leave them (its cache documentation, "How the cache is structured")."""

import hashlib
import os
import shutil
from pathlib import Path


def add_snapshot(cache: Path, repo_id: str, folder: Path, refs=("main",), commit: str | None = None) -> str:
    """Put every file of ``folder`` into ``cache`` as ``repo_id``'s snapshot at ``commit`` (default: a hash of the
    files), named by each of ``refs``; returns the commit."""
    owner, name = repo_id.split("/")
    repo = cache / f"models--{owner}--{name}"
    files = sorted(p for p in Path(folder).iterdir() if p.is_file())
    digest = hashlib.sha1()
    for path in files:
        digest.update(path.name.encode() + hashlib.sha256(path.read_bytes()).digest())
    commit = commit or digest.hexdigest()  # 40 hex digits, as a git commit
    snap = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True, exist_ok=True)
    snap.mkdir(parents=True, exist_ok=True)
    for path in files:
        blob = repo / "blobs" / hashlib.sha256(path.read_bytes()).hexdigest()
        if not blob.exists():
            shutil.copyfile(path, blob)
        link = snap / path.name
        if not link.exists():
            os.symlink(os.path.relpath(blob, snap), link)
    (repo / "refs").mkdir(exist_ok=True)
    for ref in refs:
        (repo / "refs" / ref).write_text(commit)
    return commit
