"""Exit statuses of the ``gradcheck`` command, defined once (README, docs/reference)."""

from __future__ import annotations

from enum import IntEnum


class ExitStatus(IntEnum):
    OK = 0  # no finding in --fail-on
    FINDINGS = 1  # at least one finding in --fail-on
    INPUT_ERROR = 2  # usage, input or output error: bad option, missing path, nothing readable
    INTERNAL_ERROR = 3  # a bug in gradcheck
    NOTHING_TO_JUDGE = 4  # the logs hold no weight or gradient signal: silence is not success
    INTERRUPTED = 130  # SIGINT (Ctrl-C): 128 + 2, the shell's convention for a signal
    TERMINATED = 143  # SIGTERM: 128 + 15 (``kill``, ``timeout``, a CI job cancelled)
