"""The plain data of a decode and what reads or writes it: the trace (``data``), its file (``file``), its words
(``words``), the commits an output holds (``commits``), tokens as the views label them (``labels``), the argument
checks (``checks``) and peers' formats (``peer_formats``). It imports nothing of the package outside this folder."""

from .data import (
    DRAFTS_CHECKED,
    SCHEMA,
    SCHEMA_VERSION,
    Alternative,
    Candidate,
    Check,
    Commit,
    Draft,
    GapFill,
    Pass,
    Rollback,
    SlotView,
    Step,
    Trace,
    TraceFormatError,
    drafts_checked,
)

__all__ = [
    "DRAFTS_CHECKED",
    "SCHEMA",
    "SCHEMA_VERSION",
    "Alternative",
    "Candidate",
    "Check",
    "Commit",
    "Draft",
    "GapFill",
    "Pass",
    "Rollback",
    "SlotView",
    "Step",
    "Trace",
    "TraceFormatError",
    "drafts_checked",
]
