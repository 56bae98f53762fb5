"""Roles of histogram tags (weight, gradient, activation, other) and the parameter name each gives.

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
``fc1.weight`` (:func:`gradcheck.verdicts.pairing.pair_parameters` pairs them).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Literal, Protocol

from gradcheck.errors import ConfigError

Role = Literal["weight", "gradient", "activation", "other"]

GRAD_WORD = r"(?:gradients?|grads?)"
"""The gradient marker's word, in histogram tags and in the scalar norms' tags
(:mod:`gradcheck.tags.scalars`)."""
# ``Gradients_<name>``, ``gradients/<name>``, ``grads/<name>``, possibly after a prefix path.
_GRAD_PREFIX = re.compile(rf"^(?P<prefix>(?:.*/)?){GRAD_WORD}[_/](?P<name>.+)$", re.IGNORECASE)
# ``<name>/grad``, ``<name>.grad``, ``<name>_grad``, ``<name>/gradients`` (Keras-style suffixes ok).
_GRAD_SUFFIX = re.compile(rf"^(?P<name>.+?)[/._]{GRAD_WORD}$", re.IGNORECASE)
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
