"""What is measured from traces: gap fills (``gaps``), the suite sweep (``suite_sweep``), evaluation, sweeps over
decoders, the γ ladder and the γ map, divergence from NTP, incoherent commits, and the roofline projection to a GPU."""

from .gaps import EVENT_COLUMNS, REPORT_COLUMNS, events_report, gap_fill_events, gap_fill_report, suspicion, \
    teacher_forced_ntp
from .suite_sweep import SWEEP_COLUMNS, gap_free_ablation, sweep

__all__ = ["EVENT_COLUMNS", "REPORT_COLUMNS", "SWEEP_COLUMNS", "events_report", "gap_fill_events",
           "gap_fill_report", "gap_free_ablation", "suspicion", "sweep", "teacher_forced_ntp"]
