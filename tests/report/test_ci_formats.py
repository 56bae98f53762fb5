"""The CI formats (GitHub workflow commands, JUnit XML) on hand-built reports, and several
reports from one run through ``--report FORMAT:FILE``."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

import pytest

from gradcheck.cli.status import ExitStatus
from gradcheck.model import Report
from gradcheck.report import FormatOptions
from gradcheck.report.escape import terminal_lines
from gradcheck.report.github import GithubFormatter, escape_data, escape_property
from gradcheck.report.junit import JunitFormatter
from gradcheck.verdicts import hints
from gradcheck.verdicts.gate import parse_fail_on
from tests.support.cli import invoke
from tests.support.golden import check_golden
from tests.support.handmade import (
    HOSTILE_RUN,
    HOSTILE_TAG,
    healthy_run,
    hostile_report,
    layer,
    sample_report,
)
from tests.support.synthetic_runs import NAN_FROM, PARAMETERS

COMMAND = re.compile(r"^::(error|warning|notice)( [^:]*)?::(.*)$")


def parse_command(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as GitHub's runner reads it: name, properties, message, unescaped."""
    match = COMMAND.match(line)
    assert match, line
    name, properties, message = match.groups()
    fields = dict(pair.split("=", 1) for pair in (properties or "").strip().split(",") if pair)
    return name, {k: unescape(v) for k, v in fields.items()}, unescape(message)


def unescape(text: str) -> str:
    """The runner's decoding (toolkit ``command.ts``), ``%25`` last."""
    for code, char in (("%0D", "\r"), ("%0A", "\n"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        text = text.replace(code, char)
    return text


# --- GitHub -----------------------------------------------------------------------------------


def test_github_golden() -> None:
    check_golden("report.github.txt", GithubFormatter().format(sample_report()))


def test_github_errors_for_fail_on_and_warnings_for_the_other_findings() -> None:
    lines = GithubFormatter().format(sample_report()).splitlines()
    commands = [parse_command(line) for line in lines]
    findings = [
        (name, props["title"]) for name, props, _ in commands if " in runs/" in props["title"]
    ]
    assert findings == [
        ("error", "gradcheck: nan in runs/troubled"),
        ("error", "gradcheck: exploding in runs/troubled"),
        ("warning", "gradcheck: vanishing in runs/troubled"),
        ("warning", "gradcheck: static in runs/troubled"),
    ]
    _, _, first_message = commands[0]
    assert first_message.splitlines() == [
        "runs/troubled: 1 parameter nan from step 24: fc1.weight",
        "fix: Lower the learning rate or clip the global gradient norm.",  # not a known hint
    ]
    name, _, summary = commands[-1]
    assert name == "notice" and summary.endswith("1 run failing --fail-on nan,exploding,diverging")
    every = GithubFormatter(FormatOptions(fail_on=parse_fail_on("any"))).format(sample_report())
    assert sum(line.startswith("::error ") for line in every.splitlines()) == 4
    none = GithubFormatter(FormatOptions(fail_on=parse_fail_on("none"))).format(sample_report())
    assert not any(line.startswith("::error") for line in none.splitlines())


def many_runs_report(runs: int) -> Report:
    """``runs`` runs, each with 3 NaN parameters (one error annotation each) and one static
    and one vanishing parameter (two warnings), most severe in the last run."""
    reports = []
    for index in range(runs):
        layers = tuple(
            layer(
                f"fc{i}.weight",
                "nan",
                severity=10.0 + index,
                first_bad_step=20 + i,
                depth=i,
                hint=hints.NAN_AFTER_RISE,
            )  # fmt: skip
            for i in range(3)
        ) + (
            layer("bn.weight", "static", severity=1.0, depth=3, hint=hints.STATIC_PLAIN),
            layer("emb.weight", "vanishing", severity=2.0, first_bad_step=0, depth=4),
        )
        reports.append(replace(healthy_run(), run=f"run{index}", layers=layers))
    return Report(version="0.1.0", runs=tuple(reports))


@pytest.mark.parametrize("step_summary", [False, True])
def test_github_annotates_at_most_ten_of_each_level_worst_first_and_says_what_it_left_out(
    step_summary: bool,
) -> None:
    options = FormatOptions(fail_on=parse_fail_on("nan"), step_summary=step_summary)
    commands = [
        parse_command(line)
        for line in GithubFormatter(options).format(many_runs_report(11)).splitlines()
    ]
    levels = [name for name, _, _ in commands]
    assert levels.count("error") == 10 and levels.count("warning") == 10
    assert levels.count("notice") <= 10
    errors = [message for name, _, message in commands if name == "error"]
    # the most severe run first: run10's NaN (severity 20) down to run2's; run1 and run0 left out
    assert [e.split(":")[0] for e in errors[:9]] == [f"run{i}" for i in range(10, 1, -1)]
    assert errors[0].splitlines()[0] == "run10: 3 parameters nan from step 20: fc0.weight, " \
        "fc1.weight, fc2.weight"  # fmt: skip
    assert errors[0].splitlines()[1:] == [
        "gradients grew by orders of magnitude, then overflowed to NaN/Inf",
        "fix: lower the learning rate, clip the global gradient norm, warm up",
    ]
    (left_out,) = [
        m for _, props, m in commands if props["title"] == "gradcheck: more not annotated"
    ]
    # 2 NaN groups (6 findings) and 12 of the 22 warning groups (12 findings) did not fit
    assert left_out.startswith("18 findings not annotated (GitHub shows 10 annotations")
    where = "job summary" if step_summary else "table, markdown or json"
    assert where in left_out
    shown = sum(int(m.split(": ")[1].split()[0]) for n, p, m in commands if " in run" in p["title"])
    assert shown + 18 == 11 * 5  # every finding annotated or counted as left out


def test_github_fits_in_one_annotation_per_level_when_few() -> None:
    lines = GithubFormatter().format(many_runs_report(1)).splitlines()
    assert not any("more not annotated" in line for line in lines)
    assert len(lines) == 3 + 1  # nan (error), static and vanishing (warnings), the summary


def test_github_escaping_follows_the_workflow_command_syntax() -> None:
    assert escape_data("100% a\nb: c, d") == "100%25 a%0Ab: c, d"
    assert escape_property("100% a\nb: c, d") == "100%25 a%0Ab%3A c%2C d"
    # a carriage return (and any control character) is shown, not obeyed by the log viewer
    assert escape_data("a\r\x1b[31mb") == "a\\r\\x1b[31mb"
    assert escape_data("%0A") == "%250A"  # an encoded newline in a name stays text


def test_github_hostile_names_cannot_start_or_end_a_command() -> None:
    text = GithubFormatter().format(hostile_report())
    lines = text.splitlines()
    assert len(lines) == 4  # the finding, report warning, run warning, the summary: no more
    assert all(COMMAND.match(line) for line in lines)
    assert not any(line.startswith("::error::") for line in lines)
    name, properties, message = parse_command(lines[0])
    assert name == "error"
    shown_tag, shown_run = terminal_lines(HOSTILE_TAG), terminal_lines(HOSTILE_RUN)
    assert properties["title"] == f"gradcheck: nan in {shown_run}"
    assert message.startswith(f"{shown_run}: 1 parameter nan")
    assert shown_tag in message


# --- JUnit ------------------------------------------------------------------------------------


def test_junit_golden() -> None:
    check_golden("report.junit.xml", JunitFormatter().format(sample_report()))


def test_junit_structure() -> None:
    root = ET.fromstring(JunitFormatter().format(sample_report()))
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert [suite.get("name") for suite in suites] == ["runs/troubled", "runs/healthy", "gradcheck"]
    troubled = suites[0]
    cases = troubled.findall("testcase")
    assert len(cases) == int(troubled.get("tests", "")) == 6
    assert {case.get("classname") for case in cases} == {"runs/troubled"}
    failures = {
        case.get("name"): case.find("failure") for case in cases if case.find("failure") is not None
    }
    assert list(failures) == ["fc1.weight", "fc2.weight"]  # the default --fail-on
    assert troubled.get("failures") == "2" and troubled.get("errors") == "0"
    failure = failures["fc1.weight"]
    assert failure is not None and failure.get("type") == "nan"
    assert failure.get("message", "").startswith("gradient norm is NaN from step 24")
    assert "hint: Lower the learning rate" in (failure.text or "")
    vanishing = next(case for case in cases if case.get("name", "").startswith("encoder"))
    assert vanishing.find("failure") is None
    assert (vanishing.findtext("system-out") or "").startswith("median gradient norm")
    assert troubled.findtext("system-out", "").startswith("events.out.tfevents.1700000900")
    unreadable = suites[2].find("testcase")
    assert unreadable is not None and unreadable.find("skipped") is not None
    totals = {
        key: sum(int(s.get(key, "")) for s in suites) for key in ("tests", "failures", "skipped")
    }
    assert totals == {"tests": 9, "failures": 2, "skipped": 1}
    assert {key: int(root.get(key, "")) for key in totals} == totals
    # every element and attribute is one the common JUnit schema (Jenkins junit-10.xsd) allows
    allowed = {
        "testsuites": {"name", "tests", "failures", "errors", "skipped"},
        "testsuite": {"name", "tests", "failures", "errors", "skipped", "time"},
        "properties": set(),
        "property": {"name", "value"},
        "testcase": {"name", "classname", "time"},
        "failure": {"type", "message"},
        "skipped": {"message"},
        "system-out": set(),
    }
    for element in root.iter():
        assert element.tag in allowed and set(element.attrib) <= allowed[element.tag]


def test_junit_fail_on_any_fails_every_finding() -> None:
    text = JunitFormatter(FormatOptions(fail_on=parse_fail_on("any"))).format(sample_report())
    assert ET.fromstring(text).get("failures") == "4"


def test_junit_skips_what_could_not_be_judged() -> None:
    from dataclasses import replace

    from tests.support.handmade import clean_report, layer

    once = layer("w", "ok", stats={"weight_steps": 1, "grad_steps": 1})
    twice = layer("v", "ok", stats={"weight_steps": 2})
    run = replace(clean_report().runs[0], layers=(once, twice))
    empty = replace(clean_report().runs[0], run="runs/empty", layers=())
    root = ET.fromstring(JunitFormatter().format(replace(clean_report(), runs=(run, empty))))
    skipped = [
        case.get("name") for case in root.iter("testcase") if case.find("skipped") is not None
    ]
    assert skipped == ["w", "(no parameters)"]
    assert root.get("skipped") == "2" and root.get("tests") == "3"


def test_junit_hostile_names_stay_text() -> None:
    text = JunitFormatter().format(hostile_report())
    root = ET.fromstring(text)  # control characters shown escaped: the document parses
    case = next(root.iter("testcase"))
    assert case.get("name") == terminal_lines(HOSTILE_TAG)
    assert "\\x1b[31m\\x00" in case.get("name", "")
    suite = root.find("testsuite")
    assert suite is not None and suite.get("name") == terminal_lines(HOSTILE_RUN)
    assert "<script>" not in text and "<img" not in text


# --- several reports in one run ---------------------------------------------------------------


def test_several_reports_in_one_run(logs: Path, tmp_path: Path) -> None:
    pytest.importorskip("plotly")
    paths = {name: tmp_path / f"report.{name}" for name in ("markdown", "junit", "github", "html")}
    options = [arg for name, path in paths.items() for arg in ("--report", f"{name}:{path}")]
    result = invoke("analyze", str(logs), "--format", "json", *options)
    assert result.exit_code == ExitStatus.FINDINGS  # computed once, from the analysis
    document = json.loads(result.stdout)  # stdout keeps --format
    assert [run["counts"]["nan"] for run in document["runs"]] == [len(PARAMETERS), 0]
    junit = ET.fromstring(paths["junit"].read_text())
    assert junit.get("failures") == str(len(PARAMETERS))
    assert paths["markdown"].read_text().startswith("## gradcheck")
    assert paths["github"].read_text().count("::error ") == 1  # one run, one verdict
    assert f"3 parameters nan from step {NAN_FROM}: fc1.weight, fc1.bias, fc2.weight" in (
        unescape(paths["github"].read_text())
    )
    assert paths["html"].read_text().count("Plotly.newPlot(") >= 1 + len(PARAMETERS)
    lines = result.stderr.splitlines()
    assert lines[:4] == [
        f"gradcheck: wrote {name} report to {path}" for name, path in paths.items()
    ]
    assert lines[4:] == [
        f"gradcheck: {logs / 'exploding'}: 3 parameters failing --fail-on (3 nan): "
        "fc1.weight, fc1.bias, fc2.weight"
    ]
    assert f"from step {NAN_FROM}" in paths["github"].read_text()


def test_reports_leave_the_exit_status_to_fail_on(logs: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.xml"
    result = invoke("analyze", str(logs), "--fail-on", "none", "--report", f"junit:{target}")
    assert result.exit_code == ExitStatus.OK
    assert ET.fromstring(target.read_text()).get("failures") == "0"
    assert "failing" not in result.stderr  # nothing fails --fail-on none
    assert "all healthy: gradients and weights" in result.stdout  # the table, on stdout


@pytest.mark.parametrize("value", ["junit", "pdf:out.pdf", "junit:", ":out.xml"])
def test_a_bad_report_option_is_a_usage_error(logs: Path, value: str) -> None:
    result = invoke("analyze", str(logs), "--report", value)
    assert result.exit_code == ExitStatus.INPUT_ERROR
    assert result.stdout == ""
    assert "expected FORMAT:FILE" in result.stderr and len(result.stderr.splitlines()) == 1


def test_an_unwritable_report_is_an_output_error(logs: Path, tmp_path: Path) -> None:
    target = tmp_path / "missing" / "report.xml"
    result = invoke("analyze", str(logs), "--report", f"junit:{target}")
    assert result.exit_code == ExitStatus.INPUT_ERROR
    assert f"cannot write {target}" in result.stderr


def test_failing_run_lines_cannot_drive_the_terminal(logs: Path, tmp_path: Path) -> None:
    """The stderr line per failing run quotes run and parameter names: shown escaped."""
    hostile = tmp_path / "run\x1b[2J"
    shutil.copytree(logs / "exploding", hostile)
    result = invoke("analyze", str(hostile), "--report", f"json:{tmp_path / 'r.json'}")
    (line,) = [x for x in result.stderr.splitlines() if "failing --fail-on" in x]
    assert "run\\x1b[2J: " in line and "\x1b" not in line


def test_ci_formats_say_what_a_run_leaves_unjudged() -> None:
    from dataclasses import replace

    from tests.support.handmade import clean_report

    healthy = clean_report().runs[0]
    partial = replace(healthy, notes=("no gradient was logged: vanishing cannot be judged",))
    scalars = replace(healthy, run="runs/scalars", layers=(), holds="only scalars: loss")
    report = replace(clean_report(), runs=(partial, scalars))
    root = ET.fromstring(JunitFormatter().format(report))
    first, second = root.findall("testsuite")
    assert first.findtext("system-out") == "no gradient was logged: vanishing cannot be judged"
    skipped = second.find("testcase/skipped")
    assert skipped is not None and skipped.get("message") == "nothing to judge: only scalars: loss"
    commands = [parse_command(line) for line in GithubFormatter().format(report).splitlines()]
    assert ("notice", "no gradient was logged: vanishing cannot be judged") in [
        (name, message) for name, _, message in commands
    ]
    assert ("warning", "nothing to judge: only scalars: loss") in [
        (name, message) for name, _, message in commands
    ]


def test_github_format_appends_the_full_markdown_report_to_the_step_summary(
    logs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = invoke("analyze", str(logs), "--format", "github", "--top", "1")
    assert result.exit_code == ExitStatus.FINDINGS
    text = summary.read_text()
    assert text.startswith("earlier step\n## gradcheck")  # appended, never overwritten
    assert all(f"`{name}`" in text for name in PARAMETERS)  # every finding, whatever --top
    # without a github report the summary is left alone
    invoke("analyze", str(logs), "--format", "json")
    assert summary.read_text() == text
