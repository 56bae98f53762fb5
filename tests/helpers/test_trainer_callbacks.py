"""``gradcheck.hf`` and ``gradcheck.lightning``: what the callbacks log, through every logger
the trainer has, is judged per parameter by ``gradcheck analyze``.

The trainings are ``tests/support/callback_logs.py`` (a tiny GPT-2 under the HF Trainer reporting to
TensorBoard, W&B and MLflow, with its ``trainer_state.json``; a small MLP under Lightning with
TensorBoard, CSV, MLflow and W&B loggers), run once per session in two processes: a healthy
run, a broken one (SGD at a learning rate far too high: exploding, then NaN), and the same
training with and without the callback.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gradcheck.cli import cli
from gradcheck.cli.status import ExitStatus
from gradcheck.events.discover import discover
from gradcheck.events.reader import read_run
from gradcheck.model import HistogramRecord, RunReport, ScalarRecord
from gradcheck.pipeline import analyze
from tests.support.library_runs import WriterProcesses
from tests.support.paths import REPO

pytestmark = pytest.mark.slow

LOGGERS = {
    "hf": ("tensorboard", "hf-trainer", "mlflow-files", "wandb"),
    "lightning": ("tensorboard", "lightning-csv", "mlflow-files", "wandb"),
}
CASES = [(trainer, source) for trainer, sources in LOGGERS.items() for source in sources]
HISTOGRAMS = ("tensorboard", "wandb")
"""The loggers that hold histograms (the others get the scalars only)."""
PARAMETERS = {
    "hf": 16,  # GPT-2, one block: wte, wpe, ln_1, c_attn, c_proj, ln_2, c_fc, c_proj, ln_f
    "lightning": 4,  # two linear layers
}


def facts(logs: WriterProcesses, trainer: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((logs.root(trainer) / "facts.json").read_text())
    return loaded


def the_report(logs: WriterProcesses, trainer: str, kind: str, source: str) -> RunReport:
    """The report on the run that ``source`` (a logger) wrote of the ``kind`` training."""
    root = logs.root(trainer) / kind
    runs = [run for run in discover([str(root)]) if run.format == source]
    assert len(runs) == 1, [run.path for run in discover([str(root)])]
    (report,) = [r for r in analyze([str(root)], jobs=1).runs if r.run == runs[0].path]
    return report


@pytest.mark.parametrize(("trainer", "source"), CASES)
def test_healthy_runs_are_judged_per_parameter_and_clean(
    callback_logs: WriterProcesses, trainer: str, source: str
) -> None:
    report = the_report(callback_logs, trainer, "healthy", source)
    assert len(report.layers) == PARAMETERS[trainer]
    assert {layer.verdict for layer in report.layers} == {"ok"}, [
        (layer.name, layer.verdict, layer.evidence) for layer in report.layers
    ]
    for layer in report.layers:  # every row judged on its gradient norms, read per parameter
        assert (
            layer.grad_tag is not None
            and "gradient_norm/" in layer.grad_tag
            or (source in HISTOGRAMS and layer.grad_tag == f"gradients/{layer.name}")
        ), layer


@pytest.mark.parametrize(("trainer", "source"), CASES)
def test_broken_runs_turn_nan_at_the_step_the_trainer_saw_it(
    callback_logs: WriterProcesses, trainer: str, source: str
) -> None:
    """SGD at a learning rate far too high: every parameter flagged NaN, the first of them at
    the first step whose gradient held a NaN by the trainer's own account, after a rise that
    the exploding rule flags on parameters of each run."""
    first_nan = facts(callback_logs, trainer)["broken"]["first_nan"]
    assert first_nan is not None and first_nan > 2
    report = the_report(callback_logs, trainer, "broken", source)
    assert len(report.layers) == PARAMETERS[trainer]
    assert {layer.verdict for layer in report.layers} == {"nan"}
    assert min(layer.onsets["nan"] for layer in report.layers) == first_nan
    exploding = [layer for layer in report.layers if "exploding" in layer.flags]
    assert exploding and all(layer.onsets["exploding"] < first_nan for layer in exploding)


@pytest.mark.parametrize("trainer", sorted(LOGGERS))
def test_the_command_fails_the_broken_runs_and_passes_the_healthy(
    callback_logs: WriterProcesses, trainer: str
) -> None:
    root = callback_logs.root(trainer)
    healthy = CliRunner().invoke(cli, ["analyze", str(root / "healthy")])
    broken = CliRunner().invoke(cli, ["analyze", str(root / "broken")])
    assert healthy.exit_code == ExitStatus.OK, healthy.output
    assert broken.exit_code == ExitStatus.FINDINGS, broken.output


@pytest.mark.parametrize(("trainer", "source"), CASES)
def test_each_logger_holds_every_parameter_s_norms_and_histograms_where_it_can(
    callback_logs: WriterProcesses, trainer: str, source: str
) -> None:
    root = callback_logs.root(trainer) / "healthy"
    (run,) = [run for run in discover([str(root)]) if run.format == source]
    records = list(read_run(run))
    scalars = {r.tag for r in records if isinstance(r, ScalarRecord)}
    histograms = {r.tag for r in records if isinstance(r, HistogramRecord)}
    norms = {tag for tag in scalars if re.search(r"(?:^|/)gradient_norm/(?!global$)", tag)}
    assert len(norms) == PARAMETERS[trainer]
    assert any(tag.endswith("gradient_norm/global") for tag in scalars)
    assert any(tag.endswith("gradient_nonfinite/global") for tag in scalars)
    assert len({tag for tag in scalars if "/weight_norm/" in f"/{tag}"}) == PARAMETERS[trainer]
    if source in HISTOGRAMS:
        assert len({t for t in histograms if t.startswith("gradients/")}) == PARAMETERS[trainer]
        assert len({t for t in histograms if t.startswith("weights/")}) == PARAMETERS[trainer]
    else:
        assert not histograms
    steps = {r.step for r in records if isinstance(r, ScalarRecord) and r.tag in norms}
    assert steps == set(range(1, 31) if trainer == "hf" else range(30))  # every step logged


@pytest.mark.parametrize("trainer", sorted(LOGGERS))
def test_training_is_bit_identical_with_and_without_the_callback(
    callback_logs: WriterProcesses, trainer: str
) -> None:
    """The same training twice, the callback logging every step with histograms in one:
    the final weights are equal bit for bit (SHA-256 of every parameter's bytes)."""
    assert facts(callback_logs, trainer)["identical"] is True


def test_hf_reads_fp16_gradients_unscaled_as_the_grad_scaler_does(
    callback_logs: WriterProcesses,
) -> None:
    """Bit for bit, with a scale that is no power of two (``unscaled_as_the_scaler_does`` in
    ``tests/support/callback_logs.py``: the Trainer's fp16 needs a GPU, the scaler's arithmetic
    not)."""
    assert facts(callback_logs, "hf")["unscaled"] is True


def test_missing_frameworks_give_an_install_hint(tmp_path: Path) -> None:
    import subprocess
    import sys

    for module, package, extra in (
        ("transformers", "transformers", "hf"),
        ("lightning", "lightning", "lightning"),
    ):
        (tmp_path / f"{module}.py").write_text("raise ImportError('not installed (test)')\n")
        code = f"import gradcheck.{extra}"
        done = subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONPATH": f"{tmp_path}:{REPO}"},
            capture_output=True,
            text=True,
        )
        assert done.returncode == 1
        assert (
            f"gradcheck.{extra} needs {module}, which is not installed: "
            f"pip install {package} (gradcheck's {extra} extra)"
        ) in done.stderr
        (tmp_path / f"{module}.py").unlink()
