"""The tag names gradcheck's own logging helpers write, in one place.

``gradcheck.keras`` and ``gradcheck.torch`` write these tags, and ``gradcheck analyze`` pairs them
without flags. ``<param>`` is the parameter's path: Keras 3 ``variable.path``
(``sequential/dense_1/kernel``), ``tf.Variable.name`` without its ``:0`` suffix, or the PyTorch
``named_parameters()`` name (``fc1.weight``).

=============================  =========  ==================================================
tag                            kind       value
=============================  =========  ==================================================
``weights/<param>``            histogram  the parameter's values
``gradients/<param>``          histogram  the gradient's values
``weight_norm/<param>``        scalar     exact L2 norm of the parameter (float64 sum)
``gradient_norm/<param>``      scalar     exact L2 norm of the gradient (float64 sum)
``weight_nonfinite/<param>``   scalar     number of NaN/Inf elements in the parameter
``gradient_nonfinite/<param>`` scalar     number of NaN/Inf elements in the gradient
``gradient_norm/global``       scalar     L2 norm of all gradients together (see below)
``gradient_nonfinite/global``  scalar     number of NaN/Inf elements in all gradients
=============================  =========  ==================================================

The global norm is ``sqrt(sum of squared per-parameter gradient norms)``, the number a
clip-by-global-norm sees (``tf.clip_by_global_norm``, ``torch.nn.utils.clip_grad_norm_``). When
any gradient holds a NaN it is NaN, and when one holds an Inf (and none a NaN) it is +Inf: the
honest value, logged as is, with ``gradient_nonfinite/global`` saying how many elements were bad.
"""

from __future__ import annotations

from dataclasses import dataclass

WEIGHTS = "weights"
GRADIENTS = "gradients"
WEIGHT_NORM = "weight_norm"
GRADIENT_NORM = "gradient_norm"
WEIGHT_NONFINITE = "weight_nonfinite"
GRADIENT_NONFINITE = "gradient_nonfinite"
GLOBAL = "global"

GLOBAL_GRADIENT_NORM = f"{GRADIENT_NORM}/{GLOBAL}"
GLOBAL_GRADIENT_NONFINITE = f"{GRADIENT_NONFINITE}/{GLOBAL}"


@dataclass(frozen=True)
class TagSet:
    """The prefixes of the three tags written per tensor: histogram, exact norm, NaN/Inf count."""

    histogram: str
    norm: str
    nonfinite: str


WEIGHT_TAGS = TagSet(WEIGHTS, WEIGHT_NORM, WEIGHT_NONFINITE)
GRADIENT_TAGS = TagSet(GRADIENTS, GRADIENT_NORM, GRADIENT_NONFINITE)


def tag(prefix: str, param: str) -> str:
    """The tag for ``param`` under ``prefix`` (one of the constants above)."""
    return f"{prefix}/{param}"


def split_tag(tag_name: str) -> tuple[str, str] | None:
    """``(prefix, param)`` for a tag this module names, else ``None``.

    ``gradient_norm/global`` and ``gradient_nonfinite/global`` give ``(prefix, "global")``.
    """
    prefix, sep, param = tag_name.partition("/")
    if not sep or not param or prefix not in _PREFIXES:
        return None
    return prefix, param


_PREFIXES = frozenset(
    (WEIGHTS, GRADIENTS, WEIGHT_NORM, GRADIENT_NORM, WEIGHT_NONFINITE, GRADIENT_NONFINITE)
)
