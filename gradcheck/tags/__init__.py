"""What tag names mean: the roles of histogram tags and the parameter name each gives
(:mod:`~gradcheck.tags.roles`, with the user's patterns, :class:`TagRules`), the roles of
scalar tags (:mod:`~gradcheck.tags.scalars`) and the tags gradcheck's own logging helpers write
(:mod:`~gradcheck.tags.logtags`). The verdicts pair a run's tags into parameters
(:mod:`gradcheck.verdicts.pairing`).

``gradcheck.tags.TagRules.from_patterns(grad, weight)`` is the documented path of the rules
that ``--grad-pattern`` and ``--weight-pattern`` build.
"""

from gradcheck.tags.roles import (
    DEFAULT_RULES,
    Role,
    TagRules,
    activation_layer,
    classify_tag,
    normalise_name,
    parameter_name,
)

__all__ = [
    "DEFAULT_RULES",
    "Role",
    "TagRules",
    "activation_layer",
    "classify_tag",
    "normalise_name",
    "parameter_name",
]
