"""What every format shows of a sweep (``Report.sweep``), above the per-run sections.

The words and cells are built here once, unescaped (run and hyperparameter names and values
come from the logs); each format escapes them its own way (:mod:`gradcheck.report.escape`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from gradcheck.events.storage import is_url
from gradcheck.model import RUN_VERDICTS, HParamValue, Sweep, SweepRun
from gradcheck.report.view import plural
from gradcheck.verdicts.run_names import name_components

MAX_RANKED = 10
"""Runs listed in the ranking of the human formats (table, Markdown, GitHub, JUnit); the rest
are counted. JSON, CSV and HTML carry every run."""


def sweep_headline(sweep: Sweep) -> str:
    """``sweep of 10 runs under runs/: 2 nan · 2 exploding · 6 ok``."""
    counts = [f"{sweep.counts[v]} {v}" for v in RUN_VERDICTS if sweep.counts.get(v)]
    root = sweep_root(sweep)
    under = f" under {root}" if root else ""
    return f"sweep of {plural(sweep.runs, 'run')}{under}: {' · '.join(counts) or 'no runs'}"


def sweep_root(sweep: Sweep) -> str:
    """The directory the ranked runs' names are relative to (with a trailing separator), or
    ``""`` when they share none."""
    runs = [run.run for run in sweep.ranking]
    if not runs:
        return ""
    names = name_components(runs)
    first = _normal(runs[0])
    separator = "/" if is_url(first) else os.sep
    parts = first.split(separator)
    root = separator.join(parts[: len(parts) - len(names[0])])
    return root + separator if root else ""


def _normal(run: str) -> str:
    """A run's path as its name is cut: normalised, but a URL as given (``s3://`` kept)."""
    return run if is_url(run) else os.path.normpath(run)


def hparams_line(sweep: Sweep) -> str:
    """``hyperparameters: bs, lr (logged); seed (from run names)``, or that there is none."""
    if not sweep.hparams:
        return "no hyperparameter varies (HParams plugin, run names)"
    by_source: dict[str, list[str]] = {}
    for name, source in sweep.hparams.items():
        by_source.setdefault(source, []).append(name)
    parts = [
        f"{', '.join(names)} ({'logged' if source == 'logged' else 'from run names'})"
        for source, names in by_source.items()
    ]
    return "hyperparameters: " + "; ".join(parts)


def relation_lines(sweep: Sweep) -> list[str]:
    """Each relation in words, clean splits first."""
    return [relation.text for relation in sweep.relations]


RANK_HEADER = ("#", "verdict", "run", "worst parameter", "first bad", "hyperparameters")


def rank_header(sweep: Sweep) -> tuple[str, ...]:
    """The ranking's column names (no hyperparameter column when none varies)."""
    return RANK_HEADER if sweep.hparams else RANK_HEADER[:-1]


@dataclass(eq=False)
class RankRow:
    """One row of the ranking, as text cells (unescaped)."""

    rank: str
    verdict: str
    run: str
    worst: str
    first_bad: str
    hparams: str

    def cells(self, sweep: Sweep) -> tuple[str, ...]:
        """The cells under :func:`rank_header`."""
        cells = (self.rank, self.verdict, self.run, self.worst, self.first_bad, self.hparams)
        return cells[: len(rank_header(sweep))]


def ranking_rows(sweep: Sweep, limit: int | None = MAX_RANKED) -> tuple[list[RankRow], int]:
    """The ranked runs (at most ``limit``; None: all) and how many were left out."""
    shown = sweep.ranking if limit is None else sweep.ranking[:limit]
    root = sweep_root(sweep)
    rows = [_row(at, run, sweep, root) for at, run in enumerate(shown, 1)]
    return rows, len(sweep.ranking) - len(shown)


def _row(rank: int, run: SweepRun, sweep: Sweep, root: str) -> RankRow:
    name = _normal(run.run)
    return RankRow(
        rank=str(rank),
        verdict=run.verdict,
        run=name[len(root) :] if root and name.startswith(root) else run.run,
        worst=run.worst or "",
        first_bad="" if run.first_bad_step is None else str(run.first_bad_step),
        hparams=hparams_text(run, sweep),
    )


def hparams_text(run: SweepRun, sweep: Sweep) -> str:
    """``bs=32 lr=1``: the run's values of the sweep's hyperparameters (those that vary)."""
    return " ".join(
        f"{name}={shown_value(run.hparams[name])}" for name in sweep.hparams if name in run.hparams
    )


def shown_value(value: HParamValue) -> str:
    """``0.4``, ``1``, ``1e-05``, ``adam``, ``true``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float | int):
        return f"{value:g}"
    return value


def sweep_lines(sweep: Sweep) -> list[str]:
    """The whole view as lines of text (the CI formats): headline, hyperparameters, relations,
    then one line per ranked run (at most :data:`MAX_RANKED`)."""
    rows, left_out = ranking_rows(sweep)
    lines = [sweep_headline(sweep), hparams_line(sweep), *relation_lines(sweep)]
    lines += [ranking_line(row) for row in rows]
    return lines + ([left_out_line(left_out)] if left_out else [])


def ranking_line(row: RankRow) -> str:
    """``1. nan: lr_2.0_bs64, 0.weight from step 20 (bs=64 lr=2)``."""
    text = f"{row.rank}. {row.verdict}: {row.run}"
    if row.worst:
        text += f", {row.worst}"
        if row.first_bad:
            text += f" from step {row.first_bad}"
    return text + (f" ({row.hparams})" if row.hparams else "")


def left_out_line(left_out: int) -> str:
    """``… 3 more runs (--format json lists all)``."""
    return f"… {plural(left_out, 'more run')} (--format json lists all)"
