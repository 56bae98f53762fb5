"""The sweep view: many runs judged as one experiment (issue 20).

:func:`summarize` turns the run reports into a :class:`~gradcheck.model.Sweep`: how many runs
have each verdict (a run's verdict is its worst parameter's), every run ranked by its worst
finding, and for each hyperparameter with two values or more, how it relates to the verdicts.
A run's hyperparameters are those it logged with the HParams plugin, then those its directory
name carries (:mod:`gradcheck.verdicts.run_names`) under names it did not log.

A relation is stated only with its numbers. For each verdict among the runs' flags (and
``finding``: any verdict but ok), the runs that have it are compared with a hyperparameter's
values: when they are exactly the runs at or above a value (at or below it, or with one value)
the split is clean ("all 4 runs with lr >= 0.4 exploded; none of the 6 below did"). A
hyperparameter without a clean split for any verdict gets the rate of runs with a finding per
value (four values or fewer) or on each side of its best split. A text hyperparameter with a
different value in every run (an id) relates to nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from gradcheck.model import (
    RUN_VERDICTS,
    VERDICTS,
    HParamGroup,
    HParamRelation,
    HParamSource,
    HParamValue,
    RunReport,
    RunVerdict,
    Sweep,
    SweepRun,
)
from gradcheck.verdicts.registry import ENTRIES, FINDINGS, OK, UNJUDGED
from gradcheck.verdicts.run_names import name_components, name_hparams

AUTO_HPARAM_RUNS = 3
"""The view is shown by itself for at least this many runs that carry a hyperparameter with
two values or more: three runs are the fewest whose values can fall on both sides of a split
with a third to confirm it (a 5-run learning-rate sweep, two of its runs exploding, got no view
at 6: issue 32). Runs whose names carry no hyperparameter (``sample_runs``) never count."""
AUTO_RUNS = 12
"""... or for this many runs of any kind: past a dozen per-run sections (5 to 40 lines each in
the table) nobody reads them first. Fewer unrelated runs (``sample_runs``' 7 examples) are read
run by run, and their report stays as it was."""
MAX_VALUE_GROUPS = 4  # rates per value up to this many values, else on each side of a split
FINDING = "finding"
PHRASES: dict[str, str] = {
    **{entry.name: entry.phrase for entry in ENTRIES if entry.phrase},
    FINDING: "had a finding",
}


def run_hparams(runs: Sequence[RunReport]) -> list[dict[str, HParamValue]]:
    """Each run's hyperparameters: logged ones, then those of its name it did not log."""
    named = [name_hparams(parts) for parts in name_components([run.run for run in runs])]
    return [{**names, **run.hparams} for run, names in zip(runs, named, strict=True)]


def varying(hparams: Sequence[Mapping[str, HParamValue]]) -> list[str]:
    """The names with two values or more among the runs, in name order."""
    values: dict[str, set[tuple[bool, HParamValue]]] = {}
    for found in hparams:
        for name, value in found.items():
            values.setdefault(name, set()).add(_key(value))
    return sorted(name for name, seen in values.items() if len(seen) >= 2)


def looks_like_sweep(runs: Sequence[RunReport]) -> bool:
    """Whether to show the view unasked (:data:`AUTO_HPARAM_RUNS`, :data:`AUTO_RUNS`)."""
    if len(runs) >= AUTO_RUNS:
        return True
    if len(runs) < AUTO_HPARAM_RUNS:
        return False
    hparams = run_hparams(runs)
    names = set(varying(hparams))
    return sum(bool(names & found.keys()) for found in hparams) >= AUTO_HPARAM_RUNS


def summarize(runs: Sequence[RunReport]) -> Sweep:
    """The sweep of ``runs`` (in report order)."""
    hparams = run_hparams(runs)
    entries = [_entry(run, found) for run, found in zip(runs, hparams, strict=True)]
    counts: dict[str, int] = dict.fromkeys(RUN_VERDICTS, 0)
    for entry in entries:
        counts[entry.verdict] += 1
    ranking = sorted(
        entries,
        key=lambda e: (
            RUN_VERDICTS.index(e.verdict),
            -e.severity,
            -e.findings,
            e.first_bad_step if e.first_bad_step is not None else float("inf"),
        ),
    )
    names = varying(hparams)
    logged = {name for run in runs for name in run.hparams}
    sources: dict[str, HParamSource] = {
        name: "logged" if name in logged else "run name" for name in names
    }
    judged = [entry for entry in entries if entry.verdict != UNJUDGED]
    relations = [rel for name in names for rel in relations_of(name, judged)]
    # clean splits first, then by name, the split that holds the most runs first
    relations.sort(key=lambda rel: (rel.kind == "rates", rel.hparam, -rel.groups[0].matching))
    return Sweep(
        runs=len(runs),
        counts=counts,
        ranking=tuple(ranking),
        hparams=sources,
        relations=tuple(relations),
    )


def _entry(run: RunReport, hparams: dict[str, HParamValue]) -> SweepRun:
    findings = [layer for layer in run.layers if layer.verdict != OK]
    worst = min(
        findings, key=lambda layer: (VERDICTS.index(layer.verdict), -layer.severity), default=None
    )
    flags = {flag for layer in run.layers for flag in layer.flags}
    verdict: RunVerdict = UNJUDGED if not run.judgeable or not run.layers else OK
    if worst is not None:
        verdict = worst.verdict
    return SweepRun(
        run=run.run,
        verdict=verdict,
        flags=tuple(v for v in VERDICTS if v in flags),
        findings=len(findings),
        worst=None if worst is None else worst.name,
        first_bad_step=None if worst is None else worst.first_bad_step,
        severity=0.0 if worst is None else float(worst.severity),
        hparams=hparams,
    )


def relations_of(name: str, runs: Sequence[SweepRun]) -> list[HParamRelation]:
    """The clean relations of hyperparameter ``name`` with each verdict, else its rates."""
    having = [run for run in runs if name in run.hparams and _comparable(run.hparams[name])]
    values = [run.hparams[name] for run in having]
    if len({_key(value) for value in values}) < 2:
        return []
    numeric = all(_is_number(value) for value in values)
    if not numeric and len({_key(value) for value in values}) == len(values):
        return []  # a text value per run: a name or an id, not a setting
    found: list[HParamRelation] = []
    seen: list[list[bool]] = []
    for verdict in [*FINDINGS, FINDING]:
        marks = [_has(run, verdict) for run in having]
        if not any(marks) or all(marks) or marks in seen:
            continue  # no run, every run, or the same runs as a more telling verdict
        seen.append(marks)
        relation = (_clean_split if numeric else _clean_value)(name, verdict, values, marks)
        if relation is not None:
            found.append(relation)
    if found or not seen:
        return found
    marks = [_has(run, FINDING) for run in having]
    if numeric and len({_key(v) for v in values}) > MAX_VALUE_GROUPS:
        return [_best_split(name, values, marks)]
    return [_value_rates(name, values, marks)]


def _has(run: SweepRun, verdict: str) -> bool:
    return run.findings > 0 if verdict == FINDING else verdict in run.flags


def _clean_split(
    name: str, verdict: str, values: list[HParamValue], marks: list[bool]
) -> HParamRelation | None:
    """``at_least`` or ``at_most`` when the marked runs are exactly the top or the bottom."""
    numbers = [float(value) for value in values]
    marked = [x for x, mark in zip(numbers, marks, strict=True) if mark]
    others = [x for x, mark in zip(numbers, marks, strict=True) if not mark]
    phrase = PHRASES[verdict]
    if min(marked) > max(others):
        threshold = min(marked)
        return _relation(name, verdict, "at_least", threshold, None, [
            HParamGroup(f">= {_shown(threshold)}", len(marked), len(marked)),
            HParamGroup(f"< {_shown(threshold)}", len(others), 0),
        ], f"{_all(len(marked))} with {name} >= {_shown(threshold)} {phrase}; "
           f"{_none(len(others), 'below')}")  # fmt: skip
    if max(marked) < min(others):
        threshold = max(marked)
        return _relation(name, verdict, "at_most", threshold, None, [
            HParamGroup(f"<= {_shown(threshold)}", len(marked), len(marked)),
            HParamGroup(f"> {_shown(threshold)}", len(others), 0),
        ], f"{_all(len(marked))} with {name} <= {_shown(threshold)} {phrase}; "
           f"{_none(len(others), 'above')}")  # fmt: skip
    return None


def _clean_value(
    name: str, verdict: str, values: list[HParamValue], marks: list[bool]
) -> HParamRelation | None:
    """``value`` when the marked runs are exactly those with one value."""
    marked = {_key(v) for v, mark in zip(values, marks, strict=True) if mark}
    if len(marked) != 1:
        return None
    value = next(v for v, mark in zip(values, marks, strict=True) if mark)
    if any(not mark and _key(v) == _key(value) for v, mark in zip(values, marks, strict=True)):
        return None
    hits, rest = sum(marks), len(marks) - sum(marks)
    return _relation(name, verdict, "value", None, value, [
        HParamGroup(_shown(value), hits, hits),
        HParamGroup(f"other than {_shown(value)}", rest, 0),
    ], f"{_all(hits)} with {name} = {_shown(value)} {PHRASES[verdict]}; "
       f"{_none(rest, 'others')}")  # fmt: skip


def _value_rates(name: str, values: list[HParamValue], marks: list[bool]) -> HParamRelation:
    """The share of runs with a finding for each value, in value order."""
    groups: dict[tuple[bool, HParamValue], list[bool]] = {}
    shown: dict[tuple[bool, HParamValue], HParamValue] = {}
    for value, mark in zip(values, marks, strict=True):
        groups.setdefault(_key(value), []).append(mark)
        shown.setdefault(_key(value), value)
    order = sorted(groups, key=_sort_key)
    parts = [HParamGroup(_shown(shown[k]), len(groups[k]), sum(groups[k])) for k in order]
    rates = ", ".join(f"{g.matching} of {g.runs} with {name} = {g.label}" for g in parts)
    return _relation(name, FINDING, "rates", None, None, parts,
                     f"runs that {PHRASES[FINDING]}: {rates}")  # fmt: skip


def _best_split(name: str, values: list[HParamValue], marks: list[bool]) -> HParamRelation:
    """The threshold with the fewest runs on the wrong side (findings above it, or below it;
    the lowest such threshold), and the rate of findings on each side. One pass over the
    runs in value order: a random search of thousands of distinct values stays linear."""
    ordered = sorted(zip((float(value) for value in values), marks, strict=True))
    total, marked_total = len(ordered), sum(marks)
    best: tuple[int, int, int] | None = None  # wrong, runs below, marked below
    marked_below = 0
    for below, (number, mark) in enumerate(ordered):
        if below and number != ordered[below - 1][0]:
            marked_above = marked_total - marked_below
            unmarked_above = total - below - marked_above
            wrong = min(unmarked_above + marked_below, marked_above + (below - marked_below))
            if best is None or wrong < best[0]:
                best = (wrong, below, marked_below)
        marked_below += mark
    assert best is not None  # two values or more
    _, below, marked_below = best
    threshold = ordered[below][0]
    above, marked_above = total - below, marked_total - marked_below
    return _relation(name, FINDING, "rates", threshold, None, [
        HParamGroup(f">= {_shown(threshold)}", above, marked_above),
        HParamGroup(f"< {_shown(threshold)}", below, marked_below),
    ], f"{marked_above} of {above} runs with {name} >= {_shown(threshold)} "
       f"{PHRASES[FINDING]}; {marked_below} of the {below} below")  # fmt: skip


def _relation(
    name: str,
    verdict: str,
    kind: str,
    threshold: float | None,
    value: HParamValue | None,
    groups: list[HParamGroup],
    text: str,
) -> HParamRelation:
    return HParamRelation(name, verdict, kind, threshold, value, tuple(groups), text)  # type: ignore[arg-type]


def _all(count: int) -> str:
    return {1: "the one run", 2: "both runs"}.get(count, f"all {count} runs")


def _none(count: int, where: str) -> str:
    return (
        f"the one {'other' if where == 'others' else where} did not"
        if count == 1
        else (f"none of the {count} {where} did")
    )


def _comparable(value: HParamValue) -> bool:
    """Not NaN (a logged NaN has no place among the values)."""
    return value == value


def _is_number(value: HParamValue) -> bool:
    return isinstance(value, float | int) and not isinstance(value, bool)


def _key(value: HParamValue) -> tuple[bool, HParamValue]:
    """A value as a set member: ``True`` and ``1.0`` apart, ``2`` and ``2.0`` together."""
    return (type(value) is bool, value)


def _sort_key(key: tuple[bool, HParamValue]) -> tuple[int, float, str]:
    is_bool, value = key
    if _is_number(value) and not is_bool:
        return (0, float(value), "")
    return (1, 0.0, str(value))


def _shown(value: HParamValue) -> str:
    """``0.4``, ``1``, ``1e-05``, ``adam``, ``true``."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float | int):
        return f"{value:g}"
    return value
