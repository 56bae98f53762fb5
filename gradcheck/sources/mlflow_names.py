"""Names of MLflow runs: ``<store>/<experiment>/<run name>``, told apart when they repeat.

MLflow names a run (``run_name``, the ``mlflow.runName`` tag) but does not require the name to
be unique; gradcheck names a run by it, and a name that repeats within an experiment gets the
start of its run id: ``brave-fox (3f2a9c01)``.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence


def run_paths(store: str, runs: Sequence[tuple[str, str, str]]) -> list[str]:
    """The path naming each of ``runs`` (``(experiment name, run name, run id)``) in the
    store at ``store``, in order."""
    counts = Counter((experiment, name) for experiment, name, _ in runs)
    return [
        os.path.join(store, experiment or "?", _label(name, run_id, counts[experiment, name] > 1))
        for experiment, name, run_id in runs
    ]


def _label(name: str, run_id: str, repeated: bool) -> str:
    if not name:
        return run_id
    return f"{name} ({run_id[:8]})" if repeated else name
