"""Roles of scalar tags (:func:`scalar_role`, :func:`scalar_roles`): the exact norms and
non-finite counts that gradcheck's logging helpers write (:mod:`gradcheck.tags.logtags`), common
global gradient norm tags, the loss scale, the learning rate and loss tags."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from gradcheck.tags.roles import GRAD_WORD, normalise_name

ScalarKind = Literal[
    "grad_norm",  # L2 (or other) norm of one parameter's gradient
    "weight_norm",  # exact L2 norm of one parameter
    "grad_nonfinite",  # number of NaN/Inf elements in one gradient
    "weight_nonfinite",  # number of NaN/Inf elements in one parameter
    "global_grad_norm",  # norm of all gradients together
    "global_grad_nonfinite",  # number of NaN/Inf elements in all gradients
    "loss_scale",  # the dynamic loss scale of mixed-precision training (GradScaler)
    "learning_rate",  # the optimizer's learning rate (Keras, Lightning LearningRateMonitor, HF)
    "loss",
]


@dataclass(frozen=True)
class ScalarRole:
    """What a scalar tag measures; ``name`` is the parameter it belongs to (per-parameter kinds)."""

    kind: ScalarKind
    name: str | None = None


_HELPER_SCALAR = re.compile(
    r"^(?:.*/)?(?P<prefix>gradient_norm|weight_norm|gradient_nonfinite|weight_nonfinite)"
    r"/(?P<name>.+)$"
)
_HELPER_KINDS: dict[str, tuple[ScalarKind, ScalarKind | None]] = {
    "gradient_norm": ("grad_norm", "global_grad_norm"),
    "weight_norm": ("weight_norm", None),
    "gradient_nonfinite": ("grad_nonfinite", "global_grad_nonfinite"),
    "weight_nonfinite": ("weight_nonfinite", None),
}
_GLOBAL_NAMES = frozenset(("global", "total", "all"))
_AGGREGATE = re.compile(
    r"^(?:min|max|mean|avg|average|median|std|var|sum|count|clip\w*|pre_?clip|post_?clip"
    r"|(?:p|percentile_?)\d+)$",
    re.IGNORECASE,
)
"""Names under ``grad_norm/`` that summarise all parameters' norms (``grad_norm/max``,
``grad_norm/clipped``) rather than name one."""
"""Parameter names that stand for all gradients together (``gradient_norm/global``)."""
_GRAD_NORM_WORD = r"grad(?:ient)?s?[-_ ]?(?:l2[-_ ]?)?norms?"
_P_NORM = r"grad_(?:[0-9.]+|inf)_norm"
"""Lightning's ``grad_norm(module, norm_type)`` keys: ``grad_2.0_norm``, ``grad_inf_norm``."""
# Per-parameter gradient norms written by other tools and by hand, the name in group ``name``:
# Lightning ``grad_2.0_norm/<p>``; ``grad_norm/<p>``; ``gradients/<p>/norm``.
_PARAM_GRAD_NORM_PREFIX = re.compile(
    rf"^(?:.*/)?(?:{_P_NORM}|{_GRAD_NORM_WORD})/(?P<name>.+)$", re.IGNORECASE
)
_PARAM_GRAD_NORM_INSIDE = re.compile(
    rf"^(?:.*/)?{GRAD_WORD}/(?P<name>.+)/(?:l2_?)?norm$", re.IGNORECASE
)
# ``<p>/grad_norm``, ``<p>.grad_norm``, ``<p>_grad_norm``: per parameter only when a run has
# several of them (see :func:`scalar_roles`); one alone is the run's global norm, as the HF
# Trainer's ``train/grad_norm``.
_SUFFIX_GRAD_NORM = re.compile(rf"^(?P<name>.+?)[/._]{_GRAD_NORM_WORD}$", re.IGNORECASE)
# Global gradient norms other tools write: HF Trainer ``train/grad_norm``, Lightning
# ``grad_2.0_norm_total``, Megatron ``grad-norm``, hand-written ``global_grad_norm``,
# ``total_norm`` (what ``clip_grad_norm_`` returns) and the like.
_GLOBAL_NORM = re.compile(
    rf"^(?:.*/)?(?:(?:global|total)[-_]?)?(?:{_GRAD_NORM_WORD}|{_P_NORM})(?:[-_](?:total|global))?$",
    re.IGNORECASE,
)
_BARE_GLOBAL_NORM = re.compile(r"^(?:.*/)?(?:global|total)[-_]?norm$", re.IGNORECASE)
_NOT_GRADIENT = re.compile(r"param|weight", re.IGNORECASE)
"""``params/global_norm`` is the weights' norm, not the gradients'."""
_LOSS_SCALE = re.compile(
    r"(?:^|/)(?:loss[-_]?scale|grad(?:ient)?[-_]?scaler?|scaler(?:/scale)?|amp[/_](?:loss[-_]?)?scale)$",
    re.IGNORECASE,
)
_LOSS = re.compile(r"loss", re.IGNORECASE)
# Keras ``epoch_learning_rate`` / ``learning_rate``, HF Trainer ``train/learning_rate``,
# Lightning's LearningRateMonitor ``lr-Adam``, ``lr-SGD/pg1``, hand-written ``lr``.
_LEARNING_RATE = re.compile(
    r"(?:^|/)(?:(?:epoch|batch)_)?(?:learning[-_ ]?rate|lr)(?:$|[-/](?!.*(?:loss|momentum|decay)))",
    re.IGNORECASE,
)


_ANY_ROLE = re.compile(r"norm|nonfinite|scale|loss|learning|lr", re.IGNORECASE)
"""A word every tag with a role holds: one search rules out the usual metric (``accuracy``,
``tag_123``) before the patterns below (a run may log 10^6 scalar tags)."""


def scalar_role(tag: str) -> ScalarRole | None:
    """The role of a scalar tag on its own, or ``None`` when gradcheck does not use it.

    ``<p>/grad_norm`` alone is read as a global norm; :func:`scalar_roles` reads it per
    parameter when the run holds several such tags."""
    if not _ANY_ROLE.search(tag):
        return None
    helper = _HELPER_SCALAR.match(tag)
    if helper:
        per_param, global_kind = _HELPER_KINDS[helper.group("prefix")]
        name = helper.group("name")
        if name.lower() in _GLOBAL_NAMES and global_kind is not None:
            return ScalarRole(global_kind)
        return ScalarRole(per_param, normalise_name(name))
    if _GLOBAL_NORM.match(tag) or (_BARE_GLOBAL_NORM.match(tag) and not _NOT_GRADIENT.search(tag)):
        return ScalarRole("global_grad_norm")
    for pattern in (_PARAM_GRAD_NORM_PREFIX, _PARAM_GRAD_NORM_INSIDE):
        match = pattern.match(tag)
        if match:
            name = match.group("name")
            if name.lower() in _GLOBAL_NAMES:
                return ScalarRole("global_grad_norm")
            if _AGGREGATE.match(name):
                return None  # ``grad_norm/max``: a statistic over parameters, not one of them
            return ScalarRole("grad_norm", normalise_name(name))
    if _SUFFIX_GRAD_NORM.match(tag):
        return ScalarRole("global_grad_norm")
    if _LOSS_SCALE.search(tag):
        return ScalarRole("loss_scale")
    if _LEARNING_RATE.search(tag):
        return ScalarRole("learning_rate")
    if _LOSS.search(tag):
        return ScalarRole("loss")
    return None


def scalar_roles(tags: Iterable[str]) -> dict[str, ScalarRole]:
    """The role of every scalar tag of one run that gradcheck uses (see :func:`scalar_role`).

    ``<p>/grad_norm`` tags are per-parameter norms when the run holds two or more of them with
    different ``<p>``; a single one is the run's global norm (``train/grad_norm``)."""
    tags = list(tags)
    suffixed = {
        tag: match.group("name")
        for tag in tags
        if (match := _SUFFIX_GRAD_NORM.match(tag))
        and match.group("name").lower() not in _GLOBAL_NAMES
        and not _HELPER_SCALAR.match(tag)
    }
    per_parameter = len(set(suffixed.values())) >= 2
    roles: dict[str, ScalarRole] = {}
    for tag in tags:
        if per_parameter and tag in suffixed:
            roles[tag] = ScalarRole("grad_norm", normalise_name(suffixed[tag]))
        elif (role := scalar_role(tag)) is not None:
            roles[tag] = role
    return roles


_HELD_OUT_WORDS = re.compile(r"val|test|eval|valid", re.IGNORECASE)


def training_loss_rank(tag: str) -> int:
    """Lower is a better training-loss candidate: validation/test losses rank after train ones."""
    return 1 if _HELD_OUT_WORDS.search(tag) else 0
