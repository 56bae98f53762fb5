"""The step window of ``--steps A:B``: which training steps an analysis looks at."""

from __future__ import annotations

from dataclasses import dataclass

from gradcheck.errors import ConfigError


@dataclass(frozen=True)
class StepWindow:
    """Steps ``first <= step <= last``; ``None`` leaves that side open (both ends inclusive)."""

    first: int | None = None
    last: int | None = None

    def contains(self, step: int) -> bool:
        """True when ``step`` lies inside the window."""
        return (self.first is None or step >= self.first) and (
            self.last is None or step <= self.last
        )

    def __str__(self) -> str:
        first = "" if self.first is None else str(self.first)
        last = "" if self.last is None else str(self.last)
        return f"{first}:{last}"

    @classmethod
    def parse(cls, text: str) -> StepWindow:
        """``"100:500"``, ``"100:"``, ``":500"`` or ``":"``; ConfigError for anything else."""
        first_text, colon, last_text = text.strip().partition(":")
        if not colon:
            raise ConfigError(f"--steps {text!r}: expected A:B, A: or :B (e.g. 100:500)")
        first, last = _bound(first_text, text), _bound(last_text, text)
        if first is not None and last is not None and first > last:
            raise ConfigError(f"--steps {text!r}: the first step is after the last")
        return cls(first, last)


def _bound(part: str, text: str) -> int | None:
    """One side of ``A:B``: an integer step, or ``None`` when empty."""
    part = part.strip()
    if not part:
        return None
    try:
        return int(part)
    except ValueError:
        raise ConfigError(f"--steps {text!r}: {part!r} is not an integer step") from None
