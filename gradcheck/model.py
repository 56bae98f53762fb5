"""The plain data the pipeline stages hand each other, all importable from here.

files -> records (reader) -> series statistics (stats) -> findings (detect) -> report (report/)

Records and runs are defined in ``events.records``, ``RunData`` and its series in
``series.data`` (what reading gives: the seam a log format plugs in behind); the findings,
reports, sweeps and comparisons here. Every class is a frozen dataclass. Arrays are numpy
arrays owned by the record (never mutated after construction). Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from gradcheck.events.records import (
    TENSORBOARD,
    Damage,
    DamageKind,
    FileInfo,
    HistogramEncoding,
    HistogramRecord,
    HParamsRecord,
    HParamValue,
    Notice,
    NoticeKind,
    Record,
    Run,
    ScalarEncoding,
    ScalarRecord,
)
from gradcheck.series.data import (
    COLUMN,
    PERCENTILES,
    STAT_NAMES,
    HistogramSeries,
    RunData,
    ScalarSeries,
    SeriesKey,
)
from gradcheck.verdicts.registry import RUN_VERDICTS, VERDICTS, RunVerdict, Verdict

__all__ = [  # the records and RunData re-exported, then what is defined here
    "TENSORBOARD",
    "Damage",
    "DamageKind",
    "FileInfo",
    "HistogramEncoding",
    "HistogramRecord",
    "HParamsRecord",
    "HParamValue",
    "Notice",
    "NoticeKind",
    "Record",
    "Run",
    "ScalarEncoding",
    "ScalarRecord",
    "COLUMN",
    "PERCENTILES",
    "STAT_NAMES",
    "HistogramSeries",
    "RunData",
    "ScalarSeries",
    "SeriesKey",
    "Verdict",
    "VERDICTS",
    "GLOBAL_NORM_ROW",
    "LOSS_ROW",
    "RUN_ROWS",
    "ClipKind",
    "Framework",
    "GradientCoverage",
    "StepSeries",
    "Reference",
    "LayerResult",
    "ClipInfo",
    "Spike",
    "RunReport",
    "RunVerdict",
    "RUN_VERDICTS",
    "HParamSource",
    "RelationKind",
    "SweepRun",
    "HParamGroup",
    "HParamRelation",
    "Sweep",
    "Report",
    "Presence",
    "NameMatch",
    "Cause",
    "ParameterComparison",
    "Comparison",
]

if TYPE_CHECKING:  # annotations only: `gradcheck --version` / `--help` need no numpy
    import numpy as np

# --------------------------------------------------------------------------------------------
# Report: what detection produces and the formatters render.
# --------------------------------------------------------------------------------------------

GLOBAL_NORM_ROW = "(global gradient norm)"
LOSS_ROW = "(training loss)"
"""The run-level row of a training loss that diverged (``diverging``)."""
RUN_ROWS = (GLOBAL_NORM_ROW, LOSS_ROW)
"""Rows that stand for the run, not for one of its parameters."""
ClipKind = Literal["global_norm", "per_tensor_norm", "value"]
Framework = Literal["pytorch", "keras", "tensorflow"]
"""The name of the run-level row judged from a global gradient norm scalar, for a run that logs
no per-parameter gradient."""

GradientCoverage = Literal["per_parameter", "global", "none"]
"""What gradient evidence a run holds: per-parameter gradients (histograms or norm scalars), only
a global gradient norm, or none."""


@dataclass(frozen=True, eq=False)
class StepSeries:
    """One quantity at every step the analysis kept (not downsampled; at most
    ``2 * series.thin.MAX_ROWS`` steps once a long log is thinned), for the HTML report's charts.

    ``steps`` (int64) and ``values`` (float64, NaN where missing or non-finite) have one entry
    per step; ``nonfinite_steps`` are the steps at which the logged values held NaN or inf.
    Not in the JSON or CSV formats (they carry ``trend``). Equal when every array is equal.
    """

    label: str  # what ``values`` are, e.g. "gradient L2 norm"
    steps: np.ndarray
    values: np.ndarray
    nonfinite_steps: np.ndarray

    def __eq__(self, other: object) -> bool:
        import numpy as np

        if not isinstance(other, StepSeries):
            return NotImplemented
        return self.label == other.label and all(
            np.array_equal(mine, theirs, equal_nan=True)
            for mine, theirs in (
                (self.steps, other.steps),
                (self.values, other.values),
                (self.nonfinite_steps, other.nonfinite_steps),
            )
        )

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, eq=False)
class Reference:
    """A level a chart draws across a series: a threshold or the baseline it is a multiple of."""

    label: str  # "early baseline", "threshold (100x the baseline)"
    value: float


@dataclass(frozen=True, eq=False)
class LayerResult:
    """The verdict on one parameter (a weight and/or its gradient, paired by name), or on one
    layer's outputs (an activation histogram: ``activation_tag`` set, ``name`` the layer's)."""

    name: str  # normalised parameter name, or the layer an activation histogram is named after
    weight_tag: str | None
    grad_tag: str | None
    verdict: Verdict  # the most severe of ``flags`` ("ok" when no flag)
    flags: tuple[Verdict, ...]  # every verdict that applies, most severe first
    severity: float  # ranking key: higher is worse; 0 for ok
    first_bad_step: int | None
    evidence: str  # one sentence: measured numbers and the threshold they crossed
    hint: str  # usual causes and fixes ("" for ok)
    depth: int  # position in the network, by order of first appearance (0 = first)
    stats: Mapping[str, float | int | None]  # summary numbers (JSON-safe: NaN/inf become None)
    trend: tuple[float, ...] = ()  # the relevant norm over steps, downsampled (sparkline)
    trend_of: str = ""  # what ``trend`` is, e.g. "gradient L2 norm"
    onsets: Mapping[str, int] = field(default_factory=dict)
    """The first bad step of each flag that has one (``{"nan": 7, "exploding": 2}``)."""
    notes: tuple[str, ...] = ()
    """Why a rule did not fire although a signal crossed its threshold (a falling loss that
    softened a rise, a sibling that excused a static bias): reasons the user cannot see."""
    series: StepSeries | None = None  # the ``trend_of`` quantity at every step (charts)
    update_series: StepSeries | None = None  # the weights' relative norm change per step
    references: tuple[Reference, ...] = ()  # levels a chart of ``series`` marks
    activation_tag: str | None = None
    """The activation histogram's tag when this row judges a layer's outputs (dead,
    saturated), not a parameter; ``weight_tag`` and ``grad_tag`` are then None."""

    @property
    def is_activation(self) -> bool:
        """Whether the row judges a layer's outputs (an activation histogram)."""
        return self.activation_tag is not None


@dataclass(frozen=True, eq=False)
class ClipInfo:
    """The run's global gradient norm over time, and what it says about clipping."""

    source: str  # "scalar <tag>" or "formed from N gradient histograms"
    steps: tuple[int, int]
    median: float
    p99: float
    maximum: float
    clipped: bool  # the global norm looks pinned at a constant ceiling
    ceiling: float | None  # that global ceiling
    suggested_clip_norm: float | None
    rule: str  # how the suggestion was made, in words
    trend: tuple[float, ...] = ()
    series: StepSeries | None = None  # the global norm at every step (charts)
    kind: ClipKind | None = None
    """How the run clips, as its log shows it: ``global_norm`` (the global norm pinned at
    ``ceiling``), ``per_tensor_norm`` (several parameters' own gradient norms pinned at one
    ceiling while the global norm is not: Keras ``clipnorm``, ``tf.clip_by_norm`` per tensor),
    ``value`` (gradient elements cut at ±``clip_value``: ``clip_grad_value_``, ``clipvalue``),
    or None: not clipped, or clipped after the logging."""
    clip_value: float | None = None  # the common ceiling of a per-tensor or value clip
    clipped_share: float | None = None
    """Share of logged steps the current clip acts on (None when not clipped): for a pre-clip
    global norm the share above the ceiling, for a post-clip one the share at it; per tensor or
    by value, the share of steps at which any parameter sits at the ceiling."""
    suggested_share: float | None = None
    """Share of healthy steps the suggested clip norm would clip."""
    framework: Framework | None = None  # guessed from the writers and the tag style
    advice: str = ""  # where and how to clip, or what the current clip does, in words
    noteworthy: bool = False
    """Whether the current clip is worth a word in a run without a blow-up: it cuts by value or
    per tensor (it changes the gradient's direction or the layers' relative scale), or it acts
    on most steps (a smaller learning rate in disguise); not a global clip that only catches
    spikes, as intended."""


@dataclass(frozen=True, eq=False)
class Spike:
    """A transient spike of the training loss: a logged loss at least ``spike_factor`` times
    the median of the previous ``spike_window`` logged losses, back below
    ``spike_recovery`` times that median within ``spike_window`` logged steps."""

    step: int  # the first logged step at or above the threshold
    loss_ratio: float  # the spike's highest loss over that median
    led_by: tuple[str, ...]
    """The parameters whose gradient norm rose most over their own median of the previous
    ``spike_window`` logged steps, at ``step`` or the logged step before it, most to least
    (empty when no gradient was logged there, or none rose: ``note`` says which)."""
    gradient_step: int | None = None  # the step whose gradients ``led_by`` comes from
    rise: float | None = None  # the leader's gradient norm over its own median there
    note: str = ""  # why ``led_by`` is empty, in words


@dataclass(frozen=True, eq=False)
class RunReport:
    run: str  # path as given, or relative to it
    files: tuple[str, ...]
    steps: tuple[int, int] | None  # first and last step of any histogram or scalar
    writers: tuple[str, ...]
    warnings: tuple[str, ...]  # damage and notices, one line each
    layers: tuple[LayerResult, ...]  # sorted by severity, descending
    clipping: ClipInfo | None = None
    counts: Mapping[str, int] = field(default_factory=dict)  # verdict -> number of layers
    gradients: GradientCoverage = "per_parameter"
    holds: str = ""
    """What the run's log holds when it has nothing to judge (``only scalars: loss, accuracy``);
    empty for a run with parameters."""
    notes: tuple[str, ...] = ()
    """What could not be judged from this run, one line each (no gradients logged...), and
    what holds for the run as a whole (the whole model learns far slower than usual)."""
    updates: str = ""
    """How far the run's kernels moved per update, in words ("Kernels moved a median 2e-3 of
    their scale per update (usual: ~1e-3); slowest conv1/kernel 1e-7"); empty when no kernel's
    movement could be measured."""
    wall_times: tuple[float, float] | None = None
    """First and last wall time of the run's histograms (None without any)."""
    hparams: Mapping[str, HParamValue] = field(default_factory=dict)
    """The hyperparameters the run logged with the HParams plugin (``RunData.hparams``)."""
    damage: tuple[str, ...] = ()
    """The ``warnings`` that are about damaged or unreadable files (the CLI repeats them on
    stderr whatever the format, so that a CI log shows them)."""
    spikes: tuple[Spike, ...] = ()
    """Transient spikes of the training loss, in step order (:class:`Spike`)."""
    loss: StepSeries | None = None
    """The training loss at every logged step (the HTML report's loss chart; None without a
    loss or without charts)."""

    @property
    def judgeable(self) -> bool:
        """Whether the run holds anything gradcheck can judge (weights or gradients)."""
        return not self.holds


# --------------------------------------------------------------------------------------------
# Sweep: the view over many runs (verdicts/sweep.py), above the per-run sections.
# --------------------------------------------------------------------------------------------

HParamSource = Literal["logged", "run name"]
"""Where a sweep's hyperparameter came from: the HParams plugin, or the runs' directory names."""
RelationKind = Literal["at_least", "at_most", "value", "rates"]


@dataclass(frozen=True, eq=False)
class SweepRun:
    """One run in a sweep's ranking."""

    run: str
    verdict: RunVerdict  # its worst parameter's verdict
    flags: tuple[Verdict, ...]  # every verdict of any of its parameters, most severe first
    findings: int  # parameters with a verdict other than ok
    worst: str | None  # the worst parameter's name (None when every parameter is ok)
    first_bad_step: int | None  # the worst parameter's
    severity: float  # the worst parameter's severity (0 when ok)
    hparams: Mapping[str, HParamValue]  # logged ones, then those of its name not logged


@dataclass(frozen=True, eq=False)
class HParamGroup:
    """Runs of a sweep that share a range or a value of one hyperparameter."""

    label: str  # ">= 0.4", "< 0.4", "sgd"
    runs: int
    matching: int  # of them, the runs the relation's verdict applies to


@dataclass(frozen=True, eq=False)
class HParamRelation:
    """How one hyperparameter relates to one verdict over a sweep's runs.

    ``at_least``/``at_most``: every run with the hyperparameter at or above (at or below)
    ``threshold`` has ``verdict`` among its flags and no other run has (a clean split: the
    first group is those runs, the second the others). ``value``: exactly the runs with
    ``value`` have it. ``rates``: no clean split; the groups are the best split of a numeric
    hyperparameter (fewest runs on the wrong side) or one group per value.
    ``verdict`` is a verdict or ``finding`` (any verdict but ok)."""

    hparam: str
    verdict: str
    kind: RelationKind
    threshold: float | None
    value: HParamValue | None
    groups: tuple[HParamGroup, ...]
    text: str  # the relation in words, with its numbers


@dataclass(frozen=True, eq=False)
class Sweep:
    """What a sweep of runs says as a whole: runs per verdict, the runs ranked worst first,
    and the relations between hyperparameters and verdicts."""

    runs: int
    counts: Mapping[str, int]  # run verdict (RUN_VERDICTS) -> runs with it as their worst
    ranking: tuple[SweepRun, ...]  # every run, worst finding first
    hparams: Mapping[str, HParamSource]  # hyperparameters with >= 2 values, in name order
    relations: tuple[HParamRelation, ...]


@dataclass(frozen=True, eq=False)
class Report:
    version: str
    runs: tuple[RunReport, ...]
    warnings: tuple[str, ...] = ()
    sweep: Sweep | None = None  # the sweep view (None: not shown)


# --------------------------------------------------------------------------------------------
# Comparison: what ``gradcheck compare`` produces (two runs of one model, parameter by parameter).
# --------------------------------------------------------------------------------------------

Presence = Literal["both", "a", "b"]
NameMatch = Literal["same name", "model prefix", "layer numbering"]
"""How a parameter of A found its twin in B: the same name; the same name once a leading Keras
model scope (``sequential/`` vs ``sequential_1/``) is dropped; or, in addition, with Keras'
auto-numbered layer names (``dense_2`` in a second build of the model) counted per layer type
(the first ``dense*`` layer of B is the first of A)."""
Cause = Literal[
    "gradient_factor",  # every gradient a constant factor apart from the first step
    "batchnorm_statistics",  # BatchNorm moving statistics move in one run only
    "not_updated",  # trainable weights that move in one run only
    "learning_rate",  # updates a constant factor apart for gradients of one size
    "diverges_later",  # the runs match at first and part later
]


@dataclass(frozen=True, eq=False)
class ParameterComparison:
    """One parameter in two runs; every ratio is B over A (``None`` when undefined)."""

    name: str  # A's parameter name (B's when only in B)
    name_b: str | None  # B's name, when it differs from ``name``
    presence: Presence  # in both runs, or in A or B only
    matched_by: NameMatch | None  # None unless in both
    kind: str  # hints.parameter_kind: "bn_moving", "bn_affine", "embedding", "other"
    verdict_a: Verdict | None  # each run's own verdict (gradcheck analyze)
    verdict_b: Verdict | None
    common_steps: int  # steps at which both runs logged this parameter's gradient
    grad_norm_ratio_first: float | None  # at the first common step
    grad_norm_ratio_median: float | None  # median over the common steps
    update_ratio_median: float | None  # weights' movement per logged step, median over steps
    step_size_ratio_median: float | None  # update ratio / gradient ratio: for SGD, lr B / lr A
    moves_a: bool | None  # the weights moved at all (not static), None without weights
    moves_b: bool | None
    first_divergent_step: int | None  # first common step with a gradient ratio out of band
    diverges: bool  # gradients out of band at a common step, updates out of band (median),
    # or weights that move in one run only
    difference: float  # ranking key: log10 of the largest factor between the runs (inf when
    # the weights move in one run only)
    grad_norm_series: tuple[StepSeries, StepSeries] | None = None
    """A's and B's gradient norm at the common steps (the HTML format's charts)."""
    update_series: tuple[StepSeries, StepSeries] | None = None
    """A's and B's weight movement per step over the common weight steps (charts)."""


@dataclass(frozen=True, eq=False)
class Comparison:
    """Two runs compared: the likely cause in one sentence and every parameter, most different
    first (those in one run only last)."""

    version: str
    a: str  # run paths
    b: str
    factor: float  # compare_factor: the band [1/factor, factor] of ratios that agree
    steps: tuple[int, int] | None  # first and last step both runs logged gradients at (or
    # weights, when a run logs no gradient)
    common_steps: int  # how many such steps
    summary: str
    cause: Cause | None
    names: str  # how the parameters were matched, in words
    parameters: tuple[ParameterComparison, ...]
    warnings: tuple[str, ...] = ()
