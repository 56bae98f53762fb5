"""``gradcheck.steps``, as the docs show it: the step window lives in ``events/steps.py``."""

from gradcheck.events.steps import StepWindow

__all__ = ["StepWindow"]
