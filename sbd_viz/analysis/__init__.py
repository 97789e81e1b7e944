"""What is measured from traces: gap fills and the suite sweep (``gaps``), evaluation, sweeps over decoders, the
γ ladder, divergence from NTP, incoherent commits, and the roofline projection to a GPU."""

from .gaps import (EVENT_COLUMNS, REPORT_COLUMNS, SWEEP_COLUMNS, events_report, gap_fill_events, gap_fill_report,
                   gap_free_ablation, suspicion, sweep, teacher_forced_ntp)

__all__ = ["EVENT_COLUMNS", "REPORT_COLUMNS", "SWEEP_COLUMNS", "events_report", "gap_fill_events",
           "gap_fill_report", "gap_free_ablation", "suspicion", "sweep", "teacher_forced_ntp"]
