"""The JUnit XML format, which GitLab, Jenkins, Azure Pipelines and most CI systems show natively.

One ``<testsuite>`` per run and one ``<testcase>`` per parameter (classname: the run). A
parameter with a flag in ``--fail-on`` gets a ``<failure>`` (type: its verdict; message: its
evidence); findings outside ``--fail-on`` pass, their evidence in ``<system-out>``. What could
not be judged is ``<skipped>``: a parameter logged at fewer than two steps, a run with no
parameter (or nothing to judge: only scalars), and the report's own warnings (a run nothing
could be read from). What a run's logs leave unjudged (its notes) and its warnings are the
suite's ``<system-out>``. The attributes
and elements are those of the common JUnit schema (Jenkins' ``junit-10.xsd``). With the sweep
view on, a first suite ``gradcheck sweep`` without test cases holds it (properties: runs per
verdict, the hyperparameters; ``<system-out>``: the view's lines).

The XML is built with :mod:`xml.etree.ElementTree`, which escapes markup; :func:`xml_text` is
the one place that also replaces the characters XML 1.0 cannot hold at all (control
characters in a tag name), so the document always parses.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from gradcheck.model import LayerResult, Report, RunReport, Sweep, Verdict
from gradcheck.report.escape import terminal_lines
from gradcheck.report.interface import Formatter
from gradcheck.report.numbers import format_steps
from gradcheck.report.sweep_view import sweep_lines
from gradcheck.report.view import finding_lines
from gradcheck.verdicts.gate import fails
from gradcheck.verdicts.registry import OK

NOT_XML = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
"""Characters outside XML 1.0's ``Char`` production."""
COUNTS = ("tests", "failures", "errors", "skipped")


class JunitFormatter(Formatter):
    """JUnit XML, indented, with an XML declaration."""

    def format(self, report: Report) -> str:
        root = ET.Element("testsuites", name="gradcheck")
        suites = [_suite(run, self.options.fail_on) for run in report.runs]
        if report.sweep is not None:
            suites.insert(0, _sweep_suite(report.sweep))
        if report.warnings:
            suites.append(_warnings_suite(report.warnings))
        root.extend(suites)
        _count(root, suites)
        ET.indent(root)
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"


def _suite(run: RunReport, fail_on: frozenset[Verdict]) -> ET.Element:
    suite = _element("testsuite", name=run.run, time="0")
    properties = ET.SubElement(suite, "properties")
    for name, value in (
        ("steps", format_steps(run.steps)),
        ("files", str(len(run.files))),
        ("writers", ", ".join(run.writers)),
    ):
        properties.append(_element("property", name=name, value=value))
    cases = [_case(run, layer, fail_on) for layer in run.layers]
    if not cases:
        why = f"nothing to judge: {run.holds}" if run.holds else "no parameter found in this run"
        case = _element("testcase", name="(no parameters)", classname=run.run, time="0")
        case.append(_element("skipped", message=why))
        cases.append(case)
    suite.extend(cases)
    _count(suite, cases)
    if run.notes or run.warnings:
        _text(ET.SubElement(suite, "system-out"), "\n".join([*run.notes, *run.warnings]))
    return suite


def _sweep_suite(sweep: Sweep) -> ET.Element:
    """The sweep view as a suite without test cases (its runs are the suites after it): the
    runs per verdict and the hyperparameters as properties, the view's lines as its output."""
    suite = _element("testsuite", name="gradcheck sweep", time="0")
    properties = ET.SubElement(suite, "properties")
    properties.append(_element("property", name="runs", value=str(sweep.runs)))
    for verdict, count in sweep.counts.items():
        properties.append(_element("property", name=f"runs.{verdict}", value=str(count)))
    for name, source in sweep.hparams.items():
        properties.append(_element("property", name=f"hparam.{name}", value=source))
    _count(suite, [])
    _text(ET.SubElement(suite, "system-out"), "\n".join(sweep_lines(sweep)))
    return suite


def _case(run: RunReport, layer: LayerResult, fail_on: frozenset[Verdict]) -> ET.Element:
    case = _element("testcase", name=layer.name, classname=run.run, time="0")
    if fails(layer, fail_on):
        failure = _element("failure", type=layer.verdict, message=layer.evidence)
        _text(failure, _details(layer))
        case.append(failure)
    elif layer.verdict != OK:
        _text(ET.SubElement(case, "system-out"), _details(layer))
    elif _unjudged(layer):
        case.append(_element("skipped", message="logged at fewer than 2 steps: not judged"))
    return case


def _details(layer: LayerResult) -> str:
    lines = finding_lines(layer)
    lines += [f"{tag} tag: {value}" for tag, value in (("weight", layer.weight_tag),
              ("gradient", layer.grad_tag)) if value]  # fmt: skip
    return "\n".join(lines)


def _unjudged(layer: LayerResult) -> bool:
    """An ok parameter whose every series was logged at fewer than two steps."""
    logged = [layer.stats.get(key) for key in ("grad_steps", "weight_steps")]
    counts = [int(count) for count in logged if count is not None]
    return bool(counts) and max(counts) < 2


def _warnings_suite(warnings: tuple[str, ...]) -> ET.Element:
    suite = _element("testsuite", name="gradcheck", time="0")
    cases = []
    for warning in warnings:
        case = _element("testcase", name=warning, classname="gradcheck", time="0")
        case.append(_element("skipped", message=warning))
        cases.append(case)
    suite.extend(cases)
    _count(suite, cases)
    return suite


def _count(parent: ET.Element, children: list[ET.Element]) -> None:
    """``tests``, ``failures``, ``errors`` and ``skipped`` of ``parent``: over its testcases, or
    summed over its testsuites."""
    if parent.tag == "testsuites":
        totals = {key: sum(int(suite.get(key, "0")) for suite in children) for key in COUNTS}
    else:
        totals = {
            "tests": len(children),
            "failures": sum(case.find("failure") is not None for case in children),
            "errors": 0,
            "skipped": sum(case.find("skipped") is not None for case in children),
        }
    for key in COUNTS:
        parent.set(key, str(totals[key]))


def _element(tag: str, **attributes: str) -> ET.Element:
    return ET.Element(tag, {key: xml_text(value) for key, value in attributes.items()})


def _text(element: ET.Element, text: str) -> None:
    element.text = xml_text(text)


def xml_text(text: str) -> str:
    """``text`` with control, bidi and invisible characters shown escaped
    (:func:`~gradcheck.report.escape.terminal_lines`) and any other character XML 1.0 cannot
    hold replaced by U+FFFD (ElementTree escapes ``<``, ``&``, quotes and line ends itself)."""
    return NOT_XML.sub("\ufffd", terminal_lines(text))
