"""The run script of the GitHub Action (``action.yml``): its inputs as a gradcheck command line.

Reads the inputs from ``INPUT_*`` variables (``action.yml`` maps them), runs
``gradcheck analyze`` with ``--format github`` (annotations on the workflow run's page; the
format itself appends the full Markdown report to ``$GITHUB_STEP_SUMMARY``), writes the step's
outputs (``exit-status``, ``report``) to ``$GITHUB_OUTPUT``, and exits with gradcheck's status,
so the step fails on findings in ``fail-on``. Runs with the Python that gradcheck is installed
in.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path


def command_line(inputs: Mapping[str, str], folder: Path) -> list[str]:
    """``gradcheck analyze`` for the action's ``inputs`` (``INPUT_*`` variables), writing its
    reports into ``folder``."""
    paths = shlex.split(inputs.get("INPUT_PATHS", ""))
    if not paths:
        raise SystemExit("gradcheck action: the 'paths' input is empty: give the log directories")
    command = [sys.executable, "-m", "gradcheck", "analyze", *paths]
    command += ["--fail-on", inputs.get("INPUT_FAIL_ON", "").strip() or "nan,exploding,diverging"]
    command += ["--format", "github"]  # which appends the Markdown report to the step summary
    if _true(inputs.get("INPUT_HTML_REPORT", "true")):
        command += ["--report", f"html:{folder / 'gradcheck.html'}"]
    return command + shlex.split(inputs.get("INPUT_ARGS", ""))


def _true(text: str) -> bool:
    """An action input that means yes (inputs are text: ``true``, ``True``, ``yes``, ``1``)."""
    word = text.strip().lower()
    if word not in ("true", "yes", "1", "false", "no", "0", ""):
        raise SystemExit(f"gradcheck action: html-report must be true or false, not {text!r}")
    return word in ("true", "yes", "1")


def main() -> int:
    folder = Path(os.environ.get("RUNNER_TEMP") or tempfile.mkdtemp()) / "gradcheck-report"
    folder.mkdir(parents=True, exist_ok=True)
    command = command_line(os.environ, folder)
    for stale in ("gradcheck.md", "gradcheck.html"):  # an earlier step's reports are not ours
        (folder / stale).unlink(missing_ok=True)
    print("gradcheck action: " + shlex.join(["gradcheck", *command[3:]]), flush=True)
    status = subprocess.run(command).returncode
    html = folder / "gradcheck.html"
    if os.environ.get("GITHUB_OUTPUT"):
        with open(os.environ["GITHUB_OUTPUT"], "a", encoding="utf-8") as stream:
            stream.write(f"exit-status={status}\n")
            stream.write(f"report={html if html.exists() else ''}\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
