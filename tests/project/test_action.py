"""The GitHub Action (``action.yml``): its inputs mapped to a command line, its run script on
real logs, and its steps run as a runner would (bash, ``${{ inputs.* }}`` substituted)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.paths import REPO

ACTION = yaml.safe_load((REPO / "action.yml").read_text(encoding="utf-8"))
RUN_SCRIPT = REPO / ".github" / "action" / "run.py"
_spec = importlib.util.spec_from_file_location("gradcheck_action", RUN_SCRIPT)
assert _spec is not None and _spec.loader is not None
action = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(action)


def defaults() -> dict[str, str]:
    """The ``INPUT_*`` variables of the action's defaults (what a runner passes)."""
    return {
        f"INPUT_{name.upper().replace('-', '_')}": str(spec.get("default", ""))
        for name, spec in ACTION["inputs"].items()
    }


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        (
            {"INPUT_PATHS": "logs/"},
            "analyze logs/ --fail-on nan,exploding,diverging --format github "
            "--report html:F/gradcheck.html",
        ),
        (
            {
                "INPUT_PATHS": "runs/a\n'runs/with space'  runs/b",
                "INPUT_FAIL_ON": "any",
                "INPUT_HTML_REPORT": "false",
                "INPUT_ARGS": "--config gc.toml --run 'lr*'",
            },
            "analyze runs/a 'runs/with space' runs/b --fail-on any --format github "
            "--config gc.toml --run 'lr*'",
        ),
    ],
)
def test_inputs_become_a_command_line(inputs: dict[str, str], expected: str) -> None:
    import shlex

    command = action.command_line({**defaults(), **inputs}, Path("F"))
    assert command[:3] == [sys.executable, "-m", "gradcheck"]
    assert shlex.join(command[3:]) == expected


@pytest.mark.parametrize(
    "inputs", [{"INPUT_PATHS": "  "}, {"INPUT_PATHS": "logs", "INPUT_HTML_REPORT": "maybe"}]
)
def test_bad_inputs_are_one_line(inputs: dict[str, str]) -> None:
    with pytest.raises(SystemExit, match="^gradcheck action: "):
        action.command_line({**defaults(), **inputs}, Path("F"))


def test_every_input_reaches_a_step() -> None:
    steps = ACTION["runs"]["steps"]
    text = yaml.safe_dump(steps)
    for name in ACTION["inputs"]:
        assert f"inputs.{name}" in text, name
    (analyze,) = [step for step in steps if step.get("id") == "analyze"]
    source = RUN_SCRIPT.read_text(encoding="utf-8")
    for variable in analyze["env"]:
        assert f'"{variable}"' in source, variable  # read by the run script
    for output in ACTION["outputs"]:
        assert f"{output}=" in source, output


def run_action(inputs: dict[str, str], tmp_path: Path) -> tuple[int, str, Path, Path]:
    """The action's steps as a runner runs them: each ``run:`` in bash with the step's
    ``env``, ``${{ inputs.* }}`` substituted, in the repository's folder as the workspace. The
    install step's venv is replaced by this one (the suite's own venv already holds gradcheck
    and plotly; tests/project/test_action.py's last test installs for real)."""
    values = {**{k: str(v.get("default", "")) for k, v in ACTION["inputs"].items()}, **inputs}
    summary, outputs = tmp_path / "summary.md", tmp_path / "outputs"
    venv = tmp_path / "runner" / "gradcheck-venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (venv / "python").chmod(0o755)
    environment = {
        **os.environ,
        "GITHUB_ACTION_PATH": str(REPO),
        "RUNNER_TEMP": str(tmp_path / "runner"),
        "GITHUB_STEP_SUMMARY": str(summary),
        "GITHUB_OUTPUT": str(outputs),
    }
    (analyze,) = [step for step in ACTION["runs"]["steps"] if step.get("id") == "analyze"]
    step_env = {
        name: re.sub(r"\$\{\{ inputs\.([\w-]+) \}\}", lambda m: values[m.group(1)], value)
        for name, value in analyze["env"].items()
    }
    result = subprocess.run(
        ["bash", "-e", "-c", analyze["run"]],
        env={**environment, **step_env},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode in (0, 1), result.stderr
    return result.returncode, result.stdout, summary, outputs


def test_the_action_fails_on_nan_annotates_summarises_and_keeps_the_html(tmp_path: Path) -> None:
    status, stdout, summary, outputs = run_action(
        {"paths": "sample_runs/torch_exploding_nan sample_runs/torch_clipped"}, tmp_path
    )
    assert status == 1, stdout
    assert stdout.startswith("gradcheck action: gradcheck analyze sample_runs/torch_exploding_nan")
    assert any(line.startswith("::error ") for line in stdout.splitlines())
    written = summary.read_text(encoding="utf-8")
    assert "torch_exploding_nan" in written and "0.weight" in written
    assert written.count("## gradcheck") == 1  # appended once, by --format github
    lines = dict(line.split("=", 1) for line in outputs.read_text().splitlines())
    assert lines["exit-status"] == "1"
    report = Path(lines["report"])
    assert report.name == "gradcheck.html" and "<html" in report.read_text(encoding="utf-8")[:500]


def test_the_action_passes_a_clean_run_without_html(tmp_path: Path) -> None:
    status, stdout, summary, outputs = run_action(
        {"paths": "sample_runs/torch_clipped", "html-report": "false", "fail-on": "any"}, tmp_path
    )
    assert status == 0, stdout
    assert "::error" not in stdout and summary.exists()
    assert outputs.read_text().splitlines() == ["exit-status=0", "report="]


def test_the_install_step_installs_gradcheck_from_the_actions_checkout(tmp_path: Path) -> None:
    """The install step as written, into a venv of its own, from this checkout (html extra
    included): the step after it then runs on that venv's gradcheck."""
    (install,) = [step for step in ACTION["runs"]["steps"] if step["name"] == "Install gradcheck"]
    environment = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))},
        "GITHUB_ACTION_PATH": str(REPO),
        "RUNNER_TEMP": str(tmp_path),
        "GRADCHECK_PYTHON": sys.executable,
    }
    subprocess.run(["bash", "-e", "-c", install["run"]], env=environment, cwd=tmp_path, check=True)
    python = tmp_path / "gradcheck-venv" / "bin" / "python"
    probe = "import gradcheck, plotly; print(gradcheck.__file__)"
    where = subprocess.run(
        [python, "-c", probe], capture_output=True, text=True, check=True, cwd=tmp_path
    )
    assert where.stdout.startswith(str(tmp_path / "gradcheck-venv"))  # not this checkout's
