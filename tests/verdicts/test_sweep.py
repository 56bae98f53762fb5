"""The sweep view (issue 20, part 3) on the real PyTorch sweep of ``tests/data/sweep``.

Ten runs of one MLP at learning rates 0.001-2 (``scripts/make_sweep.py``), hyperparameters
logged with the HParams plugin and in the directory names: runs at lr >= 0.4 explode (those at
lr >= 1 go NaN), the others train. Checked: the hyperparameters both engines read, the counts,
the ranking and the lr split with their numbers, the automatic threshold, every format, and
hostile hyperparameter names and values.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from gradcheck import cli, report
from gradcheck.cli.status import ExitStatus
from gradcheck.engine import fastpath
from gradcheck.events.reader import read_file
from gradcheck.events.steps import StepWindow
from gradcheck.model import Report, RunReport
from gradcheck.pipeline import analyze
from gradcheck.report.escape import FORMULA_STARTS
from gradcheck.report.interface import Env
from gradcheck.series.reduce import reduce_records
from gradcheck.verdicts.run_names import name_components, name_hparams
from gradcheck.verdicts.sweep import AUTO_HPARAM_RUNS, looks_like_sweep, relations_of, summarize
from tests.support import eventfiles as ef
from tests.support.hostile import assert_terminal_safe, rendered_markdown
from tests.support.paths import REPO

SWEEP = REPO / "tests" / "data" / "sweep"
LEARNING_RATES = (0.001, 0.003, 0.01, 0.03, 0.1, 0.2, 0.4, 0.6, 1.0, 2.0)


@pytest.fixture(scope="module")
def sweep_report() -> Report:
    return analyze([str(SWEEP)], jobs=1)


def test_the_json_report_of_a_sweep_is_made_a_run_at_a_time(sweep_report: Report) -> None:
    """The sweep view first, then each run's part: joined, the whole document's text."""
    from gradcheck.report.json_format import report_document

    parts = list(report.formatter_for("json").chunks(sweep_report))
    assert sweep_report.sweep is not None and len(parts) == len(sweep_report.runs) + 2
    whole = json.dumps(report_document(sweep_report), indent=2, ensure_ascii=False)
    assert "".join(parts) == whole + "\n"
    assert [run["run"] for run in json.loads(whole)["runs"]] == [r.run for r in sweep_report.runs]


def session_start(values: dict[str, object]) -> list[object]:
    """The HParams plugin's ``session_start_info`` values as tensorboardX writes them (what
    ``SummaryWriter.add_hparams`` logs), as tensorboard protobufs for
    ``tests.support.eventfiles``."""
    from tensorboard.compat.proto import summary_pb2
    from tensorboardX.summary import hparams

    _, start, _ = hparams(values, {})
    return list(summary_pb2.Summary.FromString(start.SerializeToString()).value)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(
        cli.cli, list(args), prog_name="gradcheck", obj=Env(width=1000), catch_exceptions=False
    )


# --- hyperparameters read by both engines --------------------------------------------------


def test_every_run_carries_its_logged_hyperparameters(sweep_report: Report) -> None:
    by_lr = {run.hparams["lr"]: run for run in sweep_report.runs}
    assert sorted(by_lr) == list(LEARNING_RATES)
    for at, lr in enumerate(LEARNING_RATES):
        run = by_lr[lr]
        assert dict(run.hparams) == {
            "bs": (32.0, 64.0)[at % 2],
            "lr": lr,
            "momentum": 0.9,
            "optimizer": "sgd",
        }
        assert run.run.endswith(f"lr_{lr}_bs{(32, 64)[at % 2]}")


@pytest.mark.skipif(not fastpath.available(), reason="the C engine is not built")
def test_the_c_scanner_hands_hyperparameters_to_the_reference_decoder() -> None:
    """Per file, the C engine's hyperparameters are the reference reader's (its twin)."""
    files = sorted(SWEEP.glob("*/events.out.tfevents.*"))
    assert len(files) == len(LEARNING_RATES)
    for path in files:
        reference = reduce_records(read_file(str(path), str(path.parent)))
        fast = fastpath.reduce_file_range(str(path), str(path.parent), StepWindow())
        assert dict(fast.data.hparams) == dict(reference.hparams)
        assert reference.hparams["optimizer"] == "sgd"


@pytest.mark.skipif(not fastpath.available(), reason="the C engine is not built")
def test_the_sweep_report_is_the_same_with_either_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def json_report() -> str:
        result = invoke("analyze", str(SWEEP), "--format", "json", "-j", "1", "--fail-on", "none")
        assert result.exit_code == ExitStatus.OK, result.output
        return result.stdout

    fast = json_report()
    monkeypatch.setenv("GRADCHECK_NO_EXT", "1")
    assert not fastpath.available()
    assert json_report() == fast
    assert '"sweep"' in fast


def test_hyperparameters_of_a_run_merge_across_its_files(tmp_path: Path) -> None:
    """A later file's value wins; names only in the earlier file stay."""
    run = tmp_path / "run"
    for number, values in enumerate(({"lr": 0.1, "seed": 1}, {"lr": 0.2})):
        histo = ef.histo_of("weights/w", np.arange(8.0) * (number + 1))
        events = [ef.file_version(), ef.summary_event(0, session_start(values))]
        events.append(ef.summary_event(number + 1, [histo]))
        ef.write_events(run / f"events.out.tfevents.{number}.host.1.0", events)
    (only,) = analyze([str(run)], jobs=1).runs
    assert dict(only.hparams) == {"lr": 0.2, "seed": 1.0}


def test_undecodable_hparams_content_is_damage_in_both_engines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensorboard.compat.proto import summary_pb2

    bad = summary_pb2.Summary.Value(tag="_hparams_/session_start_info")
    bad.metadata.plugin_data.plugin_name = "hparams"
    bad.metadata.plugin_data.content = b"\xff\xff\xff"
    events = [ef.file_version(), ef.summary_event(0, [bad])]
    events += [ef.summary_event(step, [ef.histo_of("weights/w", np.arange(8.0) * step)])
               for step in range(1, 4)]  # fmt: skip
    ef.write_events(tmp_path / "run" / "events.out.tfevents.1.host.1.0", events)

    def warnings() -> tuple[str, ...]:
        (only,) = analyze([str(tmp_path / "run")], jobs=1).runs
        assert not only.hparams
        return only.warnings

    fast = warnings()
    monkeypatch.setenv("GRADCHECK_NO_EXT", "1")
    assert warnings() == fast
    assert any("not HParams plugin data" in line for line in fast), fast


# --- the numbers -------------------------------------------------------------------------


def test_counts_ranking_and_the_learning_rate_split(sweep_report: Report) -> None:
    sweep = sweep_report.sweep
    assert sweep is not None  # ten runs with hyperparameters: on by itself
    assert sweep.runs == 10
    assert {v: n for v, n in sweep.counts.items() if n} == {"nan": 2, "exploding": 2, "ok": 6}
    ranked = [Path(run.run).name for run in sweep.ranking]
    assert ranked[:4] == ["lr_2.0_bs64", "lr_1.0_bs32", "lr_0.6_bs64", "lr_0.4_bs32"]
    assert [run.verdict for run in sweep.ranking] == ["nan"] * 2 + ["exploding"] * 2 + ["ok"] * 6
    assert sweep.ranking[0].first_bad_step == 20 and sweep.ranking[1].first_bad_step == 34
    assert all(run.worst is None and run.findings == 0 for run in sweep.ranking[4:])
    assert dict(sweep.hparams) == {"bs": "logged", "lr": "logged"}  # momentum, optimizer: 1 value

    exploded, nan, batch = sweep.relations
    assert (exploded.hparam, exploded.verdict, exploded.kind, exploded.threshold) == (
        "lr", "exploding", "at_least", 0.4,
    )  # fmt: skip
    assert [(g.label, g.runs, g.matching) for g in exploded.groups] == [
        (">= 0.4", 4, 4), ("< 0.4", 6, 0),
    ]  # fmt: skip
    assert exploded.text == "all 4 runs with lr >= 0.4 exploded; none of the 6 below did"
    assert (nan.verdict, nan.kind, nan.threshold) == ("nan", "at_least", 1.0)
    assert nan.text == "both runs with lr >= 1 went NaN; none of the 8 below did"
    assert (batch.hparam, batch.kind) == ("bs", "rates")  # unrelated to the verdicts
    assert [(g.label, g.runs, g.matching) for g in batch.groups] == [("32", 5, 2), ("64", 5, 2)]


def test_hyperparameters_from_run_names_only(tmp_path: Path, sweep_report: Report) -> None:
    """The same runs under names holding a seed the logs do not: ``seed`` from the names, and
    a name's ``lr`` gives way to the logged one."""
    for at, source in enumerate(sorted(SWEEP.iterdir())):
        shutil.copytree(source, tmp_path / f"lr=9,seed={at % 7},id=r{at}")
    sweep = analyze([str(tmp_path)], jobs=1).sweep
    assert sweep is not None
    assert dict(sweep.hparams) == {
        "bs": "logged", "id": "run name", "lr": "logged", "seed": "run name",
    }  # fmt: skip
    assert not [relation for relation in sweep.relations if relation.hparam == "id"]
    assert sorted(run.hparams["lr"] for run in sweep.ranking) == list(LEARNING_RATES)
    seed = [relation for relation in sweep.relations if relation.hparam == "seed"]
    assert [relation.kind for relation in seed] == ["rates"]  # 7 values, no clean split
    (split,) = seed
    assert sum(group.runs for group in split.groups) == 10
    assert sum(group.matching for group in split.groups) == 4


def test_a_clean_split_below_and_a_value_split() -> None:
    """Hand-built run reports: findings at the low end, and a string hyperparameter."""
    from gradcheck.model import LayerResult

    def run(name: str, verdict: str, **hparams: object) -> RunReport:
        layer = LayerResult(name="w", weight_tag="w", grad_tag="g", verdict=verdict,  # type: ignore[arg-type]
                            flags=(verdict,) if verdict != "ok" else (),  # type: ignore[arg-type]
                            severity=1.0 if verdict != "ok" else 0.0, first_bad_step=None,
                            evidence="", hint="", depth=0, stats={})  # fmt: skip
        return RunReport(run=f"runs/{name}", files=(), steps=(0, 1), writers=(), warnings=(),
                         layers=(layer,), hparams=hparams)  # type: ignore[arg-type]  # fmt: skip

    runs = [
        run("a", "vanishing", lr=1e-5, opt="sgd"),
        run("b", "vanishing", lr=1e-4, opt="adam"),
        run("c", "ok", lr=1e-3, opt="sgd"),
        run("d", "ok", lr=1e-2, opt="adam"),
        run("e", "static", lr=1e-2, opt="frozen"),
        run("f", "ok", lr=1e-1, opt="sgd"),
    ]
    sweep = summarize(runs)
    texts = [relation.text for relation in sweep.relations]
    assert "both runs with lr <= 0.0001 had vanishing gradients; none of the 4 above did" in texts
    assert "the one run with opt = frozen had static weights; none of the 5 others did" in texts
    assert looks_like_sweep(runs)  # 6 runs with hyperparameters
    assert not looks_like_sweep(runs[: AUTO_HPARAM_RUNS - 1])


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("lr=0.5_bs=64", {"lr": 0.5, "bs": 64.0}),
        ("lr_0.001_bs32", {"lr": 0.001, "bs": 32.0}),
        ("bs64", {"bs": 64.0}),
        ("learning_rate_1e-4", {"learning_rate": 1e-4}),
        ("train_fn_a1b2_00000_0_batch_size=64,lr=0.0010_2024-01-02", {"batch_size": 64.0,
                                                                      "lr": 0.001}),
        ("act=leaky_relu", {"act": "leaky_relu"}),
        ("wd=-1e-4", {"wd": -1e-4}),
        ("tf_loop_exploding_nan", {}),  # nan is a word here
        ("keras_fit_weights_only", {}),
    ],
)  # fmt: skip
def test_run_name_parts(name: str, expected: dict[str, object]) -> None:
    assert name_hparams([name]) == expected


def test_run_names_are_read_below_the_shared_directory() -> None:
    assert name_components(["a/b/lr_1", "a/b/lr_2", "a/b/x/lr_3"]) == [
        ["lr_1"], ["lr_2"], ["x", "lr_3"],
    ]  # fmt: skip
    assert name_components(["runs/one"]) == [["one"]]


# --- when the view shows -------------------------------------------------------------------


def test_unrelated_runs_keep_their_report() -> None:
    """``sample_runs``' 7 examples carry no hyperparameter: no view, the JSON as before."""
    result = invoke("analyze", str(REPO / "sample_runs"), "--format", "json")
    assert result.exit_code == ExitStatus.FINDINGS
    assert "sweep" not in json.loads(result.stdout)
    forced = json.loads(invoke("analyze", str(REPO / "sample_runs"), "--sweep", "--format",
                               "json").stdout)  # fmt: skip
    assert forced["sweep"]["runs"] == 7 and forced["sweep"]["hparams"] == {}
    assert [key for key in forced] == ["schema", "gradcheck", "warnings", "sweep", "runs"]


def test_sweep_options_force_the_view(tmp_path: Path) -> None:
    few = [tmp_path / source.name for source in sorted(SWEEP.iterdir())[: AUTO_HPARAM_RUNS - 1]]
    for target in few:
        shutil.copytree(SWEEP / target.name, target)
    assert "sweep" not in json.loads(invoke("analyze", str(tmp_path), "--format", "json").stdout)
    on = invoke("analyze", str(tmp_path), "--sweep", "--format", "json")
    assert json.loads(on.stdout)["sweep"]["runs"] == AUTO_HPARAM_RUNS - 1
    off = invoke("analyze", str(SWEEP), "--no-sweep", "--format", "json")
    assert "sweep" not in json.loads(off.stdout)


# --- every format --------------------------------------------------------------------------


def _check_table(text: str) -> None:
    head = text.split("\n\n")[0]
    assert head.startswith("sweep of 10 runs under ")
    assert "all 4 runs with lr >= 0.4 exploded; none of the 6 below did" in head
    assert re.search(r"^ 1 nan +lr_2\.0_bs64 +0\.weight +20 bs=64 lr=2$", head, re.M)


def _check_markdown(text: str) -> None:
    sweep = text.split("\n### `")[0]
    assert "### sweep of 10 runs under" in sweep
    assert "- all 4 runs with lr &gt;= 0.4 exploded; none of the 6 below did" in sweep
    assert "| 1 | 🟥 nan | `lr_2.0_bs64` | `0.weight` | 20 | bs=64 lr=2 |" in sweep


def _check_json(text: str) -> None:
    sweep = json.loads(text)["sweep"]
    assert sweep["counts"]["exploding"] == 2 and sweep["counts"]["ok"] == 6
    assert sweep["relations"][0]["groups"] == [
        {"label": ">= 0.4", "runs": 4, "matching": 4},
        {"label": "< 0.4", "runs": 6, "matching": 0},
    ]
    assert len(sweep["ranking"]) == 10 and sweep["ranking"][0]["hparams"]["lr"] == 2.0


def _check_csv(text: str) -> None:
    rows = list(csv.DictReader(io.StringIO(text)))
    assert len(rows) == 40  # 4 parameters x 10 runs
    by_run = {row["run"]: row for row in rows}
    worst = by_run[f"{SWEEP}/lr_2.0_bs64"]
    assert (worst["run_verdict"], worst["run_rank"], worst["hparam.lr"]) == ("nan", "1", "2.0")
    exploded = {row["run"] for row in rows if row["run_verdict"] in ("nan", "exploding")}
    assert {float(by_run[run]["hparam.lr"]) for run in exploded} == {0.4, 0.6, 1.0, 2.0}


def _check_github(text: str) -> None:
    first = text.splitlines()[0]
    assert first.startswith("::notice title=gradcheck sweep::sweep of 10 runs")
    assert "%0Aall 4 runs with lr >= 0.4 exploded; none of the 6 below did%0A" in first


def _check_junit(text: str) -> None:
    root = ET.fromstring(text.encode("utf-8"))
    suites = root.findall("testsuite")
    assert suites[0].get("name") == "gradcheck sweep" and suites[0].get("tests") == "0"
    properties = {p.get("name"): p.get("value") for p in suites[0].iter("property")}
    assert properties["runs.nan"] == "2" and properties["hparam.lr"] == "logged"
    assert "all 4 runs with lr >= 0.4 exploded" in (suites[0].findtext("system-out") or "")
    assert root.get("tests") == "40"  # the runs' parameters: the view adds no test case


def _check_html(text: str) -> None:
    body = text.split("<body>")[1]
    assert body.index("<h2>sweep of 10 runs") < body.index("<h2><code>")
    assert "<li>all 4 runs with lr &gt;= 0.4 exploded; none of the 6 below did</li>" in body


FORMAT_CHECKS = {
    "table": _check_table,
    "markdown": _check_markdown,
    "json": _check_json,
    "csv": _check_csv,
    "github": _check_github,
    "junit": _check_junit,
    "html": _check_html,
}


@pytest.mark.parametrize("format_name", sorted(report.FORMATS))
def test_every_format_shows_the_sweep(format_name: str) -> None:
    assert format_name in FORMAT_CHECKS, f"{format_name}: say here how it shows the sweep"
    if format_name == "html":
        pytest.importorskip("plotly")
    result = invoke("analyze", str(SWEEP), "--format", format_name, "--fail-on", "none")
    assert result.exit_code == ExitStatus.OK, result.output
    FORMAT_CHECKS[format_name](result.stdout_bytes.decode("utf-8"))


# --- hostile hyperparameters ---------------------------------------------------------------

HOSTILE_NAME = "lr\x1b[2J<img src=x onerror=alert(1)>|`x`\u202e"
HOSTILE_VALUES = ('=HYPERLINK("https://evil.example")', "<script>\x1b]0;owned\x07")


@pytest.fixture(scope="module")
def hostile_sweep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Six runs (tensorboard's writer; the HParams data from tensorboardX's ``hparams``)
    whose hyperparameter names and values and directory names carry escapes, markup and
    formulas; the runs with the first value have a static parameter (a relation quotes it)."""
    root = tmp_path_factory.mktemp("hostile_sweep")
    rng = np.random.default_rng(0)
    for number in range(6):
        value = HOSTILE_VALUES[number % 2]
        start = session_start({HOSTILE_NAME: value, "step\u202esize": float(number)})
        frozen = rng.normal(size=32)
        events = [ef.file_version(), ef.summary_event(0, start)]
        for step in range(6):
            moving = ef.histo_of("mover", rng.normal(size=32) * (1 + step))
            still = ef.histo_of("still", frozen if number % 2 == 0 else rng.normal(size=32))
            events.append(ef.summary_event(step, [moving, still]))
        name = f"mode=\x1b[31m<i>{number % 3},seed_{number}"
        ef.write_events(root / name / "events.out.tfevents.1.host.1.0", events)
    return root


def test_hostile_hyperparameters_are_neutralised_in_every_format(hostile_sweep: Path) -> None:
    outputs = {}
    for format_name in sorted(report.FORMATS):
        if format_name == "html" and not _has_plotly():
            continue
        result = invoke("analyze", str(hostile_sweep), "--format", format_name, "--fail-on",
                        "none", "--sweep")  # fmt: skip
        assert result.exit_code == ExitStatus.OK, result.output
        outputs[format_name] = result.stdout_bytes.decode("utf-8")
    document = json.loads(outputs["json"])["sweep"]  # JSON keeps every string exactly
    assert HOSTILE_NAME in document["hparams"]
    assert {run["hparams"][HOSTILE_NAME] for run in document["ranking"]} == set(HOSTILE_VALUES)
    (static,) = [r for r in document["relations"] if r["verdict"] == "static"]
    assert static["kind"] == "value" and static["value"] == HOSTILE_VALUES[0]
    for format_name in ("table", "github", "junit"):
        assert_terminal_safe(outputs[format_name])
        assert "\\x1b[2J" in outputs[format_name], format_name
    assert "lr\\x1b[2J<img src=x onerror=alert(1)>|`x`\\u202e" in outputs["table"]
    html = rendered_markdown(outputs["markdown"])
    assert not re.search(r"<(img|script|i|b)\b", html)
    rows = [line for line in outputs["markdown"].splitlines() if line.startswith("| ")]
    assert len({len(re.findall(r"(?<!\\)\|", row)) for row in rows[:8]}) == 1  # sweep table
    ET.fromstring(outputs["junit"].encode("utf-8"))
    assert all(line.startswith("::") for line in outputs["github"].splitlines())
    for row in csv.reader(io.StringIO(outputs["csv"])):
        assert not any(cell.startswith(FORMULA_STARTS) for cell in row), row
    if "html" in outputs:
        assert "<img src=x" not in outputs["html"] and "<script>\x1b" not in outputs["html"]
        assert "\x1b" not in outputs["html"] and "\u202e" not in outputs["html"]


def _has_plotly() -> bool:
    try:
        import plotly  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_best_split_of_a_hyperparameter_without_a_clean_one() -> None:
    """Six values, findings at 3, 5 and 6: no clean split; the best threshold (fewest runs on
    the wrong side, the lowest of a tie) is 3. A NaN value takes no part."""
    from gradcheck.model import SweepRun

    def run(lr: float, finding: bool) -> SweepRun:
        return SweepRun(run=f"r{lr}", verdict="exploding" if finding else "ok",
                        flags=("exploding",) if finding else (), findings=int(finding),
                        worst=None, first_bad_step=None, severity=0.0,
                        hparams={"lr": lr})  # fmt: skip

    marks = (False, False, True, False, True, True)
    runs = [run(float(lr), mark) for lr, mark in zip(range(1, 7), marks, strict=True)]
    runs.append(run(float("nan"), True))
    (relation,) = relations_of("lr", runs)
    assert (relation.kind, relation.threshold) == ("rates", 3.0)
    assert [(g.label, g.runs, g.matching) for g in relation.groups] == [
        (">= 3", 4, 3), ("< 3", 2, 0),
    ]  # fmt: skip
    assert relation.text == "3 of 4 runs with lr >= 3 had a finding; 0 of the 2 below"


def test_three_runs_of_a_learning_rate_sweep_get_the_view_by_themselves(tmp_path: Path) -> None:
    """Issue 32: a 5-run learning-rate sweep, two of its runs exploding, got no view at 6."""
    names = ["lr_0.001_bs32", "lr_1.0_bs32", "lr_2.0_bs64"]
    for name in names:
        shutil.copytree(SWEEP / name, tmp_path / name)
    assert AUTO_HPARAM_RUNS == 3
    document = json.loads(invoke("analyze", str(tmp_path), "--format", "json").stdout)
    assert document["sweep"]["runs"] == 3 and "lr" in document["sweep"]["hparams"]
    table = invoke("analyze", str(tmp_path), "--fail-on", "none").stdout
    assert table.startswith("sweep of 3 runs under ")
