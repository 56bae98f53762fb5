"""No contradictory extras on a run that blew up (issue 30, point 5): PyTorch MLPs at SGD lr 0.5
trained here (``scripts/time_runs_torch.py``, logged by ``gradcheck.torch.log_gradients``) are
nan, never also vanishing or "stalled", show no movement figure taken over the blow-up, and
get the hint of what came first (the gradients' or the loss's blow-up, not log(0))."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

pytest.importorskip("torch")

from gradcheck import cli  # noqa: E402
from gradcheck.model import RunReport  # noqa: E402
from gradcheck.pipeline import analyze  # noqa: E402
from gradcheck.verdicts import hints  # noqa: E402
from tests.support.scripts import load_script  # noqa: E402

pytestmark = pytest.mark.slow
RUNS = load_script("time_runs_torch")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, RunReport]]:
    out = tmp_path_factory.mktemp("blow_up")
    written = RUNS.write_runs(out, ["mlp_nan_sparse", "mlp_nan_loss_first"])
    return {name: (path, only_run(path)) for name, (path, _) in written.items()}


def only_run(path: Path) -> RunReport:
    (run,) = analyze([str(path)], jobs=1).runs
    return run


def test_a_sparsely_logged_blow_up_is_nan_with_the_blow_ups_hint_and_nothing_else(
    runs: dict[str, tuple[Path, RunReport]],
) -> None:
    path, run = runs["mlp_nan_sparse"]
    assert {layer.verdict for layer in run.layers} == {"nan"}
    for layer in run.layers:
        assert "vanishing" not in layer.flags and "stalled" not in layer.evidence
        assert layer.hint == hints.NAN_AFTER_RISE, layer.name  # not log(0), for every layer
    # the two layers whose own rise cannot be seen (3 finite logged steps) still get it
    assert [layer.name for layer in run.layers if "exploding" not in layer.flags] == [
        "0.weight",
        "0.bias",
    ]
    # the weights were thrown off by step 5 (the loss 3e6x its start): no "Kernels moved a
    # median 8e2 of their scale per update"; the healthy steps end where the loss rose
    assert run.updates == ""
    assert run.clipping is not None and "the steps before 2)" in run.clipping.rule
    assert CliRunner().invoke(cli.cli, ["analyze", str(path)]).exit_code == 1


def test_a_nan_whose_gradients_are_never_seen_rising_gets_the_loss_rises_hint(
    runs: dict[str, tuple[Path, RunReport]],
) -> None:
    _, run = runs["mlp_nan_loss_first"]
    assert {layer.verdict for layer in run.layers} == {"nan"}
    assert {layer.first_bad_step for layer in run.layers} == {10}
    assert {layer.hint for layer in run.layers} == {hints.NAN_AFTER_LOSS_RISE}
    # the loss rose 20x at step 6: the movement is that of steps 0 to 5, before it
    assert run.updates.startswith("Kernels moved a median 1e-2 of their scale per update")
