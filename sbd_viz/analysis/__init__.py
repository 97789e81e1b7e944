"""What is measured from traces: gap fills (``gaps``), the suite sweep (``suite_sweep``), evaluation, sweeps over
decoders (both sweeps decode each γ piece once: ``pieces``), the γ ladder and the γ map, divergence from NTP,
incoherent commits, the list tasks' failures ranked (``list_failures``), and the roofline projection to a GPU."""

from .gaps import (
    EVENT_COLUMNS,
    REPORT_COLUMNS,
    events_report,
    gap_fill_events,
    gap_fill_report,
    suspicion,
    teacher_forced_ntp,
)
from .list_failures import LIST_FAILURE_COLUMNS, list_failures
from .suite_sweep import SWEEP_COLUMNS, SweepStopped, gap_free_ablation, sweep

__all__ = [
    "EVENT_COLUMNS",
    "LIST_FAILURE_COLUMNS",
    "REPORT_COLUMNS",
    "SWEEP_COLUMNS",
    "SweepStopped",
    "events_report",
    "gap_fill_events",
    "gap_fill_report",
    "gap_free_ablation",
    "list_failures",
    "suspicion",
    "sweep",
    "teacher_forced_ntp",
]
