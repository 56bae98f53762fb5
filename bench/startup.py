"""Start-up (issue 36): each light command's wall time over bare Python's, and whose imports.

    python bench/startup.py                          # 15 rounds, 5 import profiles a command
    python bench/startup.py --rounds 30 --top 12 --json bench/startup.json
    python bench/startup.py --base /tmp/main-checkout      # before/after, interleaved

Times, in fresh processes interleaved round-robin (one round runs every command once, so a
burst of load on the shared machine falls on all of them alike), ``python -c pass``,
``python -c "import numpy"`` (what any analysis imports, not gradcheck's time),
``python -c "import gradcheck"``, ``gradcheck --help``, ``gradcheck --version``,
``gradcheck analyze`` of the tiny run (``bench/params.py``'s ``params-4x5``: 4 parameters, 5
steps, 23 kB) with ``--format json`` and with the default table, and ``gradcheck inspect
--format json`` of it. It prints each command's median, its range, its median over bare
Python's (issue 36's target: the tiny run within 6x), and the median and quartiles of its
time over Python's in the same round. Then it runs each command ``--import-rounds`` times
under ``python -X importtime`` and prints, per command, the modules it imports (the medians
of their import times, summed by package), the modules of largest cumulative import time,
and whether it imported the heavy packages a light command must not (``HEAVY``). Import
times under ``-X importtime`` are inflated by the tracing itself: read them as shares, the
wall times as the cost.

The interpreter is this one (the venv's, its site-packages and the editable install's finder
included: what ``gradcheck`` itself starts); bytecode is cached as for an installed package
(``bench/run.py``'s ``child_environment``). ``bench/run.py --series startup`` runs it too.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/startup.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import gen, params  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
SCRIPT = Path(PYTHON).with_name("gradcheck")  # the console script a user runs
QUIET = ("--fail-on", "none", "--no-progress")
HEAVY = (
    "numpy",
    "rich",
    "google.protobuf",
    "tensorboard",
    "pandas",
    "plotly",
    "fsspec",
    "dask",
    "re2",
    "tomllib",
    "json",
    "gradcheck.model",
    "gradcheck.pipeline",
)
"""Modules reported as imported or not by each command: what ``--help`` and ``--version``
should not need (the third-party ones, and gradcheck's data model and pipeline)."""


@dataclass(frozen=True)
class Command:
    """A measured command line and its environment."""

    argv: list[str]
    env: dict[str, str]


def commands(tiny: Path, env: dict[str, str], base: Path | None) -> dict[str, Command]:
    """The measured commands by name; ``python`` first: the others' ratios are over it. With
    ``base``, each gradcheck command again as ``NAME@base``, importing gradcheck from that
    checkout (``PYTHONPATH``, ahead of the editable install: as ``bench/ab.py``)."""
    gradcheck = [str(SCRIPT)] if SCRIPT.exists() else [PYTHON, "-m", "gradcheck"]
    argvs = {
        "python": [PYTHON, "-c", "pass"],
        "numpy": [PYTHON, "-c", "import numpy"],
        "import": [PYTHON, "-c", "import gradcheck"],
        "help": [*gradcheck, "--help"],
        "version": [*gradcheck, "--version"],
        "analyze-json": [*gradcheck, "analyze", str(tiny), "--format", "json", *QUIET],
        "analyze-table": [*gradcheck, "analyze", str(tiny), *QUIET],
        "inspect-json": [*gradcheck, "inspect", str(tiny), "--format", "json"],
    }
    named: dict[str, Command] = {}
    for name, argv in argvs.items():
        # numpy as the CLI imports it (gradcheck.cli.main: one OpenBLAS thread): the floor of
        # any analysis, beside bare Python's
        named[name] = Command(
            argv, {**env, "OPENBLAS_NUM_THREADS": "1"} if name == "numpy" else env
        )
        if base is not None and name not in ("python", "numpy"):  # each beside its base
            named[f"{name}@base"] = Command(argv, {**env, "PYTHONPATH": str(base.resolve())})
    return named


def check_base(base: Path, env: dict[str, str], cwd: Path) -> None:
    """Fail unless ``base`` is a checkout whose gradcheck (and C extension) is the one imported
    in ``cwd`` (``python -c`` puts ``cwd`` first on the path: not in a checkout)."""
    code = "import gradcheck.cli, gradcheck.native._scan as s; print(gradcheck.cli.__file__)"
    done = subprocess.run(
        [PYTHON, "-c", code],
        env={**env, "PYTHONPATH": str(base.resolve())},
        capture_output=True,
        text=True,
        cwd=cwd,
    )
    if done.returncode != 0 or not done.stdout.startswith(str(base.resolve())):
        raise SystemExit(f"--base {base}: gradcheck not imported from it ({done.stderr[-300:]})")


def under_importtime(command: Sequence[str]) -> list[str]:
    """``command`` under ``python -X importtime`` (the console script is a Python file)."""
    if command[0] == PYTHON:
        return [PYTHON, "-X", "importtime", *command[1:]]
    return [PYTHON, "-X", "importtime", *command]


def environment(data: Path) -> dict[str, str]:
    """As ``bench/run.py``'s measured processes: bytecode cached outside the tree, quiet TF."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPYCACHEPREFIX=str(data / "pycache")
    )
    return env


def run_once(command: Sequence[str], env: Mapping[str, str], cwd: Path) -> tuple[float, str]:
    """Wall seconds of one run of ``command`` in ``cwd`` (stdout discarded) and its stderr; a
    failed run is an error: a command that exits early would look fast."""
    started = time.perf_counter()
    done = subprocess.run(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
        text=True,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited {done.returncode}: {done.stderr[-500:]}")
    return seconds, done.stderr


@dataclass(frozen=True)
class Timing:
    """One command's wall times over the rounds."""

    command: str
    seconds: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.seconds)


def time_interleaved(named: Mapping[str, Command], cwd: Path, rounds: int) -> dict[str, Timing]:
    """Every command once a round, ``rounds`` rounds, after one unmeasured round (bytecode
    and page cache filled)."""
    for command in named.values():
        run_once(command.argv, command.env, cwd)
    seconds: dict[str, list[float]] = {name: [] for name in named}
    for _ in range(rounds):
        for name, command in named.items():
            seconds[name].append(run_once(command.argv, command.env, cwd)[0])
    return {name: Timing(" ".join(named[name].argv), runs) for name, runs in seconds.items()}


@dataclass(frozen=True)
class ModuleTime:
    """A module's import time in microseconds (medians over the profiled runs)."""

    name: str
    self_us: float
    cumulative_us: float


def parse_importtime(stderr: str) -> dict[str, tuple[int, int]]:
    """``{module: (self us, cumulative us)}`` from ``-X importtime``'s lines (a module that
    appears twice, as ``-X importtime`` prints for a failed import, keeps its larger time)."""
    found: dict[str, tuple[int, int]] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:") or "[us]" in line:
            continue
        own, cumulative, name = line.removeprefix("import time:").split("|", 2)
        times = (int(own), int(cumulative))
        found[name.strip()] = max(times, found.get(name.strip(), times))
    return found


def profile_imports(
    command: Sequence[str], env: Mapping[str, str], cwd: Path, runs: int
) -> list[ModuleTime]:
    """The modules ``command`` imports, each with its median times over ``runs`` runs (a
    module missing from a run counts 0 there), largest cumulative first."""
    traces = [run_once(under_importtime(command), env, cwd)[1] for _ in range(runs)]
    profiles = [parse_importtime(trace) for trace in traces]
    names = {name for profile in profiles for name in profile}
    modules = [
        ModuleTime(
            name,
            statistics.median(profile.get(name, (0, 0))[0] for profile in profiles),
            statistics.median(profile.get(name, (0, 0))[1] for profile in profiles),
        )
        for name in names
    ]
    return sorted(modules, key=lambda module: -module.cumulative_us)


def package_of(module: str) -> str:
    """The package a module's time is summed under: the top-level name, and gradcheck's
    sub-packages apart (``gradcheck.report.table`` under ``gradcheck.report``)."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "gradcheck" and len(parts) > 1 else parts[0]


def by_package(modules: Sequence[ModuleTime]) -> list[tuple[str, int, float]]:
    """``(package, modules, self ms summed)``, largest first."""
    sums: dict[str, list[float]] = {}
    for module in modules:
        sums.setdefault(package_of(module.name), []).append(module.self_us)
    rows = [(name, len(times), sum(times) / 1000) for name, times in sums.items()]
    return sorted(rows, key=lambda row: -row[2])


def imported(modules: Sequence[ModuleTime], name: str) -> bool:
    return any(m.name == name or m.name.startswith(name + ".") for m in modules)


def round_ratios(timing: Timing, python: Timing) -> list[float]:
    """The command's time over ``python -c pass``'s in the same round, round by round: a
    burst of load that slows one round slows both."""
    return sorted(own / bare for own, bare in zip(timing.seconds, python.seconds, strict=True))


def render_timings(timings: Mapping[str, Timing], load: tuple[float, float]) -> str:
    python = timings["python"]
    lines = [
        f"start-up, {len(python.seconds)} interleaved rounds"
        f" (load average {load[0]:.2f} at start, {load[1]:.2f} at end)",
        f"{'command':<20}{'median s':>9}{'range s':>14}{'x python':>10}{'per round':>11}"
        f"{'quartiles':>12}",
    ]
    for name, timing in timings.items():
        spread = f"{min(timing.seconds):.3f}-{max(timing.seconds):.3f}"
        ratios = round_ratios(timing, python)
        quartiles = f"{ratios[len(ratios) // 4]:.2f}-{ratios[(3 * len(ratios)) // 4]:.2f}"
        lines.append(
            f"{name:<20}{timing.median:>9.3f}{spread:>14}{timing.median / python.median:>10.2f}"
            f"{statistics.median(ratios):>11.2f}{quartiles:>12}"
        )
    return "\n".join(lines)


def render_imports(name: str, modules: Sequence[ModuleTime], top: int) -> str:
    total = sum(module.self_us for module in modules) / 1000
    heavy = ", ".join(f"{h} {'yes' if imported(modules, h) else 'no'}" for h in HEAVY)
    lines = [
        f"{name}: {len(modules)} modules, {total:.1f} ms of imports (-X importtime medians)",
        f"  imports: {heavy}",
        "  by package (self ms): "
        + ", ".join(f"{pkg} {ms:.1f} ({count})" for pkg, count, ms in by_package(modules)[:top]),
        f"  {'module (top by cumulative)':<44}{'cumul ms':>9}{'self ms':>9}",
    ]
    for module in modules[:top]:
        lines.append(
            f"  {module.name:<44}{module.cumulative_us / 1000:>9.1f}{module.self_us / 1000:>9.1f}"
        )
    return "\n".join(lines)


def measure(
    data: Path, rounds: int, import_rounds: int, top: int, base: Path | None = None
) -> tuple[dict[str, object], str]:
    """Time and profile every command (and ``base``'s); the results as a JSON-able document
    and as text."""
    tiny = Path(params.ensure_log(data, *params.TINY).directory)
    env = environment(data)
    if base is not None:
        check_base(base, env, data)
    named = commands(tiny, env, base)
    load_start = os.getloadavg()[0]
    # In the data directory, not the repository: its pyproject.toml has a [tool.gradcheck]
    # table, which a user's project mostly has not (gradcheck then parses no TOML).
    timings = time_interleaved(named, data, rounds)
    load_end = os.getloadavg()[0]
    profiles = {
        name: profile_imports(command.argv, command.env, data, import_rounds)
        for name, command in named.items()
    }
    python = timings["python"].median
    document: dict[str, object] = {
        "load_average": [load_start, load_end],
        "rounds": rounds,
        "import_rounds": import_rounds,
        "commands": {
            name: {
                "argv": named[name].argv,
                "pythonpath": named[name].env.get("PYTHONPATH"),
                "seconds": timing.seconds,
                "median": timing.median,
                "ratio_to_python": timing.median / python,
                "round_ratios": round_ratios(timing, timings["python"]),
                "imports": [asdict(module) for module in profiles[name]],
            }
            for name, timing in timings.items()
        },
    }
    text = "\n\n".join(
        [
            render_timings(timings, (load_start, load_end)),
            *(render_imports(name, modules, top) for name, modules in profiles.items()),
        ]
    )
    return document, text


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=gen.DATA_DIR, help="the tiny run's home")
    parser.add_argument("--rounds", type=int, default=15, help="interleaved timed rounds")
    parser.add_argument("--import-rounds", type=int, default=5, help="-X importtime runs")
    parser.add_argument("--top", type=int, default=10, help="modules and packages listed")
    parser.add_argument("--json", type=Path, help="write every number here")
    parser.add_argument(
        "--base",
        type=Path,
        help="a checkout to compare with (its extension built), each command beside it",
    )
    args = parser.parse_args(argv)
    if min(args.rounds, args.import_rounds, args.top) < 1:
        parser.error("--rounds, --import-rounds and --top must be at least 1")
    document, text = measure(args.data, args.rounds, args.import_rounds, args.top, args.base)
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(document, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
