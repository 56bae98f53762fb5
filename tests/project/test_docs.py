"""The README and the documentation site cannot drift from the code.

Every fenced block after an ``<!-- output: ... -->`` line, in README.md or any page of docs/,
is the real output of the ``$ gradcheck ...`` command on its first line, as a user sees it when
stdout is not a terminal (plain text, 80 columns; ``| head -N`` keeps the first N lines); only
trailing spaces are normalised. After an intended change of the output, rewrite every such
block at once and review the diff:

    GRADCHECK_UPDATE_DOCS=1 .venv/bin/python -m pytest tests/project/test_docs.py

(``GRADCHECK_UPDATE_README=1`` does the same.) The reference pages generated at build time
(commands from the CLI, settings from ``Config``, exit statuses from ``--help``) are checked
by building the site here, warnings as errors, as ``make docs`` does.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, fields
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from gradcheck import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.model import VERDICTS
from gradcheck.report.interface import Env
from gradcheck.report.json_format import SCHEMA_VERSION
from gradcheck.verdicts.config import Config
from tests.support.paths import REPO as ROOT

DOCS = ROOT / "docs"
README = ROOT / "README.md"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
OUTPUT_MARKER = "<!-- output:"
BLOCK = re.compile(r"^```[a-z0-9]*\n(.*?)^```$", re.S | re.M)
UPDATE = bool(os.environ.get("GRADCHECK_UPDATE_DOCS") or os.environ.get("GRADCHECK_UPDATE_README"))

_hooks_spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
assert _hooks_spec is not None and _hooks_spec.loader is not None
hooks = sys.modules["docs_hooks"] = importlib.util.module_from_spec(_hooks_spec)
_hooks_spec.loader.exec_module(hooks)

EXPECTED = {
    "gradcheck analyze sample_runs/torch_exploding_nan sample_runs/torch_frozen "
    "sample_runs/torch_clipped": (
        ExitStatus.FINDINGS,
        "  all healthy: gradients and weights of 6 parameters in 3 layers",
    ),
    "gradcheck analyze sample_runs/": (ExitStatus.FINDINGS, "sample_runs/torch_frozen"),
    "gradcheck analyze sample_slow/": (
        ExitStatus.OK,  # slow is not in the default --fail-on
        "the whole model learns about 1,000x slower than usual",
    ),
    "gradcheck compare sample_pairs/summed_loss/fit sample_pairs/summed_loss/loop": (
        ExitStatus.OK,
        "a loss summed instead of averaged over a batch of 32?",
    ),
    "gradcheck analyze sample_clipping/none sample_clipping/value --clip": (
        ExitStatus.OK,
        "clipping: Clipped by value at ±0.01 (clip_grad_value_, tf.clip_by_value, Keras",
    ),
    "gradcheck analyze tests/data/sweep | head -16": (
        ExitStatus.FINDINGS,
        "all 4 runs with lr >= 0.4 exploded; none of the 6 below did",
    ),
}
"""Each transcript's command, its exit status and a line that must be in it (what the page
says about the output)."""


def text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


@dataclass(frozen=True)
class Transcript:
    page: Path
    number: int  # the how-manyth output block of the page
    command: str


def transcripts() -> list[Transcript]:
    found = []
    for page in PAGES:
        for number, start in enumerate(m.start() for m in re.finditer(OUTPUT_MARKER, text(page))):
            match = BLOCK.search(text(page), start)
            assert match is not None, f"{page}: no fenced block after an output marker"
            first = match.group(1).split("\n", 1)[0]
            command = first.removeprefix("$ ")
            found.append(Transcript(page, number, command))
    return found


def run_gradcheck(*args: str) -> tuple[int, str]:
    """``gradcheck args`` in-process from the repository root, as piped to a file (80 columns)."""
    result = CliRunner().invoke(
        cli.cli, list(args), prog_name="gradcheck", obj=Env(width=80), catch_exceptions=False
    )
    return result.exit_code, result.stdout


def normalise(output: str) -> list[str]:
    """Lines without trailing spaces, without trailing empty lines."""
    lines = [line.rstrip() for line in output.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def check_block(page: Path, number: int, expected: list[str]) -> None:
    """The ``number``-th output block of ``page`` holds ``expected`` (rewritten when asked)."""
    content = text(page)
    start = [m.start() for m in re.finditer(OUTPUT_MARKER, content)][number]
    match = BLOCK.search(content, start)
    assert match is not None
    if UPDATE:
        body = "\n".join(expected) + "\n"
        page.write_text(content[: match.start(1)] + body + content[match.end(1) :], "utf-8")
        match = BLOCK.search(text(page), start)
        assert match is not None
    assert normalise(match.group(1)) == expected, (
        f"{page.relative_to(ROOT)} is out of date; if the new output is intended, rewrite every "
        "transcript: GRADCHECK_UPDATE_DOCS=1 .venv/bin/python -m pytest tests/project/test_docs.py"
    )


@pytest.mark.parametrize(
    "transcript", transcripts(), ids=lambda t: f"{t.page.relative_to(ROOT)}#{t.number}"
)
def test_transcripts_are_the_real_output(
    transcript: Transcript, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    assert transcript.command in EXPECTED, f"say what {transcript.command!r} must show"
    status, must_show = EXPECTED[transcript.command]
    command, _, head = transcript.command.partition(" | head -")
    code, output = run_gradcheck(*shlex.split(command)[1:])
    assert code == status, output
    lines = normalise(output)[: int(head)] if head else normalise(output)
    assert must_show in "\n".join(lines)
    check_block(transcript.page, transcript.number, [f"$ {transcript.command}", *lines])


def test_every_expected_transcript_is_shown_somewhere() -> None:
    assert {t.command for t in transcripts()} == set(EXPECTED)


# --- the README: one page, the first screen for someone who has never heard of gradcheck ----


def test_readme_is_short_and_its_first_screen_shows_a_finding_and_pip() -> None:
    lines = text(README).splitlines()
    assert len(lines) <= 250
    first_screen = "\n".join(lines[:80])
    assert "pip install" in first_screen and "not on PyPI yet" in first_screen
    (first,) = [t for t in transcripts() if t.page == README]
    body = BLOCK.search(first_screen, first_screen.index(OUTPUT_MARKER))
    assert body is not None, "the README's transcript ends within its first 80 lines"
    output = body.group(1).splitlines()[1:]
    assert 15 <= len(output) <= 25, len(output)
    assert first.command in EXPECTED and EXPECTED[first.command][0] == ExitStatus.FINDINGS


def test_readme_commands_work_as_written(tmp_path: Path) -> None:
    """Every ``gradcheck`` line of the README's shell blocks runs (from a folder holding the
    sample runs, as a clone does); every ``make`` target exists."""
    shell = [b for b in re.findall(r"^```sh\n(.*?)^```$", text(README), re.S | re.M)]
    commands = [line.split("#")[0].strip() for block in shell for line in block.splitlines()]
    makefile = text(ROOT / "Makefile")
    for target in (c.split()[1] for c in commands if c.startswith("make ")):
        assert re.search(rf"^{target}:", makefile, re.M), target
    (tmp_path / "sample_runs").symlink_to(ROOT / "sample_runs")
    ran = 0
    for command in (c for c in commands if c.startswith("gradcheck ")):
        done = subprocess.run(
            [sys.executable, "-m", "gradcheck", *shlex.split(command)[1:]],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode in (ExitStatus.OK, ExitStatus.FINDINGS), (command, done.stderr)
        ran += 1
    assert ran >= 2 and (tmp_path / "report.html").stat().st_size > 1_000_000


def test_readme_helper_snippets_are_the_tested_ones() -> None:
    """The README's helper snippets are blocks of the docs' guide, which the helper tests run
    with TensorFlow and torch (tests/support/readback.py)."""
    guide = text(DOCS / "guides" / "better-logs.md")
    snippets = re.findall(r"^```python3\n(.*?)^```$", text(README), re.S | re.M)
    assert len(snippets) == 2
    for snippet in snippets:
        assert f"```python3\n{snippet}```" in guide


def test_readme_links_resolve() -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text(README)):
        assert (ROOT / target).exists(), target


# --- exit statuses, verdicts, schema, configuration ------------------------------------------


@pytest.mark.parametrize("page", [README, DOCS / "reference" / "exit-status.md"])
def test_every_exit_status_is_documented(page: Path) -> None:
    table = re.findall(r"^\| (\d+) \| (.+) \|$", text(page), re.M)
    assert sorted(int(code) for code, _ in table) == sorted(int(s) for s in ExitStatus)
    help_text = run_gradcheck("analyze", "--help")[1] + run_gradcheck("--help")[1]
    for status in ExitStatus:
        assert re.search(rf"^\s+{int(status)}  \S", help_text, re.M), status


def test_every_verdict_is_in_the_verdict_table() -> None:
    rows = re.findall(r"^\| `(\w+)` \| ", text(DOCS / "reference" / "verdicts.md"), re.M)
    assert [row for row in rows if row in VERDICTS] == list(VERDICTS)


def test_json_schema_page_matches_the_formatter() -> None:
    page = text(DOCS / "reference" / "json.md")
    assert f"version {SCHEMA_VERSION}" in page
    assert f'{{"schema": {SCHEMA_VERSION}, "gradcheck":' in page


def test_every_setting_is_generated_with_its_source() -> None:
    settings = hooks.settings()
    assert [s.name for s in settings] == [field.name for field in fields(Config)]
    for setting in settings:
        assert len(setting.doc) > 20 and setting.section, setting.name
    table = hooks.config_table()
    assert table.count("\n| `") == len(settings)
    assert "| `explode_factor` | `100` | a finite number above 1 | Gradient norm this" in table


def test_python_api_example_runs(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    page = text(DOCS / "guides" / "python-api.md")
    blocks = re.findall(r"^```python\n(.*?)^```$", page, re.S | re.M)
    assert blocks
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block.replace('"logs/"', '"sample_runs/"'), "python-api.md", "exec"), {})
    assert "sample_runs/torch_frozen 0.weight static" in capsys.readouterr().out


# --- the GitHub Action's snippets ---------------------------------------------------------------


@pytest.mark.parametrize("page", [README, DOCS / "guides" / "ci.md"])
def test_action_snippets_use_the_actions_inputs(page: Path) -> None:
    action = yaml.safe_load(text(ROOT / "action.yml"))
    content = text(page)
    match = BLOCK.search(content, content.index("<!-- action-snippet:"))
    assert match is not None
    steps = yaml.safe_load(match.group(1))
    (step,) = [s for s in steps if s.get("uses", "").startswith("./")]
    checkout = [s for s in steps if s.get("uses", "").startswith("actions/checkout")]
    assert checkout and checkout[0]["with"]["path"] == step["uses"][2:]
    assert set(step["with"]) <= set(action["inputs"])
    required = {name for name, spec in action["inputs"].items() if spec.get("required")}
    assert required <= set(step["with"])
    if page == README:  # the CI section shows the action first
        assert content.index("<!-- action-snippet:") < content.index("gradcheck analyze logs/")


# --- the site -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The documentation site built as ``make docs`` builds it (strict: warnings fail)."""
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent))
    assert mkdocs is not None, "mkdocs is installed by make install (the docs extra)"
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [mkdocs, "build", "--strict", "--quiet", "--site-dir", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return out


def test_the_site_documents_every_command_and_option(site: Path) -> None:
    page = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for name, command in cli.cli.commands.items():
        assert f"gradcheck {name}" in page, name
        for parameter in command.params:
            for option in parameter.opts:
                if option.startswith("--"):
                    assert option in page, f"{name} {option}"


def test_the_site_has_every_setting_and_exit_status(site: Path) -> None:
    configuration = (site / "reference" / "configuration" / "index.html").read_text("utf-8")
    thresholds = (site / "explanation" / "thresholds" / "index.html").read_text("utf-8")
    for field in fields(Config):
        assert f"<code>{field.name}</code>" in configuration, field.name
        assert f"<code>{field.name}</code>" in thresholds, field.name
    assert "AUTOTRAINER" in thresholds and "CS231n" in thresholds
    statuses = (site / "reference" / "exit-status" / "index.html").read_text("utf-8")
    for name in cli.cli.commands:
        assert f"gradcheck {name}" in statuses
    changelog = (site / "changelog" / "index.html").read_text("utf-8")
    assert "Unreleased" in changelog


def test_the_ci_guide_lists_every_input_of_the_action_with_its_default() -> None:
    action = yaml.safe_load(text(ROOT / "action.yml"))
    rows = re.findall(r"^\| `([\w-]+)` \|([^|]*)\|", text(DOCS / "guides" / "ci.md"), re.M)
    assert [name for name, _ in rows] == list(action["inputs"])
    for name, shown in rows:
        default = str(action["inputs"][name].get("default", "")).strip()
        assert shown.strip() == (
            f"`{default}`" if default else "" if name != "paths" else "(required)"
        )
