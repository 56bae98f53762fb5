"""Where and how to clip, in the user's framework: advice from a run's clipping summary.

The framework is guessed from the event files' writers (TensorFlow's C++ ``events_writer`` for
TF and Keras; ``tensorboard.summary.writer`` or tensorboardX for PyTorch) and, when the writer
says nothing, from the parameter names (PyTorch's ``0.weight``/``weight_hh_l0`` against Keras'
``dense/kernel``). Keras ``model.fit`` logs ``epoch_*``/``batch_*`` scalars; a TensorFlow run
without them is taken for a custom loop.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gradcheck.model import ClipInfo, Framework
from gradcheck.verdicts.config import Config

if TYPE_CHECKING:
    from gradcheck.model import RunData
    from gradcheck.verdicts.signals import Parameter

_TORCH_NAME = re.compile(r"(?:^|\.)(?:weight|bias)(?:_[a-z]{2}_l\d+\w*)?$")
_KERAS_NAME = re.compile(r"(?:^|/)(?:kernel|recurrent_kernel|bias|gamma|beta|embeddings)$")
_KERAS_FIT_SCALAR = re.compile(r"^(?:epoch|batch)_")

WHERE = {
    "pytorch": (
        "after loss.backward() and before optimizer.step(): "
        "torch.nn.utils.clip_grad_norm_(model.parameters(), {c}) "
        "(with AMP, call scaler.unscale_(optimizer) first, so that the norm is that of the "
        "true gradients)"
    ),
    "keras": (
        "on the optimizer: keras.optimizers.Adam(..., global_clipnorm={c}) clips all "
        "gradients together; clipnorm={c} clips each parameter's gradient on its own, which "
        "changes their relative scale"
    ),
    "tensorflow": (
        "after tape.gradient and before optimizer.apply_gradients: "
        "gradients, _ = tf.clip_by_global_norm(gradients, {c}) "
        "(in Keras' model.fit: global_clipnorm={c} on the optimizer, not clipnorm, which "
        "clips each parameter's gradient on its own)"
    ),
}
WHERE_UNKNOWN = (
    "after the backward pass and before the optimizer step, on all gradients together: "
    "torch.nn.utils.clip_grad_norm_(model.parameters(), {c}), "
    "tf.clip_by_global_norm(gradients, {c}), or Keras global_clipnorm={c}"
)


def guess_framework(data: RunData, parameters: list[Parameter]) -> Framework | None:
    """PyTorch, Keras (``model.fit``) or TensorFlow (a custom loop), or None when unclear."""
    writers = " ".join(info.writer for info in data.file_infos if info.writer).lower()
    fit = any(_KERAS_FIT_SCALAR.match(tag) for tag in data.scalars)
    if "pytorch" in writers or "tensorboardx" in writers:
        return "pytorch"
    if "tensorflow" in writers:
        return "keras" if fit else "tensorflow"
    # tensorboard's own writer (torch.utils.tensorboard uses it) or none known: the names
    torch_names = sum(bool(_TORCH_NAME.search(p.name)) for p in parameters)
    keras_names = sum(bool(_KERAS_NAME.search(p.name)) for p in parameters)
    if torch_names > keras_names:
        return "pytorch"
    if keras_names > torch_names:
        return "keras" if fit else "tensorflow"
    return None


def where_to_clip(framework: Framework | None, clip_norm: float | None) -> str:
    """Where in the training loop a global-norm clip of ``clip_norm`` goes, in words."""
    template = WHERE[framework] if framework is not None else WHERE_UNKNOWN
    return template.format(c="max_norm" if clip_norm is None else f"{clip_norm:.2g}")


def advice(info: ClipInfo, config: Config) -> str:
    """What to do about clipping: where to add it, or what the current clip does."""
    if info.kind is None:
        if info.suggested_clip_norm is None:
            return ""
        return (
            "Not clipped (or clipped only after the gradients were logged). To clip at "
            f"{info.suggested_clip_norm:.2g}, clip the global norm "
            f"{where_to_clip(info.framework, info.suggested_clip_norm)}."
        )
    assert info.clip_value is not None and info.clipped_share is not None
    ceiling = f"{info.clip_value:.3g}"
    most = info.clipped_share > config.clip_most_steps_share
    acts = f"it acts on {info.clipped_share:.0%} of logged steps"
    # The norms logged after a per-tensor or value clip are the clipped ones: no max_norm from them.
    instead = (
        f"{where_to_clip(info.framework, None)}, with max_norm from the norm before any clip "
        "(log the gradients before clipping, and gradcheck suggests one)"
    )
    if info.kind == "global_norm":
        if not most:
            return (
                f"Clipped by global norm at {ceiling}: {acts}, so most updates keep their "
                "size and only the larger ones are scaled down, as intended."
            )
        return (
            f"Clipped by global norm at {ceiling}: {acts}, more than "
            f"{config.clip_most_steps_share:.0%}, so nearly every update is rescaled to norm "
            f"{ceiling}: a smaller learning rate in disguise. Raise the ceiling above the usual "
            "gradient norm (log the norm before clipping to see it) so that only spikes are "
            "clipped, or lower the learning rate."
        )
    shapes = ", so it shapes nearly every update, not only the spikes" if most else ""
    if info.kind == "value":
        return (
            f"Clipped by value at ±{ceiling} (clip_grad_value_, tf.clip_by_value, Keras "
            f"clipvalue): {acts}{shapes}. Cutting each element changes the gradient's "
            "direction, not only its length; clip the global norm instead, which keeps the "
            f"direction: {instead}."
        )
    return (
        f"Each parameter's gradient is clipped on its own at norm {ceiling} (Keras clipnorm, "
        f"tf.clip_by_norm per tensor, clip_grad_norm_ per parameter): {acts}{shapes}. That "
        "changes the gradients' relative scale across layers; to clip the update as a whole, "
        f"clip the global norm {instead}."
    )


def noteworthy(info: ClipInfo, config: Config) -> bool:
    """Whether the run's clip deserves a word when nothing blew up (``ClipInfo.noteworthy``):
    a clip by value or per tensor, or one acting on more than ``clip_most_steps_share`` of the
    steps."""
    if info.kind is None:
        return False
    if info.kind != "global_norm":
        return True
    return info.clipped_share is not None and info.clipped_share > config.clip_most_steps_share
