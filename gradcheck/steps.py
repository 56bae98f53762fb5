"""``gradcheck.steps``, as the README shows it: the step window lives in ``events/steps.py``."""

from gradcheck.events.steps import StepWindow

__all__ = ["StepWindow"]
