"""``gradcheck compare`` on two PyTorch runs logged by ``gradcheck.torch.log_gradients``: one
model from one initial state on the same batches of 64, its cross-entropy averaged in A and
summed in B (``reduction="sum"``). PyTorch names are stable (``0.weight``): they match as they
are."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

torch = pytest.importorskip("torch")

from gradcheck import cli  # noqa: E402
from gradcheck.cli.status import ExitStatus  # noqa: E402
from gradcheck.report.interface import Env  # noqa: E402
from gradcheck.torch import log_gradients  # noqa: E402

pytestmark = pytest.mark.slow
BATCH, STEPS = 64, 10


def _train(log_dir: Path, reduction: str, initial: dict) -> None:
    from torch.utils.tensorboard import SummaryWriter

    generator = torch.Generator().manual_seed(1)
    x = torch.randn(BATCH * STEPS, 12, generator=generator)
    y = (x[:, :3].sum(dim=1) > 0).long() + (x[:, 3] > 1).long()
    model = torch.nn.Sequential(torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 3))
    model.load_state_dict(initial)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    writer = SummaryWriter(str(log_dir))
    for step in range(STEPS):
        batch = slice(step * BATCH, (step + 1) * BATCH)
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch], reduction=reduction)
        loss.backward()
        log_gradients(writer, model, step, bins=30)
        optimizer.step()
    writer.close()


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.manual_seed(0)
    initial = torch.nn.Sequential(
        torch.nn.Linear(12, 24), torch.nn.Tanh(), torch.nn.Linear(24, 3)
    ).state_dict()
    root = tmp_path_factory.mktemp("torch_pair")
    _train(root / "mean", "mean", initial)
    _train(root / "sum", "sum", initial)
    return root


def test_a_summed_torch_loss_gives_the_batch_size(pair: Path) -> None:
    result = CliRunner().invoke(
        cli.cli,
        ["compare", str(pair / "mean"), str(pair / "sum"), "--format", "json"],
        obj=Env(width=80),
    )
    assert result.exit_code == ExitStatus.OK, result.output
    document = json.loads(result.stdout)
    assert document["cause"] == "gradient_factor"
    assert f"a loss summed instead of averaged over a batch of {BATCH}?" in document["summary"]
    names = sorted(p["name"] for p in document["parameters"])
    assert names == ["0.bias", "0.weight", "2.bias", "2.weight"]
    for parameter in document["parameters"]:
        assert parameter["matched_by"] == "same name" and parameter["name_b"] is None
        assert parameter["grad_norm_ratio_first"] == pytest.approx(BATCH, rel=0.1)
        assert parameter["first_divergent_step"] == 0
