"""Time ``gradcheck analyze`` against reference readers on generated logs (issue 6).

Every reader runs as its own process, on the same run directory, with the files in the page
cache; readers alternate round-robin within each repeat and the median of the repeats is
reported, with peak memory (see ``measure.py``) and the CPU that other processes used
meanwhile (noise). Prints a table of ratios and writes everything to ``bench/results.json``.

By default tbparse and EventAccumulator run only on the 40 MB logs (minutes and GBs of memory
beyond), gradcheck, the bare loop and TensorBoard's Rust data server on every size; the
multi-file run compares ``gradcheck --jobs 1`` with the default. Issue 22's series follow
(``--series``): sweeps of many small runs, a parameter-count series (``bench/params.py``),
``inspect`` against ``analyze``, and the start-up (a tiny run against ``python -c pass``, and
each light command's time and imports: ``bench/startup.py``).
``make bench`` runs the defaults.

    python bench/run.py --sizes 40MB --repeats 3 --readers gradcheck,bare,tbparse,accumulator
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

if __package__ in (None, ""):  # run as a script: python bench/run.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import gen, params, readers, report, startup  # noqa: E402
from bench.ceiling import measure as measure_ceiling  # noqa: E402
from bench.measure import Measurement, run_measured  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PYTHON = sys.executable
READERS_SCRIPT = str(REPO / "bench" / "readers.py")
UNSET_FOR_BENCHMARK = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")  # they slow a current numpy
GRADCHECK_FLAGS = ("--format", "json", "--fail-on", "none", "--no-progress")


@dataclass(frozen=True)
class Reader:
    """A way to read a run directory, as a command line."""

    name: str
    slow: bool  # measured only up to --slow-max-size by default
    command: Callable[[Path], list[str]]
    description: str
    ready: str | None = None  # a server: timed until it logs this (see measure.run_measured)


def _script_reader(name: str, slow: bool, description: str) -> Reader:
    return Reader(name, slow, lambda path: [PYTHON, READERS_SCRIPT, name, str(path)], description)


_ONE_BLAS_THREAD = 'import os; os.environ.setdefault("OPENBLAS_NUM_THREADS", "1"); '
"""What ``gradcheck``'s entry point does before numpy is imported (see ``cli.main``): without
it, numpy's OpenBLAS starts a thread per CPU, which the floor would pay and gradcheck does not."""
FLOOR_CODE = _ONE_BLAS_THREAD + "import numpy, click"
"""The ``floor`` reader: Python and the imports every ``gradcheck analyze`` needs before it can
read a byte (numpy, click), and nothing else. No analysis built on these packages can be
faster; where the floor alone takes longer than the bare loop, "no slower than the bare loop"
cannot be met (the report says so beside the target)."""
IMPORTS_CODE = (
    _ONE_BLAS_THREAD + "import gradcheck.cli, gradcheck.pipeline, gradcheck.report.json_format"
)
"""The ``imports`` reader: Python and every module ``gradcheck analyze --format json`` imports
before it reads a byte (the floor's, and gradcheck's own): its start-up, as it is built now."""


def _gradcheck(jobs: int | None) -> Callable[[Path], list[str]]:
    extra = ["--jobs", str(jobs)] if jobs is not None else []
    return lambda path: [PYTHON, "-m", "gradcheck", "analyze", str(path), *GRADCHECK_FLAGS, *extra]


def _rust(checksum: bool) -> Reader:
    name = "rust-checksum" if checksum else "rust"
    what = "with" if checksum else "without"
    return Reader(
        name,
        False,
        lambda path: readers.rust_command(str(path), checksum),
        f"TensorBoard's Rust data server, one load cycle, {what} --checksum",
        readers.RUST_READY,
    )


READERS: dict[str, Reader] = {
    reader.name: reader
    for reader in (
        Reader("gradcheck", False, _gradcheck(None), "gradcheck analyze (JSON report)"),
        Reader("gradcheck-1job", False, _gradcheck(1), "gradcheck analyze --jobs 1"),
        _script_reader("gradcheck-read", False, "gradcheck.read() alone"),
        _script_reader("gradcheck-load", False, "analyze --jobs 1 up to reading (no verdicts)"),
        _script_reader("gradcheck-judge", False, "analyze --jobs 1 up to verdicts (no JSON)"),
        _script_reader("bare", False, "struct framing + Event.FromString"),
        Reader("floor", False, lambda _: [PYTHON, "-c", FLOOR_CODE], "python + numpy, click"),
        Reader("imports", False, lambda _: [PYTHON, "-c", IMPORTS_CODE], "gradcheck's imports"),
        Reader("python", False, lambda _: [PYTHON, "-c", "pass"], "python -c pass"),
        Reader(
            "inspect",
            False,
            lambda path: [PYTHON, "-m", "gradcheck", "inspect", str(path), "--format", "json"],
            "gradcheck inspect (JSON listing)",
        ),
        _rust(checksum=False),
        _rust(checksum=True),
        _script_reader("tbparse", True, "tbparse SummaryReader"),
        _script_reader("accumulator", True, "EventAccumulator, size_guidance 0 (TF installed)"),
        _script_reader("accumulator-notf", True, "EventAccumulator without TensorFlow"),
    )
}
DEFAULT_READERS = (
    "gradcheck,gradcheck-1job,bare,floor,imports,rust,rust-checksum,tbparse,accumulator"
)
MULTI_READERS = ("gradcheck-1job", "gradcheck", "bare", "floor", "rust")
SWEEP_READERS = (
    "gradcheck-1job",
    "gradcheck",
    "rust",
    "rust-checksum",
    *("imports", "gradcheck-load", "gradcheck-judge"),  # the floor by stage (report.STAGES)
)
START_UP_READERS = ("gradcheck", "gradcheck-1job", "python", "imports")
INSPECT_READERS = ("gradcheck", "inspect")
SERIES = ("logs", "sweep", "params", "inspect", "startup")


@dataclass(frozen=True)
class Result:
    """One measured run of one reader on one dataset."""

    dataset: str
    reader: str
    repeat: int
    measurement: Measurement
    values: int | None  # values the reader reported (None: not reported)
    layers: int | None  # gradcheck: parameters in the report
    verdicts: dict[str, int] | None  # gradcheck: layers per verdict
    problem: str  # "" when the run succeeded and its output checked out


def child_environment(data: Path) -> dict[str, str]:
    """The environment for measured processes: quiet TensorFlow, no GPU, OpenBLAS defaults.

    Bytecode is cached (under ``data/pycache``, outside the source tree), as for an installed
    package: with ``PYTHONDONTWRITEBYTECODE`` every run compiled gradcheck's ~40 modules from
    source (~0.07 s), a cost no user pays. Each reader runs once unmeasured to fill the cache.
    """
    env = {k: v for k, v in os.environ.items() if k not in UNSET_FOR_BENCHMARK}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES="", PYTHONPYCACHEPREFIX=str(data / "pycache")
    )
    return env


def gradcheck_help(env: dict[str, str]) -> str | None:
    """``gradcheck analyze --help``, or None when the command does not exist yet."""
    done = subprocess.run(
        [PYTHON, "-m", "gradcheck", "analyze", "--help"],
        capture_output=True,
        text=True,
        env=env,
        cwd=REPO,
        check=False,
    )
    return done.stdout if done.returncode == 0 else None


def warm_cache(info: gen.DatasetInfo) -> None:
    """Read the dataset's files once so that every reader finds them in the page cache."""
    for file in info.files:
        with open(file, "rb") as stream:
            while stream.read(1 << 24):
                pass


def _check_gradcheck(result_stdout: str, info: gen.DatasetInfo) -> tuple[int | None, dict, str]:
    try:
        document = json.loads(result_stdout)
        layers = [layer for run in document["runs"] for layer in run["layers"]]
    except (ValueError, KeyError, TypeError) as error:
        return None, {}, f"gradcheck output is not the JSON report: {error}"
    verdicts: dict[str, int] = {}
    for layer in layers:
        verdicts[layer["verdict"]] = verdicts.get(layer["verdict"], 0) + 1
    problem = ""
    runs = len({Path(file).parent for file in info.files})  # a sweep: a directory per run
    if len(document["runs"]) != runs:
        problem = f"{len(document['runs'])} runs reported, the log has {runs}"
    elif len(layers) != runs * info.parameters:
        problem = f"{len(layers)} layers reported, the log has {info.parameters} parameters"
        problem += f" in each of {runs} runs" if runs > 1 else ""
    return len(layers), verdicts, problem


def _check_inspect(result_stdout: str, info: gen.DatasetInfo) -> str:
    try:
        document = json.loads(result_stdout)
        seen = sum(
            tag["count"]
            for run in document["runs"]
            for file in run["files"]
            for tag in file["tags"]
        )
    except (ValueError, KeyError, TypeError) as error:
        return f"inspect output is not the JSON listing: {error}"
    expected = info.histograms + info.scalars
    return "" if seen == expected else f"inspect counted {seen} values, the log has {expected}"


def _check_reader(result_stdout: str, info: gen.DatasetInfo) -> tuple[int | None, str]:
    try:
        values = int(json.loads(result_stdout.strip().splitlines()[-1])["values"])
    except (ValueError, KeyError, IndexError, TypeError) as error:
        return None, f"reader output unreadable: {error}"
    expected = info.histograms + info.scalars
    return values, "" if values == expected else f"{values} values read, the log has {expected}"


def measure_once(
    reader: Reader,
    info: gen.DatasetInfo,
    repeat: int,
    scratch: Path,
    env: dict[str, str],
    timeout: float,
) -> Result:
    """Run ``reader`` once on ``info``'s run directory and check what it produced."""
    out = scratch / f"{info.name}.{reader.name}.{repeat}.out"
    measurement = run_measured(
        reader.command(Path(info.directory)), env, REPO, out, timeout, reader.ready
    )
    values, layers, verdicts, problem = None, None, None, ""
    if measurement.returncode != 0:
        problem = f"exit status {measurement.returncode}: {measurement.stderr_tail[-300:]}"
    elif reader.name in ("floor", "imports", "python") or reader.ready is not None:
        pass  # reads nothing, or a server (tests/project/test_bench_guard.py counts its values)
    elif reader.name == "inspect":
        problem = _check_inspect(measurement.stdout, info)
    elif reader.name in ("gradcheck", "gradcheck-1job"):
        layers, verdicts, problem = _check_gradcheck(measurement.stdout, info)
    else:
        values, problem = _check_reader(measurement.stdout, info)
    kept_output = (
        "" if layers is not None else measurement.stdout[-300:]
    )  # the report is summarised
    stored = Measurement(**{**asdict(measurement), "stdout": kept_output})
    return Result(info.name, reader.name, repeat, stored, values, layers, verdicts, problem)


def measure_dataset(
    info: gen.DatasetInfo,
    readers: Sequence[Reader],
    repeats: int,
    scratch: Path,
    env: dict[str, str],
    timeout: float,
    warmed: set[str],
) -> list[Result]:
    """All readers on one dataset, alternating, ``repeats`` rounds (order rotated each round).

    A reader not yet in ``warmed`` first runs once unmeasured (bytecode cache, lazy imports).
    """
    warm_cache(info)
    for reader in readers:
        if reader.name not in warmed:
            measure_once(reader, info, -1, scratch, env, timeout)
            warmed.add(reader.name)
    results = []
    for repeat in range(repeats):
        shift = repeat % len(readers)
        for reader in [*readers[shift:], *readers[:shift]]:
            result = measure_once(reader, info, repeat, scratch, env, timeout)
            results.append(result)
            status = f"  {result.problem}" if result.problem else ""
            print(
                f"  {info.name:<14} {reader.name:<16} #{repeat + 1}"
                f" {result.measurement.wall_seconds:8.2f} s"
                f" {result.measurement.tree_rss_mb:7.0f} MB"
                f"  (others busy: {result.measurement.other_cpus:.1f} CPU){status}",
                file=sys.stderr,
                flush=True,
            )
    return results


def plan(args: argparse.Namespace, has_jobs: bool) -> list[tuple[str, list[Reader]]]:
    """Which readers run on which dataset: the logs (``--sizes``, ``--multi``), then the
    series of ``--series`` (a dataset two series share gets both's readers)."""
    readers = [READERS[name] for name in _split(args.readers)]
    slow_max = gen.parse_size(args.slow_max_size)
    series = set(_split(args.series))
    work: dict[str, list[Reader]] = {}

    def add(name: str, names: Sequence[str]) -> None:
        chosen = work.setdefault(name, [])
        for reader in names:
            if (has_jobs or reader != "gradcheck-1job") and READERS[reader] not in chosen:
                chosen.append(READERS[reader])

    if "logs" in series:
        for name in gen.dataset_names(_split(args.sizes), _split(args.encodings), []):
            spec = gen.parse_dataset(name)
            chosen = [r.name for r in readers if not r.slow or spec.file_bytes <= slow_max]
            if chosen:
                add(name, chosen)
        for name in gen.dataset_names([], _split(args.encodings), _split(args.multi)):
            add(name, MULTI_READERS)
    if series & {"startup", "params", "sweep"}:  # the tiny run: start-up, subtracted below
        add(params.tiny_name(), START_UP_READERS)
    if "sweep" in series:
        for name in gen.dataset_names([], ["tensor"], _split(args.sweep)):
            add(name, SWEEP_READERS)
    if "params" in series:
        for count in _counts(args.params):
            add(params.dataset_name(count, args.params_steps), ("gradcheck-1job", "rust"))
    if "inspect" in series:
        add(params.dataset_name(1000, args.params_steps), INSPECT_READERS)
    return list(work.items())


def _counts(text: str) -> list[int]:
    return [int(item) for item in _split(text)]


def ensure(args: argparse.Namespace, name: str) -> gen.DatasetInfo:
    """The dataset ``name``, written first if missing: a parameter-series log
    (``params-<count>x<steps>``, ``bench/params.py``) or one of ``bench/gen.py``'s."""
    if name.startswith("params-"):
        count, steps = name.removeprefix("params-").split("x")
        return params.ensure_log(args.data, int(count), int(steps))
    return gen.ensure_dataset(args.data, name)


def repeats_for(args: argparse.Namespace, name: str, info: gen.DatasetInfo) -> int:
    """``--repeats`` for the logs; for the series ``--series-repeats``, or ``--big-repeats``
    on a series log of 300 MB or more (a run of a minute or more)."""
    logs = gen.dataset_names(_split(args.sizes), _split(args.encodings), _split(args.multi))
    if name in logs:
        return int(args.repeats)
    return int(args.big_repeats if info.bytes >= 300e6 else args.series_repeats)


def _split(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def _startup(command: list[str], env: dict[str, str], scratch: Path) -> float:
    runs = [
        run_measured(command, env, REPO, scratch / "startup.out", 60).wall_seconds for _ in range(3)
    ]
    return round(statistics.median(runs), 3)


def code_version() -> dict[str, object]:
    """The commit being measured, and files under gradcheck/ that differ from it (the editable
    install runs the working tree, so uncommitted changes are measured too)."""

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], capture_output=True, text=True, cwd=REPO, check=False)
        return done.stdout.strip() if done.returncode == 0 else ""

    changed = git("status", "--porcelain", "--", "gradcheck").splitlines()
    return {"commit": git("rev-parse", "--short", "HEAD") or None, "uncommitted": changed}


def environment_facts(env: dict[str, str], scratch: Path, help_text: str | None) -> dict:
    """What the numbers depend on: machine, versions, interpreter and gradcheck start-up."""
    from importlib.metadata import PackageNotFoundError, version

    versions: dict[str, str | None] = {}
    for package in ("gradcheck", "tensorboard", "protobuf", "numpy", "tbparse", "google-crc32c"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    facts = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "unset": [name for name in UNSET_FOR_BENCHMARK if name in os.environ],
        "load_average_at_start": os.getloadavg(),
        "code_at_start": code_version(),
        "python_startup_seconds": _startup([PYTHON, "-c", "pass"], env, scratch),
    }
    if help_text is not None:
        facts["gradcheck_startup_seconds"] = _startup(
            [PYTHON, "-m", "gradcheck", "--version"], env, scratch
        )
    return facts


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, default=gen.DATA_DIR, help="datasets (written if missing)"
    )
    parser.add_argument("--sizes", default="40MB,160MB,1GB", help="single-file log sizes")
    parser.add_argument("--encodings", default="tensor,histo", help="tensor, histo or both")
    parser.add_argument(
        "--multi",
        default="4x40MB,4x250MB,4runs40MB",
        help="multi-file layouts: 4x40MB (one run in 4 files), 4runs40MB (4 runs); '' for none",
    )
    parser.add_argument("--readers", default=DEFAULT_READERS, help=f"of: {', '.join(READERS)}")
    parser.add_argument(
        "--series",
        default=",".join(SERIES),
        help="logs (--sizes, --multi), sweep, params, inspect (on params-1000xSTEPS), startup",
    )
    parser.add_argument(
        "--sweep", default="200runs200kB,1000runs200kB", help="sweeps of small TF2 runs"
    )
    parser.add_argument("--params", default="100,1000,5000,20000", help="parameter counts")
    parser.add_argument("--params-steps", type=int, default=50, help="steps of the params logs")
    parser.add_argument("--series-repeats", type=int, default=5, help="runs per series log")
    parser.add_argument("--big-repeats", type=int, default=3, help="... of 300 MB or more")
    parser.add_argument("--slow-max-size", default="40MB", help="largest log for slow readers")
    parser.add_argument(
        "--repeats", type=int, default=7, help="runs per reader and log (issue 36: 7 rounds)"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds before a run is killed"
    )
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results.json")
    args = parser.parse_args(argv)
    unknown = set(_split(args.readers)) - set(READERS)
    if unknown:
        parser.error(f"unknown readers: {', '.join(sorted(unknown))}")
    if min(args.repeats, args.series_repeats, args.big_repeats) < 1:
        parser.error("--repeats, --series-repeats and --big-repeats must be at least 1")
    if set(_split(args.series)) - set(SERIES):
        parser.error(f"unknown series: {args.series} (of: {', '.join(SERIES)})")
    try:
        gen.dataset_names(_split(args.sizes), _split(args.encodings), _split(args.multi))
        gen.dataset_names([], ["tensor"], _split(args.sweep))
        _counts(args.params)
        gen.parse_size(args.slow_max_size)
    except ValueError as error:
        parser.error(str(error))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    """Generate what is missing, measure, print the table, write the JSON."""
    args = parse_args(argv)
    env = child_environment(args.data)
    help_text = gradcheck_help(env)
    has_jobs = help_text is not None and "--jobs" in help_text
    readers_wanted = _split(args.readers)
    if help_text is None:
        print(
            "gradcheck analyze is not available: measuring the other readers only", file=sys.stderr
        )
        args.readers = ",".join(r for r in readers_wanted if not r.startswith("gradcheck"))
    elif not has_jobs and args.multi:
        print(
            "gradcheck analyze has no --jobs option: multi-file speed-up not measured",
            file=sys.stderr,
        )
    work = plan(args, has_jobs and help_text is not None)
    results: list[Result] = []
    infos: dict[str, gen.DatasetInfo] = {}
    warmed: set[str] = set()
    with tempfile.TemporaryDirectory(prefix="gradcheck-bench-") as scratch_dir:
        scratch = Path(scratch_dir)
        facts = environment_facts(env, scratch, help_text)
        for name, readers in work:
            print(f"dataset {name}: writing if needed", file=sys.stderr, flush=True)
            infos[name] = ensure(args, name)
            repeats = repeats_for(args, name, infos[name])
            results += measure_dataset(
                infos[name], readers, repeats, scratch, env, args.timeout, warmed
            )
        multi = gen.dataset_names([], _split(args.encodings), _split(args.multi))
        several = [info for info in infos.values() if len(info.files) > 1 and info.name in multi]
        if has_jobs and several:  # the machine's own limit for the 2-core target
            largest = max(several, key=lambda info: info.bytes)
            print(f"two-core ceiling on {largest.name}", file=sys.stderr, flush=True)
            ceiling = measure_ceiling(largest.files, env, REPO, args.repeats, PYTHON)
            facts["two_core_ceiling"] = {
                "dataset": largest.name,
                **asdict(ceiling),
                "ratio": round(ceiling.ratio, 3),
            }
    facts["load_average_at_end"] = os.getloadavg()
    facts["code_at_end"] = code_version()
    summary = report.summarise(results, infos)
    ceiling_ratio = facts.get("two_core_ceiling", {}).get("ratio")
    targets = report.evaluate_targets(summary, ceiling_ratio)
    print(report.render(summary, targets, facts, args))
    imports: dict[str, object] | None = None
    if "startup" in _split(args.series) and help_text is not None:
        print("start-up by command (bench/startup.py)", file=sys.stderr, flush=True)
        imports, text = startup.measure(args.data, 15, 5, 10)
        print(f"\n{text}")
    document = {
        "meta": {**facts, "arguments": {k: str(v) for k, v in vars(args).items()}},
        "datasets": {name: asdict(info) for name, info in infos.items()},
        "summary": [asdict(item) for item in summary],
        "targets": [asdict(item) for item in targets],
        "runs": [asdict(result) for result in results],
        "startup_by_command": imports,
    }
    args.json.write_text(json.dumps(document, indent=1) + "\n")
    print(f"results written to {args.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
