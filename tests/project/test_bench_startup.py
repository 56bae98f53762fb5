"""``bench/startup.py`` reads ``python -X importtime`` as Python writes it, and its commands run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench import startup
from tests.support.paths import REPO


def test_a_real_importtime_trace_gives_each_module_its_times() -> None:
    trace = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import json, csv"],
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    modules = startup.parse_importtime(trace)
    assert {"json", "json.decoder", "csv", "_csv"} <= set(modules)
    assert all(cumulative >= own >= 0 for own, cumulative in modules.values())
    assert modules["json"][1] >= modules["json.decoder"][1]  # a parent holds its children


def test_times_are_summed_by_package_with_gradcheck_split_by_subpackage() -> None:
    modules = [
        startup.ModuleTime("json", 100, 900),
        startup.ModuleTime("json.decoder", 300, 300),
        startup.ModuleTime("gradcheck.report.table", 2000, 2500),
        startup.ModuleTime("gradcheck.report", 500, 3000),
        startup.ModuleTime("gradcheck.model", 1000, 1000),
    ]
    assert startup.by_package(modules) == [
        ("gradcheck.report", 2, 2.5),
        ("gradcheck.model", 1, 1.0),
        ("json", 2, 0.4),
    ]
    assert startup.imported(modules, "json") and not startup.imported(modules, "js")


def test_every_command_runs_and_the_base_is_beside_each(tmp_path: Path) -> None:
    """Each command exits 0 on the tiny run (a failing one would time its error path), and
    with a base each gradcheck command is followed by the base's in every round."""
    tiny = tmp_path / "tiny"
    startup.params.write_run(tiny, 4, 5)
    env = startup.environment(tmp_path)
    named = startup.commands(tiny, env, base=REPO)
    assert list(named)[:4] == ["python", "numpy", "import", "import@base"]
    assert named["numpy"].env["OPENBLAS_NUM_THREADS"] == "1"  # as gradcheck.cli.main sets it
    assert named["help@base"].env["PYTHONPATH"] == str(REPO)
    for name in ("help", "analyze-json", "inspect-json"):
        seconds, _ = startup.run_once(named[name].argv, named[name].env, tmp_path)
        assert seconds > 0
