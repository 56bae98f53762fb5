"""Regressions found by the held-out runs of ``scripts/make_heldout.py``, one scenario per bug,
built in memory like ``tests/test_detect.py`` (the held-out run each one comes from is named)."""

from __future__ import annotations

from tests.test_detect import Values, analyze, gaussian, walking


def test_after_a_blow_up_the_loss_of_the_healthy_steps_judges_vanishing() -> None:
    """torch_warmup_too_aggressive_explodes: the loss falls to ~0 and the gradients with it,
    then a blow-up kills every unit (zero gradients, the loss stuck at chance). Vanishing is
    judged on the steps before the blow-up, so the loss must be too: it fell there, it did not
    rise 4x."""

    def scale(step: int, base: float) -> float:
        if step < 20:
            return base * 10 ** (-step / 4)  # shrinking with the loss
        return base * 10 ** (3 * (step - 19)) if step < 24 else 0.0  # blow-up, then dead

    series: dict[str, Values] = {}
    for i, base in enumerate((0.02, 0.03, 0.05)):
        series[f"fc{i}.weight"] = walking(seed=10 + i)
        series[f"fc{i}.weight/grad"] = gaussian(lambda s, b=base: scale(s, b), seed=20 + i)
    loss = lambda s: 1.6 * 10 ** (-s / 4) if s < 20 else 1.6  # noqa: E731
    report = analyze(series, scalars={"loss": loss})
    for result in report.layers:
        assert "exploding" in result.flags, result.evidence
        assert "vanishing" not in result.flags, result.evidence
