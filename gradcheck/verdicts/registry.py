"""Every verdict, declared once: its name, rank, rule, CI gate and how the reports show it.

One :class:`Entry` per verdict in :data:`ENTRIES`, most severe first (the order is the rank:
a parameter's verdict is its most severe flag, reports list verdicts in this order). Everything
else reads a verdict's attributes from here: :mod:`.detect` runs each entry's rule in its pass
(:mod:`.passes`), :mod:`.gate` takes the default ``--fail-on``, the formats their colours,
marks and phrases. A rule file (``rules/<verdict>.py``) spells its own verdict's name in its
findings; nothing else in the package spells one (``tests/verdicts/test_registry.py``).

Adding a verdict: its rule in ``rules/<verdict>.py``, its entry here (and in :data:`Verdict`,
the type checker's copy of the names: a test checks they agree), its tests.

Standard library only: ``gradcheck --help`` prints the default ``--fail-on`` from here without
importing numpy or the model (``tests/cli/test_startup_imports.py``).
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

Verdict = Literal[
    "nan",
    "exploding",
    "diverging",
    "vanishing",
    "dead",
    "saturated",
    "static",
    "slow",
    "overflow",
    "ok",
]
"""The verdicts' names for the type checker, in :data:`ENTRIES`' order."""

Phase = Literal["blow_up", "quiet", "loss", "activation", ""]
"""Which pass of :mod:`.passes` runs a verdict's rule: ``blow_up`` on each parameter's every
step, ``quiet`` on each parameter's healthy steps (before the run's blow-up), ``loss`` on the
run's training loss, ``activation`` on each layer's outputs; ``""``: another verdict's rule
finds it."""


class Entry(NamedTuple):
    """One verdict and everything that depends on which verdict it is."""

    name: Verdict
    severity: float
    """The base severity of its findings (:func:`.rules.base.severity` adds up to 0.99 for how
    far past the threshold): ranks parameters across verdicts."""
    phase: Phase
    rule: str
    """``module.function`` in :mod:`gradcheck.verdicts.rules` that finds it (``""``: none; with
    no ``phase``, the rule of another verdict, run in that one's pass)."""
    fail_on: bool
    """In the default ``--fail-on``: a run that failed, not one to look at."""
    blow_up: bool
    """Its first bad step ends the run's healthy steps: the quiet rules judge only the steps
    before it, a diverging loss row and the loss's spikes yield to it, clipping advice applies."""
    skews_ratios: bool
    """``compare``: a run with it has gradient ratios that measure the blow-up, not a cause."""
    charted: bool
    """HTML: each of its layer rows gets a chart (else they are listed, as frozen weights)."""
    style: str  # the terminal table's rich style
    mark: str  # the Markdown report's square
    css: str  # the HTML report's style of its class
    phrase: str  # a sweep's ``runs that ...`` (empty for ok)


ENTRIES: Final[tuple[Entry, ...]] = (
    Entry(
        "nan",
        4.0,
        "blow_up",
        "nan.find_nan",
        fail_on=True,
        blow_up=True,
        skews_ratios=True,
        charted=True,
        style="bold red",
        mark="🟥",
        css="color:#b00020;font-weight:bold",
        phrase="went NaN",
    ),
    Entry(
        "exploding",
        3.0,
        "blow_up",
        "exploding.find_exploding",
        fail_on=True,
        blow_up=True,
        skews_ratios=True,
        charted=True,
        style="red",
        mark="🟥",
        css="color:#b00020;font-weight:bold",
        phrase="exploded",
    ),
    Entry(
        "diverging",
        2.5,
        "loss",
        "diverging.find_diverging",
        fail_on=True,
        blow_up=False,
        skews_ratios=False,
        charted=True,
        style="red",
        mark="🟧",
        css="color:#b00020;font-weight:bold",
        phrase="diverged",
    ),
    Entry(
        "vanishing",
        2.0,
        "quiet",
        "vanishing.find_vanishing",
        fail_on=False,
        blow_up=False,
        skews_ratios=False,
        charted=True,
        style="yellow",
        mark="🟨",
        css="color:#8a6d00",
        phrase="had vanishing gradients",
    ),
    Entry(
        "dead",
        1.5,
        "activation",
        "dead.find_dead",
        fail_on=False,
        blow_up=False,
        skews_ratios=False,
        charted=True,
        style="bright_black",
        mark="⬛",
        css="color:#455a64;font-weight:bold",
        phrase="had dead layers",
    ),
    Entry(
        "saturated",
        1.25,
        "activation",
        "saturated.find_saturated",
        fail_on=False,
        blow_up=False,
        skews_ratios=False,
        charted=True,
        style="dark_orange",
        mark="🟧",
        css="color:#e65100",
        phrase="had saturated layers",
    ),
    Entry(
        "static",
        1.0,
        "quiet",
        "static.find_static",
        fail_on=False,
        blow_up=False,
        skews_ratios=False,
        charted=False,
        style="magenta",
        mark="🟪",
        css="color:#6a3d9a",
        phrase="had static weights",
    ),
    Entry(
        "slow",
        0.75,
        "quiet",
        "slow.find_slow",
        fail_on=False,
        blow_up=False,
        skews_ratios=False,
        charted=True,
        style="blue",
        mark="🟫",
        css="color:#795548",
        phrase="learned slowly",
    ),
    Entry(
        "overflow",  # a non-finite gradient step that loss scaling skipped: nan's rule tells
        0.5,
        "",
        "nan.find_nan",
        fail_on=False,
        blow_up=False,
        skews_ratios=True,
        charted=True,
        style="cyan",
        mark="🟦",
        css="color:#1f5fa8",
        phrase="overflowed",
    ),
    Entry(
        "ok",
        0.0,
        "",
        "",
        fail_on=False,
        blow_up=False,
        skews_ratios=False,
        charted=True,
        style="green",
        mark="🟩",
        css="color:#2e7d32",
        phrase="",
    ),
)

BY_NAME: Final[dict[str, Entry]] = {entry.name: entry for entry in ENTRIES}
VERDICTS: Final[tuple[Verdict, ...]] = tuple(entry.name for entry in ENTRIES)
"""Most severe first. ``diverging``: the run's training loss rose by orders of magnitude over
its start and never came back below it (the ``(training loss)`` row). ``dead``: a layer's
outputs (an activation histogram) almost all exactly zero, and staying so (ReLU units that
stopped firing). ``saturated``: a bounded layer's outputs (tanh, sigmoid) almost all at its
bounds, where its derivative is near zero. ``slow``: weights that move, but orders of magnitude
less per update than healthy training's (a learning rate far too small). ``overflow``: a few
gradient steps non-finite under dynamic loss scaling, skipped by the optimizer (mixed
precision), the run otherwise finite."""
OK: Final = "ok"
"""The verdict of a parameter without a finding."""
FINDINGS: Final[tuple[Verdict, ...]] = tuple(v for v in VERDICTS if v != OK)
"""Every verdict but ok, most severe first: what ``--fail-on any`` means."""

UNJUDGED: Final = "unjudged"
"""A sweep's verdict of a run with nothing to judge (not a parameter's verdict)."""
RunVerdict = Verdict | Literal["unjudged"]
"""A run's verdict in a sweep: its worst parameter's, or ``unjudged`` (nothing to judge)."""
RUN_VERDICTS: Final[tuple[RunVerdict, ...]] = (*VERDICTS, UNJUDGED)
UNJUDGED_CSS: Final = "color:#777"

DEFAULT_FAIL_ON: Final = ",".join(entry.name for entry in ENTRIES if entry.fail_on)
BLOW_UPS: Final = frozenset(entry.name for entry in ENTRIES if entry.blow_up)
"""The verdicts whose first bad step ends a run's healthy steps (nan, exploding)."""


def entry(verdict: str) -> Entry:
    """The entry of ``verdict`` (KeyError for a name that is none)."""
    return BY_NAME[verdict]


def with_phase(phase: Phase) -> tuple[Entry, ...]:
    """The entries whose rule runs in ``phase``, in rank order."""
    return tuple(e for e in ENTRIES if phase and e.phase == phase and e.rule)
