"""Domain exceptions raised by the core; the CLI turns each into one line and an exit status."""

from __future__ import annotations


class GradcheckError(Exception):
    """Base class: an error the user can act on (message says what is wrong and what to do)."""


class InputError(GradcheckError):
    """The input cannot be analysed: missing path, no event files, nothing readable."""


class ConfigError(GradcheckError):
    """A configuration file or option value is invalid."""
