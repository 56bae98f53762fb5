"""The README cannot drift: its transcript, its --help excerpt, its exit statuses, its commands.

The transcript is the real output of ``gradcheck analyze sample_runs/`` as a user sees it when
stdout is not a terminal (plain text, 80 columns); only trailing spaces are normalised. After an
intended change of the output or of --help, rewrite both blocks with
``GRADCHECK_UPDATE_README=1 .venv/bin/python -m pytest tests/test_docs.py`` and review the diff.
"""

from __future__ import annotations

import os
import re
from dataclasses import fields
from pathlib import Path

import pytest
from click.testing import CliRunner

from gradcheck import cli
from gradcheck.report.interface import Env
from gradcheck.report.json_format import SCHEMA_VERSION
from gradcheck.status import ExitStatus
from gradcheck.verdicts.config import DEFAULT_CONFIG, Config
from gradcheck.verdicts.gate import DEFAULT_FAIL_ON

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
TRANSCRIPT_COMMAND = "gradcheck analyze sample_runs/"
SLOW_COMMAND = "gradcheck analyze sample_slow/"
COMPARE_COMMAND = "gradcheck compare sample_pairs/summed_loss/fit sample_pairs/summed_loss/loop"
CLIP_COMMAND = "gradcheck analyze sample_clipping/none sample_clipping/value --clip"


def fenced_block_after(marker: str) -> str:
    """The body of the first fenced code block after the line containing ``marker``."""
    start = README.index(marker)
    match = re.compile(r"^```[a-z]*\n(.*?)^```$", re.S | re.M).search(README, start)
    assert match is not None, f"no fenced block after {marker!r}"
    return match.group(1)


def check_block(marker: str, expected: list[str]) -> None:
    """The fenced block after ``marker`` holds ``expected`` (rewritten when asked to)."""
    if os.environ.get("GRADCHECK_UPDATE_README"):
        global README
        body = fenced_block_after(marker)
        start = README.index(body, README.index(marker))
        README = README[:start] + "\n".join(expected) + "\n" + README[start + len(body) :]
        (ROOT / "README.md").write_text(README, encoding="utf-8")
    assert normalise(fenced_block_after(marker)) == expected, (
        "README.md is out of date; if the new output is intended, rewrite it with "
        "GRADCHECK_UPDATE_README=1 .venv/bin/python -m pytest tests/test_docs.py"
    )


def normalise(text: str) -> list[str]:
    """Lines without trailing spaces, without trailing empty lines."""
    lines = [line.rstrip() for line in text.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return lines


def run_gradcheck(*args: str) -> tuple[int, str]:
    """``gradcheck args`` in-process from the repository root, as piped to a file (80 columns)."""
    result = CliRunner().invoke(
        cli.cli, list(args), prog_name="gradcheck", obj=Env(width=80), catch_exceptions=False
    )
    return result.exit_code, result.stdout


def test_readme_transcript_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    status, output = run_gradcheck(*TRANSCRIPT_COMMAND.split()[1:])
    assert status in (ExitStatus.OK, ExitStatus.FINDINGS)
    assert status == ExitStatus.FINDINGS  # sample_runs/ holds NaN, vanishing and static runs
    check_block("<!-- transcript:", [f"$ {TRANSCRIPT_COMMAND}", *normalise(output)])


def test_readme_compare_transcript_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    status, output = run_gradcheck(*COMPARE_COMMAND.split()[1:])
    assert status == ExitStatus.OK
    assert "a loss summed instead of averaged over a batch of 32?" in output
    check_block("<!-- compare-transcript:", [f"$ {COMPARE_COMMAND}", *normalise(output)])


def test_readme_slow_transcript_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    status, output = run_gradcheck(*SLOW_COMMAND.split()[1:])
    assert status == ExitStatus.OK  # slow is not in the default --fail-on
    assert "the whole model learns about 1,000x slower than usual" in output
    check_block("<!-- slow-transcript:", [f"$ {SLOW_COMMAND}", *normalise(output)])


def test_readme_clipping_transcript_is_the_real_output(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    status, output = run_gradcheck(*CLIP_COMMAND.split()[1:])
    assert status == ExitStatus.OK
    assert "gradients clipped by value at ±1.0e-2" in " ".join(output.split())
    check_block("<!-- clip-transcript:", [f"$ {CLIP_COMMAND}", *normalise(output)])


def test_readme_help_excerpt_is_the_real_help() -> None:
    status, output = run_gradcheck("analyze", "--help")
    assert status == ExitStatus.OK
    check_block("<!-- help:", ["$ gradcheck analyze --help", *normalise(output)])


def test_readme_watch_help_excerpt_is_the_real_help() -> None:
    status, output = run_gradcheck("watch", "--help")
    assert status == ExitStatus.OK
    check_block("<!-- watch-help:", ["$ gradcheck watch --help", *normalise(output)])


def test_every_exit_status_is_documented_in_readme_and_help() -> None:
    table = re.findall(r"^\| (\d+) \| (.+) \|$", README, re.M)
    assert sorted(int(code) for code, _ in table) == sorted(int(s) for s in ExitStatus)
    help_text = run_gradcheck("analyze", "--help")[1] + run_gradcheck("--help")[1]
    for status in ExitStatus:
        assert re.search(rf"^\s+{int(status)}  \S", help_text, re.M), status


def test_every_command_and_option_is_documented() -> None:
    for name, command in cli.cli.commands.items():
        assert f"gradcheck {name}" in README, name
        for parameter in command.params:
            for option in parameter.opts:
                if option.startswith("--") and option != "--help":
                    assert option in README, f"{name} {option}"


def test_readme_json_schema_matches_the_formatter() -> None:
    assert f"### JSON schema (version {SCHEMA_VERSION})" in README
    assert f'{{"schema": {SCHEMA_VERSION}, "gradcheck":' in README


def test_readme_setup_commands_are_make_targets() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    setup = fenced_block_after("## Set up")
    targets = re.findall(r"^make (\S+)", setup, re.M)
    assert targets == ["demo", "test"]
    for target in targets:
        assert re.search(rf"^{target}:", makefile, re.M), target
    demo = re.search(r"^demo:.*\n\t(.+)$", makefile, re.M)
    assert demo is not None and TRANSCRIPT_COMMAND in demo.group(1)


def test_every_setting_is_documented_with_its_default() -> None:
    section = README.split("<!-- config:")[1].split("\n## ")[0]  # up to the next section
    rows = dict(re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.M))
    defaults = {field.name: getattr(DEFAULT_CONFIG, field.name) for field in fields(Config)}
    assert set(rows) == set(defaults)
    for name, default in defaults.items():
        shown = rows[name].strip()
        if name == "fail_on":
            assert shown == f"`{DEFAULT_FAIL_ON}`" and default in (None, DEFAULT_FAIL_ON)
        elif default is None:
            assert shown == "none", name
        else:
            assert float(shown) == pytest.approx(default), name


def test_readme_python_examples_run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    blocks = re.findall(r"^```python\n(.*?)^```$", README, re.S | re.M)
    assert blocks
    monkeypatch.chdir(ROOT)
    for block in blocks:
        exec(compile(block.replace('"logs/"', '"sample_runs/"'), "README.md", "exec"), {})
    printed = capsys.readouterr().out
    assert "sample_runs/torch_frozen 0.weight static" in printed
