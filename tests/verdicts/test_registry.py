"""One registry entry per verdict (``gradcheck/verdicts/registry.py``): every verdict has one,
every place that depends on which verdict it is reads it from there, and nothing else in the
package spells a verdict's name (the rule files spell their own verdicts' in their findings)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path
from typing import get_args

import pytest

from gradcheck.model import RUN_VERDICTS, VERDICTS
from gradcheck.report.html import STYLE
from gradcheck.report.markdown import MARKS
from gradcheck.report.table import VERDICT_STYLES
from gradcheck.verdicts import gate, passes, registry
from gradcheck.verdicts.config import FAIL_ON_CHOICES
from gradcheck.verdicts.rules.base import BASE_SEVERITY
from gradcheck.verdicts.sweep import PHRASES
from tests.support.paths import REPO

PACKAGE = REPO / "gradcheck"
OWNERS = ("verdicts/registry.py", "verdicts/rules/")
"""Where a verdict's name may be written: its entry, and the rules that find it."""
NOT_A_VERDICT = {("report/numbers.py", "nan")}
"""Literals that are a verdict's name by coincidence: a non-finite number's text."""


def verdict_literals(path: Path) -> list[tuple[int, str]]:
    """The string constants of ``path`` that are a verdict's name (``float("nan")``'s
    argument apart), with their line."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    numbers = {
        id(argument)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
        if node.func.id == "float"
        for argument in node.args
    }
    return sorted(
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and node.value in RUN_VERDICTS
        if id(node) not in numbers
    )


def test_no_verdict_name_is_written_outside_its_entry_and_its_rule() -> None:
    """A place that spelled ``"exploding"`` (a colour table, a gate default, a pass between
    rules) would not follow a new or renamed verdict: it must read the registry."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        if where.startswith(OWNERS):
            continue
        found += [
            f"{where}:{line}: {name!r}"
            for line, name in verdict_literals(path)
            if (where, name) not in NOT_A_VERDICT
        ]
    assert found == []


def test_the_scan_finds_a_verdict_spelled_in_a_module(tmp_path: Path) -> None:
    module = tmp_path / "colours.py"
    module.write_text('STYLES = {"exploding": "red"}\nx = float("nan")\nok = "ok"\n')
    assert verdict_literals(module) == [(1, "exploding"), (3, "ok")]


def test_every_verdict_has_one_entry_in_rank_order() -> None:
    names = [entry.name for entry in registry.ENTRIES]
    assert names == list(get_args(registry.Verdict)) == list(VERDICTS)
    assert len(set(names)) == len(names)
    severities = [entry.severity for entry in registry.ENTRIES]
    assert severities == sorted(severities, reverse=True)
    assert len(set(severities)) == len(severities)
    assert (*VERDICTS, registry.UNJUDGED) == RUN_VERDICTS


@pytest.mark.parametrize("entry", registry.ENTRIES, ids=lambda entry: entry.name)
def test_each_entry_says_everything_the_reports_show(entry: registry.Entry) -> None:
    assert entry.style and entry.mark and entry.css
    assert bool(entry.phrase) == (entry.name != registry.OK)
    assert entry.rule or not entry.phase


@pytest.mark.parametrize(
    "entry", [e for e in registry.ENTRIES if e.rule], ids=lambda entry: entry.name
)
def test_each_rule_lives_in_a_rule_file_and_runs_in_its_pass(entry: registry.Entry) -> None:
    module, _, name = entry.rule.rpartition(".")
    rule = getattr(importlib.import_module(f"gradcheck.verdicts.rules.{module}"), name)
    assert callable(rule)
    phases = [e.phase for e in registry.ENTRIES if e.rule == entry.rule and e.phase]
    assert len(phases) == 1  # run once, in its own verdict's pass (overflow: nan's)
    assert rule in passes.rules(phases[0])


def test_the_places_that_depend_on_a_verdict_come_from_the_registry() -> None:
    entries = registry.ENTRIES
    assert {e.name: e.mark for e in entries} == MARKS
    assert {e.name: e.style for e in entries} == VERDICT_STYLES
    assert {e.name: e.severity for e in entries} == BASE_SEVERITY
    assert {v: PHRASES[v] for v in registry.FINDINGS} == {e.name: e.phrase for e in entries[:-1]}
    assert gate.DEFAULT_FAIL_ON == "nan,exploding,diverging"
    assert gate.parse_fail_on(gate.DEFAULT_FAIL_ON) == {e.name for e in entries if e.fail_on}
    assert gate.parse_fail_on("any") == set(registry.FINDINGS)
    assert (*registry.FINDINGS, "any", "none") == FAIL_ON_CHOICES
    assert {"nan", "exploding"} == registry.BLOW_UPS
    rules = [
        line
        for line in STYLE.splitlines()
        if line.startswith(tuple(f".{v}{{" for v in RUN_VERDICTS))
    ]
    assert rules == [f".{e.name}{{{e.css}}}" for e in entries] + [
        f".{registry.UNJUDGED}{{{registry.UNJUDGED_CSS}}}"
    ]
