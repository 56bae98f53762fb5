"""Hostile names in the log through every output format, by the real command.

Tag names, a run directory name and a writer name that carry escape sequences, bidi overrides,
Markdown, HTML and spreadsheet formulas are written into real event files (tensorboard's
pure-Python record writer, and tensorboardX's ``SummaryWriter``); ``gradcheck analyze`` and
``gradcheck inspect`` must show them neutralised for each output and JSON must keep them
exactly. The test runs over ``report.FORMATS``: a new format fails it until it says here how
its output is checked.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from gradcheck import cli, report
from gradcheck.cli.status import ExitStatus
from gradcheck.report import github
from gradcheck.report.escape import FORMULA_STARTS, terminal_lines
from gradcheck.report.interface import Env
from tests.support import eventfiles as ef
from tests.support.hostile import (
    BIDI_AND_FORMAT,
    HOSTILE_PARAMETERS,
    assert_terminal_safe,
    rendered_markdown,
)

HOSTILE_RUN = "run\x1b[31m\u202e<b>|`x`"
HOSTILE_WRITER = "writer\x1b]0;owned\x07<script>"
COLLIDING = "collide\x1b[1A<i>"  # written twice at a step with two sizes: a warning quotes it
STEPS = 6


def _weights(tag: str, values: np.ndarray) -> object:
    return ef.histo_of(tag, values)


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One run whose hostile parameters are static (so every one is a finding with evidence)
    while ``mover`` moves, written by tensorboard's writer, and a tensorboardX run."""
    root = tmp_path_factory.mktemp("hostile")
    rng = np.random.default_rng(0)
    frozen = rng.normal(size=64)
    events = [ef.file_version(), ef.source_writer(HOSTILE_WRITER)]
    for step in range(STEPS):
        values = [ef.histo_of(name, frozen) for name in HOSTILE_PARAMETERS]
        values.append(ef.histo_of("mover", rng.normal(size=64) * (1 + step)))
        events.append(ef.summary_event(step, values))
    events.append(ef.summary_event(STEPS, [ef.histo_of(COLLIDING, frozen)]))
    events.append(ef.summary_event(STEPS, [ef.histo_of(COLLIDING, frozen[:8])]))
    ef.write_events(root / HOSTILE_RUN / "events.out.tfevents.1.host.1.0", events)

    from tensorboardX import SummaryWriter

    with SummaryWriter(str(root / "x\x1b[2Jtbx")) as writer:
        for step in range(STEPS):
            writer.add_histogram("tbx\u202e<img src=x>", frozen, step)
            writer.add_histogram("=tbx.mover", rng.normal(size=64) * (1 + step), step)
    return root


def invoke(*args: str) -> Result:
    """``gradcheck args`` in-process, wide enough that no name is cut or wrapped."""
    return CliRunner().invoke(
        cli.cli, list(args), prog_name="gradcheck", obj=Env(width=1000), catch_exceptions=False
    )


def analyze(logs: Path, format_name: str) -> Result:
    result = invoke("analyze", str(logs), "--format", format_name, "--all", "--fail-on", "none")
    assert result.exit_code == ExitStatus.OK, result.output
    return result


def escaped(text: str) -> str:
    """How the terminal shows ``text``: non-printable characters as their Python escapes."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def check_table(text: str, logs: Path) -> None:
    assert_terminal_safe(text)
    for name in (*HOSTILE_PARAMETERS, HOSTILE_RUN, HOSTILE_WRITER):
        assert escaped(name) in text, name
    assert escaped(f"{logs}/{HOSTILE_RUN}") in text
    assert "[bold red]markup[/bold red]" in text  # rich markup left as text
    assert "\\x1b[2J" in text and "\\u202e" in text and "\\x9b" in text
    assert re.search(r"^\s*! .*collide\\x1b\[1A<i>", text, re.M)  # the warning quoting it


def check_markdown(text: str, logs: Path) -> None:
    assert_terminal_safe(text)
    html = rendered_markdown(text)
    tags = set(re.findall(r"</?([a-z0-9]+)", html))
    ours = {"h2", "h3", "p", "blockquote", "strong", "table", "thead", "tbody", "tr", "th"}
    assert tags <= ours | {"td", "code", "details", "summary", "ul", "li"}, tags
    assert not re.search(r"<(img|a|script|b|i|em|s|del|h1)\b", html)
    assert html.count("<h2>") == 1 and "All gradients healthy</h2>" not in html
    rows = [line for line in text.splitlines() if line.startswith("| ")]
    assert len(rows) == 2 + len(HOSTILE_PARAMETERS) + 3  # header, alignment, every parameter
    # GitHub splits cells at every unescaped pipe, in code spans too (markdown-it does not)
    assert len({len(re.findall(r"(?<!\\)\|", row)) for row in rows}) == 1
    for table in re.findall(r"<table>.*?</table>", html, re.S):
        widths = {
            row.count("<td") + row.count("<th") for row in re.findall(r"<tr>.*?</tr>", table, re.S)
        }
        assert len(widths) == 1, widths  # no pipe or newline in a name split or ended a row
    shown = _html_text(html)
    for name in (*HOSTILE_PARAMETERS, HOSTILE_RUN):
        assert escaped(name) in shown, name
    assert "writer\\x1b]0;owned\\x07<script>" in shown


def _html_text(html: str) -> str:
    """The text a reader sees: tags dropped, entities decoded."""
    import html as html_module

    return html_module.unescape(re.sub(r"<[^>]+>", "", html))


TEXT_COLUMNS = ("run", "name", "weight_tag", "grad_tag", "evidence", "notes", "hint")


def check_csv(text: str, logs: Path) -> None:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == len(HOSTILE_PARAMETERS) + 3  # + mover, collide (2 series)
    for row in rows:
        for column in TEXT_COLUMNS:
            assert not row[column].startswith(FORMULA_STARTS), (column, row[column])
        float(row["severity"])  # numbers stay numbers
    names = {row["name"] for row in rows}
    for name in HOSTILE_PARAMETERS:
        expected = "'" + name if name.startswith(FORMULA_STARTS) else name
        assert expected in names, name  # otherwise exact: CSV is data
    assert {row["run"] for row in rows} == {f"{logs}/{HOSTILE_RUN}"}


def check_json(text: str, logs: Path) -> None:
    document = json.loads(text)
    (run,) = document["runs"]
    assert run["run"] == f"{logs}/{HOSTILE_RUN}"
    assert set(HOSTILE_PARAMETERS) <= {layer["name"] for layer in run["layers"]}
    assert {layer["weight_tag"] for layer in run["layers"]} >= set(HOSTILE_PARAMETERS)
    assert HOSTILE_WRITER in run["writers"]
    assert any(repr(COLLIDING) in warning for warning in run["warnings"])


def check_github(text: str, logs: Path) -> None:
    """Every line one workflow command (a newline in a name cannot start another), with no
    escape sequence for the log viewer, which renders ANSI codes; decoded as the runner
    decodes it, every name is there, its line breaks percent-encoded, nothing else changed."""
    lines = text.splitlines()
    assert lines and all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)
    assert_terminal_safe(text)
    decoded = "\n".join(_decoded(line) for line in lines)
    # one annotation for the run's static parameters: the first ones named, the rest counted
    named = [name for name in HOSTILE_PARAMETERS if terminal_lines(name) in decoded]
    assert named == list(HOSTILE_PARAMETERS[: github.MAX_NAMES])
    assert f"and {len(HOSTILE_PARAMETERS) - github.MAX_NAMES} more" in decoded


def _decoded(line: str) -> str:
    for code, char in (("%0A", "\n"), ("%0D", "\r"), ("%3A", ":"), ("%2C", ","), ("%25", "%")):
        line = line.replace(code, char)
    return line


def check_junit(text: str, logs: Path) -> None:
    import xml.etree.ElementTree as ET

    root = ET.fromstring(text.encode("utf-8"))  # well-formed whatever the names held
    names = {case.get("name") for case in root.iter("testcase")}
    assert {terminal_lines(name) for name in HOSTILE_PARAMETERS} <= names
    assert_terminal_safe(text)


def check_html(text: str, logs: Path) -> None:
    """No markup from the logs (an ``<img onerror>`` or the writer's ``<script>``), and no
    control or bidi character that would hide or reorder what the page shows."""
    assert "<img src=x onerror" not in text and "owned\x07<script>" not in text
    assert "<b>|`x`" not in text
    assert not BIDI_AND_FORMAT.search(text) and "\x1b" not in text
    assert "&lt;img src=x onerror=alert(1)&gt;" in text


CHECKS: dict[str, Callable[[str, Path], None]] = {
    "table": check_table,
    "markdown": check_markdown,
    "csv": check_csv,
    "json": check_json,
    "github": check_github,
    "junit": check_junit,
    "html": check_html,
}


@pytest.mark.parametrize("format_name", sorted(report.FORMATS))
def test_hostile_names_are_neutralised_in_every_format(logs: Path, format_name: str) -> None:
    assert format_name in CHECKS, f"{format_name}: say here how it neutralises hostile names"
    result = analyze(logs / HOSTILE_RUN, format_name)
    CHECKS[format_name](result.stdout_bytes.decode("utf-8"), logs)  # .stdout folds \r\n
    assert_terminal_safe(result.stderr)  # CSV's warnings go there


def test_a_hostile_run_directory_from_tensorboardx_is_neutralised(logs: Path) -> None:
    """tensorboardX replaces the characters it does not allow in tags by ``_`` itself, but it
    writes into whatever directory it is given."""
    run = next(path for path in logs.iterdir() if path.name.endswith("tbx"))
    shown = f"{logs}/x\\x1b[2Jtbx"
    table = analyze(run, "table").stdout
    assert_terminal_safe(table)
    assert table.startswith(shown + " · steps 0–5 · 1 file")
    markdown = analyze(run, "markdown").stdout
    assert_terminal_safe(markdown)
    assert f"### `{shown}`" in markdown
    rows = list(csv.DictReader(io.StringIO(analyze(run, "csv").stdout_bytes.decode())))
    assert {row["run"] for row in rows} == {str(run)}  # data: exact
    assert {row["name"] for row in rows} == {"tbx__img_src_x_", "_tbx.mover"}
    assert json.loads(analyze(run, "json").stdout)["runs"][0]["run"] == str(run)


def test_inspect_shows_hostile_tags_escaped_and_json_keeps_them(logs: Path) -> None:
    table = invoke("inspect", str(logs / HOSTILE_RUN))
    assert table.exit_code == ExitStatus.OK, table.output
    assert_terminal_safe(table.stdout)
    for name in (*HOSTILE_PARAMETERS, HOSTILE_RUN, HOSTILE_WRITER):
        assert escaped(name) in table.stdout, name
    listing = json.loads(invoke("inspect", str(logs / HOSTILE_RUN), "--format", "json").stdout)
    tags = {tag["tag"] for file in listing["runs"][0]["files"] for tag in file["tags"]}
    assert set(HOSTILE_PARAMETERS) | {COLLIDING, "mover"} == tags


def test_errors_on_stderr_quote_hostile_paths_escaped(tmp_path: Path) -> None:
    missing = tmp_path / "gone\x1b]0;owned\x07\u202e"
    result = invoke("analyze", str(missing))
    assert result.exit_code == ExitStatus.INPUT_ERROR
    assert_terminal_safe(result.stderr)
    assert result.stderr.count("\n") == 1 and "does not exist" in result.stderr


COMPARE_CHECKS: dict[str, Callable[[str], None]] = {
    "table": lambda text: (
        assert_terminal_safe(text),
        [_assert_in(escaped(name), text) for name in HOSTILE_PARAMETERS],
    ),
    "markdown": lambda text: (
        assert_terminal_safe(text),
        _assert_no_element_from_names(rendered_markdown(text)),
        [
            _assert_in(escaped(name), _html_text(rendered_markdown(text)))
            for name in HOSTILE_PARAMETERS
        ],
    ),
    "json": lambda text: _assert_in(
        set(HOSTILE_PARAMETERS), {p["name"] for p in json.loads(text)["parameters"]}, subset=True
    ),
    "html": lambda text: check_html(text, Path()),
}


def _assert_in(part: object, whole: object, subset: bool = False) -> None:
    if subset:
        assert part <= whole, part  # type: ignore[operator]
    else:
        assert part in whole, part  # type: ignore[operator]


def _assert_no_element_from_names(html: str) -> None:
    assert not re.search(r"<(img|a|script|b|i|em|s|del|h1)\b", html)
    assert "All gradients healthy</h" not in html


@pytest.mark.parametrize("format_name", sorted(report.COMPARE_FORMATS))
def test_hostile_names_are_neutralised_in_every_compare_format(
    logs: Path, format_name: str
) -> None:
    assert format_name in COMPARE_CHECKS, f"{format_name}: say how it neutralises hostile names"
    run = str(logs / HOSTILE_RUN)
    result = invoke("compare", run, run, "--format", format_name)
    assert result.exit_code == ExitStatus.OK, result.output
    COMPARE_CHECKS[format_name](result.stdout_bytes.decode("utf-8"))
    assert_terminal_safe(result.stderr)
