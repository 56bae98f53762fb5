"""Roles of tags (weight, gradient, activation, other) and their pairing under one parameter name.

A histogram tag is a *gradient* when it carries a gradient marker (``Gradients_<name>``,
``gradients/``, ``grads/``, ``grad/``, ``<name>/grad``, ``<name>.grad``, ``<name>_grad``,
``<name>/gradient(s)``); an *activation* (a layer's outputs, named after the layer: the tag
without its role word) when written as ``activations/<layer>``, ``act/<layer>``,
``<layer>/activation(s)``, ``<layer>/output(s)``, ``<layer>/out`` (TF1 name scopes give these:
``tf.summary.histogram('activations', h)`` under ``layer1`` is ``layer1/activations``,
uniquified ``layer1/activations_1``) or ``<layer>_activation`` (TF Estimators'
``dnn/hiddenlayer_0_activation``); *other* when its last path component names another
non-parameter (``layer1/X``, ``pre_activations``, ``inputs``, ``logits``); and a *weight*
otherwise (bare names, ``weights/``, ``params/``, ``<name>/value``, Keras ``<name>/histogram``,
``<name>_0/histogram``, ``<name>_0``, TF ``:0`` suffixes). Markers match case-insensitively;
parameter names keep their case (PyTorch names are case-sensitive).

Gradient and weight tags of one parameter reduce to the same *parameter name*:
``Gradients_dense/kernel:0``, ``dense/kernel:0``, ``dense/kernel_0/histogram`` and
``weights/dense/kernel`` all give ``dense/kernel``; ``fc1.weight/grad`` and ``fc1.weight`` give
``fc1.weight``.

Scalar tags get their own roles (:func:`scalar_role`): the exact norms and non-finite counts
that gradcheck's logging helpers write, common global gradient norm tags, and loss tags.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from gradcheck.errors import ConfigError

Role = Literal["weight", "gradient", "activation", "other"]

_GRAD_WORD = r"(?:gradients?|grads?)"
# ``Gradients_<name>``, ``gradients/<name>``, ``grads/<name>``, possibly after a prefix path.
_GRAD_PREFIX = re.compile(rf"^(?P<prefix>(?:.*/)?){_GRAD_WORD}[_/](?P<name>.+)$", re.IGNORECASE)
# ``<name>/grad``, ``<name>.grad``, ``<name>_grad``, ``<name>/gradients`` (Keras-style suffixes ok).
_GRAD_SUFFIX = re.compile(rf"^(?P<name>.+?)[/._]{_GRAD_WORD}$", re.IGNORECASE)
_WEIGHT_PREFIX = re.compile(r"^(?:weights?|params?|parameters?)/(?P<name>.+)$", re.IGNORECASE)
# Decorations that writers add around a variable name, stripped in this order.
_HISTOGRAM_SUFFIX = re.compile(r"/histogram$", re.IGNORECASE)
_VALUE_SUFFIX = re.compile(r"/values?$", re.IGNORECASE)
_TF_OUTPUT_SUFFIX = re.compile(r":\d+$")  # TF variable names: ``dense/kernel:0``
_KERAS_ZERO_SUFFIX = re.compile(r"_0$")  # Keras 2 histogram tags: ``dense/kernel_0``
# Last path component naming something that is not a parameter: whole words, or compound
# names ending in a longer word (``hiddenlayer_0_activation``, ``layer.output``).
_OTHER_LONG = (
    r"activations?|pre_?activations?|outputs?|inputs?|logits|labels?|targets?"
    r"|predictions?|features?|hidden_?states?"
)
# Activations: ``<layer>/activations``, ``<layer>/output``, ``<layer>/out``, ``<layer>.output``,
# ``<layer>_activation`` (TF Estimators), uniquified by TF1 (``_1``); ``activations/<layer>``,
# ``act/<layer>`` (possibly after a prefix path).
_ACTIVATION_SUFFIX = re.compile(
    r"^(?P<name>.+?)(?:/(?:activations?|outputs?|out)|\.(?:activations?|outputs?)"
    r"|(?<![/_.\-]pre)(?<!^pre)_activations?)(?:_\d+)?$",
    re.IGNORECASE,
)
_ACTIVATION_PREFIX = re.compile(
    r"^(?P<prefix>(?:.*/)?)(?:activations?|acts?)/(?P<name>.+)$", re.IGNORECASE
)
_OTHER_COMPONENT = re.compile(
    rf"^(?:(?:.*[_\-.])?(?:{_OTHER_LONG})|acts?|x|y|preds?)(?:_\d+)?$", re.IGNORECASE
)


@dataclass(frozen=True)
class TagRules:
    """How tags are classified: user regexes (tried first), then the built-in patterns.

    Each user pattern is searched for in the tag (as :func:`re.search` does) and must define
    a named group ``name`` holding the parameter name; add ``(?i)`` for case-insensitive
    matching. User patterns are matched by RE2 (:func:`linear_time_pattern`).
    """

    grad_patterns: tuple[TagPattern, ...] = ()
    weight_patterns: tuple[TagPattern, ...] = ()

    @classmethod
    def from_patterns(cls, grad: str | None = None, weight: str | None = None) -> TagRules:
        """Rules from ``--grad-pattern`` / ``--weight-pattern``; ConfigError on a bad regex."""
        return cls(
            grad_patterns=_compile_user_pattern("--grad-pattern", grad),
            weight_patterns=_compile_user_pattern("--weight-pattern", weight),
        )

    def classify(self, tag: str) -> tuple[Role, str]:
        """The role of a histogram tag and its normalised parameter name."""
        for pattern in self.grad_patterns:
            match = pattern.search(tag)
            if match and (name := match.group("name")):
                return "gradient", normalise_name(name)
        for pattern in self.weight_patterns:
            match = pattern.search(tag)
            if match and (name := match.group("name")):
                return "weight", normalise_name(name)
        return _builtin_classify(tag)


DEFAULT_RULES = TagRules()


def _compile_user_pattern(option: str, pattern: str | None) -> tuple[TagPattern, ...]:
    if pattern is None or pattern == "":
        return ()
    try:  # Python's parser first: its messages say where a pattern is wrong
        compiled = re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{option} {pattern!r} is not a valid regular expression: {exc}") from exc
    if "name" not in compiled.groupindex:
        raise ConfigError(
            f"{option} {pattern!r} needs a named group for the parameter name, "
            "e.g. 'grad_(?P<name>.+)'"
        )
    return (linear_time_pattern(option, pattern),)


class TagMatch(Protocol):
    def group(self, name: str, /) -> str | None: ...


class TagPattern(Protocol):
    def search(self, text: str, /) -> TagMatch | None: ...


def linear_time_pattern(option: str, pattern: str) -> TagPattern:
    """``pattern`` compiled by RE2 (google-re2), whose matching time is linear in the tag's
    length: tags come from the logs, and with Python's backtracking engine a crafted tag makes
    ``(a+)+`` take seconds per character more. RE2 has no lookaround, backreference or
    possessive quantifier (they are what can take exponential time): a pattern using one is a
    ConfigError that names it."""
    try:
        import re2  # google-re2
    except ImportError:  # a required dependency: only a broken install lacks it
        raise ConfigError(
            f"{option} needs the google-re2 package to match tags in linear time: "
            "pip install google-re2"
        ) from None
    options = re2.Options()
    options.log_errors = False  # RE2 would also write its complaint to stderr
    try:
        compiled: TagPattern = re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise ConfigError(
            f"{option} {pattern!r} is outside RE2's syntax, which gradcheck uses to match "
            "tags in linear time (no lookaround, backreference or possessive quantifier; "
            f"repetitions up to 1000): {reason}"
        ) from None
    return compiled


def normalise_name(name: str) -> str:
    """Strip writer decorations so weight and gradient tags of a parameter meet."""
    name = _HISTOGRAM_SUFFIX.sub("", name)
    name = _VALUE_SUFFIX.sub("", name)
    name = _TF_OUTPUT_SUFFIX.sub("", name)
    name = _KERAS_ZERO_SUFFIX.sub("", name)
    return name or "?"


@functools.lru_cache(maxsize=1 << 14)
def _builtin_classify(tag: str) -> tuple[Role, str]:
    """The built-in conventions' role and parameter name of a histogram tag; kept for the
    last 16,384 tags (the runs of a sweep log the same tags: each is classified once)."""
    core = _HISTOGRAM_SUFFIX.sub("", tag)
    suffix = _GRAD_SUFFIX.match(core)
    if suffix:
        return "gradient", normalise_name(suffix.group("name"))
    prefix = _GRAD_PREFIX.match(core)
    if prefix:
        return "gradient", normalise_name(prefix.group("prefix") + prefix.group("name"))
    weight = _WEIGHT_PREFIX.match(core)
    if weight:
        return "weight", normalise_name(weight.group("name"))
    layer = activation_layer(core)
    if layer is not None:
        return "activation", layer
    name = normalise_name(core)
    last = name.rsplit("/", 1)[-1]
    if _OTHER_COMPONENT.match(last):
        return "other", name
    return "weight", name


def activation_layer(tag: str) -> str | None:
    """The layer an activation tag is named after (the tag without its role word and a TF
    ``:0`` suffix: a layer name such as ``hiddenlayer_0`` keeps its ``_0``), or None."""
    core = _TF_OUTPUT_SUFFIX.sub("", _HISTOGRAM_SUFFIX.sub("", tag))
    if match := _ACTIVATION_SUFFIX.match(core):
        return match.group("name")
    if match := _ACTIVATION_PREFIX.match(core):
        return match.group("prefix") + match.group("name")
    return None


def classify_tag(tag: str, rules: TagRules | None = None) -> Role:
    """``weight``, ``gradient`` or ``other`` for a histogram tag."""
    return (rules or DEFAULT_RULES).classify(tag)[0]


def parameter_name(tag: str, rules: TagRules | None = None) -> str:
    """The normalised parameter name a histogram tag is paired under."""
    return (rules or DEFAULT_RULES).classify(tag)[1]


# --------------------------------------------------------------------------------------------
# Scalars
# --------------------------------------------------------------------------------------------

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
    rf"^(?:.*/)?{_GRAD_WORD}/(?P<name>.+)/(?:l2_?)?norm$", re.IGNORECASE
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


# --------------------------------------------------------------------------------------------
# Pairing
# --------------------------------------------------------------------------------------------

SeriesKey = tuple[str, int]
"""``(tag, index)`` of a histogram series; ``index`` > 0 for Keras 3 tag collisions."""


@dataclass(frozen=True)
class ParameterTags:
    """The series that describe one parameter, under its normalised name."""

    name: str
    depth: int  # order of first appearance (0 = first)
    weight: SeriesKey | None = None
    gradient: SeriesKey | None = None
    weight_norm: str | None = None  # scalar tags written by gradcheck's logging helpers
    grad_norm: str | None = None
    weight_nonfinite: str | None = None
    grad_nonfinite: str | None = None
    weight_also: tuple[SeriesKey, ...] = ()
    """Further weight series of the same variable, written by another writer into the same run
    (Keras' ``TensorBoard(histogram_freq=1)`` beside ``GradientLogger``; a hand-written
    ``add_histogram`` beside the PyTorch helper): one parameter, judged on ``weight`` (see
    :func:`gradcheck.verdicts.signals.decide_series`), the others confirming its movement."""
    gradient_also: tuple[SeriesKey, ...] = ()
    """Further gradient series of the same variable (as ``weight_also``)."""


Slots = dict[str, "SeriesKey | str | list[SeriesKey]"]
"""A parameter's series while pairing: slot -> histogram key, scalar tag, or further keys."""

_SCALAR_FIELDS = ("weight_norm", "grad_norm", "weight_nonfinite", "grad_nonfinite")


def pair_parameters(
    histogram_keys: list[SeriesKey],
    scalar_tags: list[str],
    rules: TagRules | None = None,
    roles: Mapping[str, ScalarRole] | None = None,
) -> list[ParameterTags]:
    """Group weight and gradient series (and per-parameter scalars) into parameters.

    ``histogram_keys`` and ``scalar_tags`` are in order of first appearance; parameters are
    numbered in that order (histograms first). Series of a colliding tag (``index`` > 0) get
    ``#index`` after their name, as the reader names them. ``other`` and ``activation``
    series are left out (activations are judged as layers of their own:
    :mod:`gradcheck.verdicts.activations`).
    Two series of one role under one name are one variable logged by two writers (Keras'
    ``<path>/histogram`` beside ``weights/<path>``): one parameter, the later series in
    ``weight_also`` / ``gradient_also``.
    A weight and a gradient left without a partner are paired when their names differ only by
    a convention of their own (:func:`_alternative_names`). ``roles``: the scalars' roles when
    the caller has them (:func:`scalar_roles` of ``scalar_tags``).
    """
    rules = rules or DEFAULT_RULES
    found: dict[str, Slots] = {}
    for tag, index in histogram_keys:
        role, name = rules.classify(tag)
        if role in ("other", "activation"):
            continue
        name = f"{name}#{index}" if index else name
        slot = "gradient" if role == "gradient" else "weight"
        slots = found.setdefault(name, {})
        if slot in slots:  # another writer's series of the same variable
            also = slots.setdefault(f"{slot}_also", [])
            assert isinstance(also, list)
            also.append((tag, index))
        else:
            slots[slot] = (tag, index)
    for tag, scalar in (scalar_roles(scalar_tags) if roles is None else roles).items():
        if scalar.name is not None and scalar.kind in _SCALAR_FIELDS:
            found.setdefault(scalar.name, {}).setdefault(scalar.kind, tag)
    _pair_leftovers(found, uniquified=False)
    _pair_leftovers(found, uniquified=True)  # only after every exact convention has paired
    return [_parameter(name, depth, slots) for depth, (name, slots) in enumerate(found.items())]


# ``hist/weights/<p>`` (the role word inside the tag) pairs with ``hist/grads/<p>``, which
# names ``hist/<p>``; ``<p>/weight`` pairs with ``<p>/grad``; a TF1 summary whose name scope was
# taken (by the variable itself) is uniquified with ``_1``: ``dense/kernel_1`` for ``dense/kernel``.
_ROLE_INSIDE = re.compile(r"^(?P<before>.+/)(?:weights?|params?|parameters?)/(?P<after>.+)$", re.I)
_ROLE_LAST = re.compile(r"^(?P<name>.+)/(?:weights?|params?|parameters?|values?)$", re.IGNORECASE)
_UNIQUIFIED = re.compile(r"^(?P<name>.+)_\d+$")


_WEIGHT_SLOTS = frozenset(("weight", "weight_norm", "weight_nonfinite", "weight_also"))
_GRADIENT_SLOTS = frozenset(("gradient", "grad_norm", "grad_nonfinite", "gradient_also"))


def _alternative_names(name: str, uniquified: bool) -> set[str]:
    """Names that the same parameter may carry under another tag convention (with
    ``uniquified``, also without a TF1 ``_<n>`` suffix)."""
    names = {name}
    if match := _ROLE_INSIDE.match(name):
        names.add(match.group("before") + match.group("after"))
    if match := _ROLE_LAST.match(name):
        names.add(match.group("name"))
    if uniquified:
        names |= {m.group("name") for n in list(names) if (m := _UNIQUIFIED.match(n))}
    return names


def _pair_leftovers(found: dict[str, Slots], uniquified: bool) -> None:
    """Merge a weight-only and a gradient-only entry whose alternative names meet, when the
    match is unique both ways; the merged entry keeps the earlier one's place."""
    weights = [name for name, slots in found.items() if set(slots) <= _WEIGHT_SLOTS]
    gradients = [name for name, slots in found.items() if set(slots) <= _GRADIENT_SLOTS]
    if not weights or not gradients:
        return
    alternatives = {name: _alternative_names(name, uniquified) for name in weights + gradients}
    matches = {
        weight: [g for g in gradients if alternatives[weight] & alternatives[g]]
        for weight in weights
    }
    claimed = [g for found_for in matches.values() for g in found_for]
    for weight, candidates in matches.items():
        if len(candidates) != 1 or claimed.count(candidates[0]) != 1:
            continue
        gradient = candidates[0]
        names = list(found)
        first, second = sorted((weight, gradient), key=names.index)
        merged = {**found[weight], **found[gradient]}
        found[first] = merged  # keeps its position in the (insertion-ordered) dict
        del found[second]
        if first != gradient:  # the gradient's name is the common one: rename in place
            _rename(found, first, gradient)


def _rename(found: dict[str, Slots], old: str, new: str) -> None:
    items = [(new if name == old else name, slots) for name, slots in found.items()]
    found.clear()
    found.update(items)


def _parameter(name: str, depth: int, slots: Slots) -> ParameterTags:
    def key(slot: str) -> SeriesKey | None:
        value = slots.get(slot)
        return value if isinstance(value, tuple) else None

    def keys(slot: str) -> tuple[SeriesKey, ...]:
        value = slots.get(slot)
        return tuple(value) if isinstance(value, list) else ()

    def tag(slot: str) -> str | None:
        value = slots.get(slot)
        return value if isinstance(value, str) else None

    return ParameterTags(
        name=name,
        depth=depth,
        weight=key("weight"),
        gradient=key("gradient"),
        weight_norm=tag("weight_norm"),
        grad_norm=tag("grad_norm"),
        weight_nonfinite=tag("weight_nonfinite"),
        grad_nonfinite=tag("grad_nonfinite"),
        weight_also=keys("weight_also"),
        gradient_also=keys("gradient_also"),
    )
