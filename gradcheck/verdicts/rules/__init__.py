"""One rule per verdict: a parameter's signals and the run's context -> a finding or None."""

from gradcheck.verdicts.rules.base import (
    Excuse,
    Finding,
    RunContext,
    early_and_late,
    gradient_level,
    rms_early_and_late,
)
from gradcheck.verdicts.rules.exploding import align_event_onsets, find_exploding, grad_to_weight
from gradcheck.verdicts.rules.nan import find_nan, rank_nan
from gradcheck.verdicts.rules.slow import find_slow
from gradcheck.verdicts.rules.static import find_static
from gradcheck.verdicts.rules.vanishing import find_vanishing

__all__ = [
    "align_event_onsets",
    "Excuse",
    "Finding",
    "RunContext",
    "early_and_late",
    "find_exploding",
    "find_nan",
    "find_slow",
    "find_static",
    "find_vanishing",
    "grad_to_weight",
    "gradient_level",
    "rank_nan",
    "rms_early_and_late",
]
