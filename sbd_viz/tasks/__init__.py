"""Prompt suites: the verifiable asserts suite (``asserts``: "pyasserts", its held-out split and scorer) and the
list tasks (``lists``)."""

from . import asserts, lists
from .asserts import (
    CONTEXT_FAMILIES,
    FAMILIES,
    LENGTH_BUCKETS,
    SUITE_SEED,
    SuiteItem,
    document_buckets,
    in_document,
    item_in_prompt,
    load_suite,
    score,
)

__all__ = [
    "CONTEXT_FAMILIES",
    "FAMILIES",
    "LENGTH_BUCKETS",
    "SUITE_SEED",
    "SuiteItem",
    "asserts",
    "document_buckets",
    "in_document",
    "item_in_prompt",
    "lists",
    "load_suite",
    "score",
]
