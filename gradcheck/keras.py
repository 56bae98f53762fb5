"""Log weights and gradients from Keras 3 / TensorFlow 2 in the tags gradcheck pairs by itself.

Keras removed ``write_grads``, so ``TensorBoard(histogram_freq=1)`` logs weights only. Two ways
to log gradients too, both writing the tags of :mod:`gradcheck.tags.logtags` (histograms, exact
float64 L2 norms, non-finite counts, the global gradient norm):

- :class:`GradientLogger`: a callback for ``model.fit``. Every ``every_n_steps`` optimizer steps
  (and/or at each epoch end) it computes the gradients of the compiled loss on a batch you give
  it (``data=``), with ``tf.GradientTape`` and ``training=True``, and logs them with the weights.
  These are the gradients at that step on that batch, not those of the batch the optimizer just
  applied (Keras does not hand them to callbacks). The model's state is left untouched:
  BatchNorm moving statistics, dropout seeds and metric accumulators are restored afterwards,
  so a ``fit`` with the callback trains exactly as one without it.
- :func:`log_step`: for custom training loops, given a writer, the variables, their gradients and
  the step (the pattern written by hand today, done once, correctly).

Overhead: a logged step costs a few training steps' time, steps that are not logged nothing;
at the default ``every_n_steps=100`` training slows by a few percent (figures from
``bench/callback_overhead.py`` in ``bench/README.md``).

Needs TensorFlow (``pip install tensorflow``, or gradcheck's ``keras`` extra); this is the only
gradcheck module that imports it.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import nullcontext
from typing import Any, NamedTuple

from tensorboard.plugins.histogram import metadata as histogram_metadata
from tensorboard.plugins.scalar import metadata as scalar_metadata

from gradcheck._optional import require
from gradcheck.errors import InputError
from gradcheck.tags import logtags

tf = require("tensorflow", extra="keras", helper="gradcheck.keras")
keras = tf.keras  # Keras 3 on TF >= 2.16; tf_keras when TF_USE_LEGACY_KERAS=1

__all__ = ["GradientLogger", "GradientSummary", "log_step", "variable_path"]


class GradientSummary(NamedTuple):
    """The model-wide numbers :func:`log_step` logged (tensors; symbolic inside tf.function)."""

    global_norm: Any  # float64 scalar tensor: L2 norm of all gradients together
    nonfinite: Any  # int64 scalar tensor: NaN/Inf elements in all gradients


def variable_path(variable: Any) -> str:
    """The ``<param>`` of a variable's tags: Keras 3 ``path``, else ``name`` without ``:0``."""
    path = getattr(variable, "path", None)
    if isinstance(path, str) and path:
        return path
    name = str(variable.name)
    base, colon, index = name.rpartition(":")
    return base if colon and index.isdigit() else name


def log_step(
    writer: Any | None,
    variables: Sequence[Any],
    gradients: Sequence[Any | None],
    step: int | Any,
    *,
    histograms: bool = True,
    names: Sequence[str] | None = None,
) -> GradientSummary:
    """Log weights and gradients of one step with ``tf.summary``, in gradcheck's tags.

    ``writer``: a ``tf.summary`` writer, or ``None`` for the default writer set by
    ``writer.as_default()`` (like ``tf.summary`` ops, nothing is written without one, and
    ``tf.summary.record_if`` applies). ``gradients[i]`` belongs to ``variables[i]`` (the lists
    ``tape.gradient`` takes and returns); a ``None`` gradient (variable not connected to the
    loss) logs the weight only; ``IndexedSlices`` are densified. ``names`` override
    :func:`variable_path`. Call it before ``optimizer.apply_gradients`` so weights and gradients
    describe the same point. Works eagerly and inside ``tf.function`` (names are read while
    tracing). Returns the global gradient norm and non-finite count.
    """
    variables, gradients = list(variables), list(gradients)
    names = [variable_path(v) for v in variables] if names is None else list(names)
    if not len(variables) == len(gradients) == len(names):
        raise InputError(
            f"log_step needs one gradient and one name per variable: got {len(variables)} "
            f"variables, {len(gradients)} gradients, {len(names)} names"
        )
    squared_norms, nonfinite_counts = [], []
    with writer.as_default() if writer is not None else nullcontext():
        for name, variable, gradient in zip(names, variables, gradients, strict=True):
            if not _is_float(variable):
                continue
            _log_tensor(logtags.WEIGHT_TAGS, name, variable, step, histograms)
            if gradient is not None:
                squared, count = _log_tensor(
                    logtags.GRADIENT_TAGS, name, gradient, step, histograms
                )
                squared_norms.append(squared)
                nonfinite_counts.append(count)
        return _log_global(squared_norms, nonfinite_counts, step)


def _is_float(variable: Any) -> bool:
    return bool(tf.as_dtype(variable.dtype).is_floating)


def _log_tensor(
    tags: logtags.TagSet, name: str, tensor: Any, step: int | Any, histograms: bool
) -> tuple[Any, Any]:
    """Log one tensor's histogram, exact norm and non-finite count; return (norm², count)."""
    values = tf.cast(tf.convert_to_tensor(tensor), tf.float64)
    squared_norm = tf.reduce_sum(tf.square(values))
    nonfinite = tf.math.count_nonzero(~tf.math.is_finite(values), dtype=tf.int64)
    if histograms:
        write_histogram(logtags.tag(tags.histogram, name), values, step)
    write_scalar(logtags.tag(tags.norm, name), tf.sqrt(squared_norm), step)
    write_scalar(logtags.tag(tags.nonfinite, name), nonfinite, step)
    return squared_norm, nonfinite


def _log_global(squared_norms: list[Any], counts: list[Any], step: int | Any) -> GradientSummary:
    """Log the global gradient norm (NaN if any gradient has a NaN) and non-finite count."""
    if not squared_norms:
        return GradientSummary(tf.constant(0.0, tf.float64), tf.constant(0, tf.int64))
    global_norm = tf.sqrt(tf.add_n(squared_norms))
    nonfinite = tf.add_n(counts)
    write_scalar(logtags.GLOBAL_GRADIENT_NORM, global_norm, step)
    write_scalar(logtags.GLOBAL_GRADIENT_NONFINITE, nonfinite, step)
    return GradientSummary(global_norm, nonfinite)


# --------------------------------------------------------------------------------------------
# Summaries in the standard TF2 encoding (what tf.summary.scalar/histogram write), but with the
# tag exactly as given (no enclosing name scope), float64 scalars (a 1e-50 gradient norm
# survives), and histogram buckets counted with a segment sum instead of the N x k one-hot
# matrix tensorboard builds (48 MB for a 200k-element kernel: most of the logging time).
# --------------------------------------------------------------------------------------------

HISTOGRAM_BUCKETS = 30  # tensorboard's default
_HISTOGRAM_METADATA = histogram_metadata.create_summary_metadata(
    display_name=None, description=None
)
_SCALAR_METADATA = scalar_metadata.create_summary_metadata(display_name=None, description=None)


def write_scalar(tag: str, value: Any, step: int | Any) -> Any:
    """``tf.summary.scalar`` as float64, under exactly ``tag``."""
    return tf.summary.write(tag, tf.cast(value, tf.float64), step=step, metadata=_SCALAR_METADATA)


def write_histogram(tag: str, values: Any, step: int | Any) -> Any:
    """``tf.summary.histogram`` under exactly ``tag``; buckets only computed when recorded."""
    return tf.summary.write(
        tag, lambda: histogram_buckets(values), step=step, metadata=_HISTOGRAM_METADATA
    )


def histogram_buckets(data: Any, bucket_count: int = HISTOGRAM_BUCKETS) -> Any:
    """The ``[k, 3]`` float64 ``(left, right, count)`` tensor tensorboard's ``_buckets`` makes,
    value for value: equal-width buckets from min to max; k zero-width rows at the value, all
    counted in the last, for a constant tensor; NaN edges and no count when a NaN is present;
    Inf values not counted; k zero rows for an empty tensor."""
    data = tf.cast(tf.reshape(data, [-1]), tf.float64)
    size = tf.size(data)
    low, high = tf.reduce_min(data), tf.reduce_max(data)
    spread = high - low
    width = tf.where(spread > 0, spread / bucket_count, tf.constant(1.0, tf.float64))
    indices = tf.minimum(tf.cast(tf.floor((data - low) / width), tf.int32), bucket_count - 1)
    # Negative indices (from NaN or Inf offsets) are dropped, as tf.one_hot drops them.
    counts = tf.math.unsorted_segment_sum(tf.ones_like(data), indices, bucket_count)
    edges = tf.concat([tf.linspace(low, high, bucket_count + 1)[:-1], [high]], 0)
    spread_rows = tf.stack([edges[:-1], edges[1:], counts], axis=1)
    constant_edges = tf.fill([bucket_count], high)
    last_only = tf.concat(
        [tf.zeros([bucket_count - 1], tf.float64), [tf.cast(size, tf.float64)]], 0
    )
    constant_rows = tf.stack([constant_edges, constant_edges, last_only], axis=1)
    rows = tf.where(tf.equal(spread, 0.0), constant_rows, spread_rows)
    return tf.where(tf.equal(size, 0), tf.zeros([bucket_count, 3], tf.float64), rows)


Batch = tuple[Any, Any, Any]  # (x, y, sample_weight)


class _BatchSource:
    """Batches to compute gradients on: a fixed ``(x, y[, sample_weight])`` or a stream."""

    def __init__(self, data: Any, resample: bool) -> None:
        self._fixed: Batch | None = None
        self._stream: Iterator[Any] | None = None
        self._resample = resample
        if isinstance(data, tuple):
            self._fixed = _unpack(data)
        elif isinstance(data, tf.data.Dataset):
            self._stream = iter(data.repeat())
        elif isinstance(data, Iterable) and not isinstance(data, (str, bytes, list, dict)):
            self._stream = iter(data)
        else:
            raise InputError(
                "GradientLogger data must be a batch (x, y) or (x, y, sample_weight), a batched "
                f"tf.data.Dataset, or an iterator of such batches; got {type(data).__name__}"
            )

    def next(self) -> Batch:
        """The batch for this logging step: the first one again, unless ``resample``."""
        if self._fixed is None or (self._resample and self._stream is not None):
            self._fixed = self._draw()
        return self._fixed

    def _draw(self) -> Batch:
        assert self._stream is not None
        try:
            return _unpack(next(self._stream))
        except StopIteration:
            raise InputError("GradientLogger data ran out of batches") from None


def _unpack(data: Any) -> Batch:
    if not isinstance(data, tuple) or not 2 <= len(data) <= 3:
        raise InputError(
            "GradientLogger needs labelled batches: (x, y) or (x, y, sample_weight), got "
            f"{type(data).__name__}"
            + (f" of length {len(data)}" if isinstance(data, tuple) else "")
        )
    x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
    return x, y, sample_weight


class GradientLogger(keras.callbacks.Callback):  # type: ignore[name-defined]
    """A ``model.fit`` callback logging weights and gradients every N steps, in gradcheck's tags.

    ``data``: the batch to take gradients on: ``(x, y)`` or ``(x, y, sample_weight)`` arrays (a
    few hundred rows of your training data), a batched ``tf.data.Dataset`` or an iterator of
    batches (the first batch is kept, so that numbers at different steps are comparable; pass
    ``resample=True`` to draw a new batch at each logging step). The loss is the compiled one
    (``model.compute_loss``, regularisation included) unless ``loss_fn(y_true, y_pred)`` is
    given. Steps are optimizer iterations (updates applied): the state before training is logged
    at step 0, then at every multiple of ``every_n_steps`` (with ``steps_per_execution`` > 1:
    the first execution boundary at or after it), the state after the last update at the end of
    training if due, and with ``per_epoch=True`` at each epoch end. Logging runs as one
    ``tf.function``, traced at the first log (a one-off second or two).
    ``frozen_weights=True`` also logs the weights of non-trainable variables (frozen layers,
    BatchNorm moving statistics), so that gradcheck can tell they never move.

    Write to ``log_dir`` (a new ``tf.summary`` file writer) or an existing ``writer``.
    """

    def __init__(
        self,
        log_dir: str | None = None,
        data: Any = None,
        *,
        every_n_steps: int | None = 100,
        per_epoch: bool = False,
        histograms: bool = True,
        resample: bool = False,
        loss_fn: Callable[[Any, Any], Any] | None = None,
        frozen_weights: bool = False,
        writer: Any | None = None,
    ) -> None:
        super().__init__()
        _check_options(log_dir, writer, data, every_n_steps, per_epoch)
        self.log_dir = log_dir
        self.every_n_steps = every_n_steps
        self.per_epoch = per_epoch
        self.histograms = histograms
        self.loss_fn = loss_fn
        self.frozen_weights = frozen_weights
        self.seconds_logging = 0.0  # time spent in this callback, for overhead measurements
        self._batches = _BatchSource(data, resample)
        self._writer = writer
        self._last_step: int | None = None
        self._epoch_start = 0
        self._traced: tuple[tuple[Any, ...], Callable[..., None]] | None = None

    # Logging happens at batch *begin*, before the batch's update: Keras then dispatches
    # batch-end hooks asynchronously (any callback overriding ``on_train_batch_end`` makes it
    # wait for every step to convert the logs), and the step is counted, not read from the
    # optimizer, so that steps that are not logged never wait for the device.

    def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
        self._epoch_start = self._read_step()
        self._log_unless_logged(self._epoch_start)

    def on_epoch_begin(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        self._epoch_start = self._read_step()

    def on_train_batch_begin(self, batch: int, logs: dict[str, Any] | None = None) -> None:
        self._log_if_due(self._epoch_start + batch)  # updates applied before this batch

    def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
        if self.per_epoch:
            self._log_unless_logged(self._read_step())

    def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
        self._log_if_due(self._read_step())  # the last update's state has no next batch
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        """Flush and close the writer this callback created (not one it was given)."""
        if self._writer is not None and self.log_dir is not None:
            self._writer.close()
            self._writer = None

    def _read_step(self) -> int:
        """Updates applied so far (waits for the device: once per epoch, not per batch)."""
        return int(self.model.optimizer.iterations.numpy())

    def _log_if_due(self, step: int) -> None:
        """Log when ``step`` reaches the next multiple of ``every_n_steps``."""
        n = self.every_n_steps
        if n is not None and (self._last_step is None or step // n > self._last_step // n):
            self._log(step)

    def _log_unless_logged(self, step: int) -> None:
        if step != self._last_step:
            self._log(step)

    def _log(self, step: int) -> None:
        started = time.perf_counter()
        if self._writer is None:
            self._writer = tf.summary.create_file_writer(self.log_dir)
        x, y, sample_weight = self._batches.next()
        self._logging_function()(x, y, sample_weight, tf.constant(step, tf.int64))
        self._last_step = step
        self.seconds_logging += time.perf_counter() - started

    def _logging_function(self) -> Callable[..., None]:
        """:meth:`_log_batch` as a ``tf.function`` (much faster than eager for small models;
        traced again when the model's variables or the writer change), or as is when the model
        runs eagerly (``run_eagerly=True``: often a model that cannot be traced)."""
        if getattr(self.model, "run_eagerly", False):
            return self._log_batch
        key = (id(self._writer), *((id(v), bool(v.trainable)) for v in self.model.variables))
        if self._traced is None or self._traced[0] != key:
            self._traced = (key, tf.function(self._log_batch, reduce_retracing=True))
        return self._traced[1]

    def _log_batch(self, x: Any, y: Any, sample_weight: Any, step: Any) -> None:
        variables = list(self.model.trainable_variables)
        gradients = self._gradients(variables, x, y, sample_weight)
        # The callback decides when to log; a constant condition also spares tracing a
        # tf.cond per summary (most of the tracing time: bench/README.md).
        assert self._writer is not None  # created by _log before the first call
        with self._writer.as_default(), tf.summary.record_if(True):
            log_step(None, variables, gradients, step, histograms=self.histograms)
            if self.frozen_weights:
                frozen = list(self.model.non_trainable_variables)
                log_step(None, frozen, [None] * len(frozen), step, histograms=self.histograms)

    def _gradients(self, variables: list[Any], x: Any, y: Any, sample_weight: Any) -> list[Any]:
        """Gradients of the loss on one batch, leaving every model variable as it was."""
        saved = _snapshot(self.model)
        try:
            with tf.GradientTape() as tape:
                y_pred = self.model(x, training=True)
                loss = self._loss(x, y, y_pred, sample_weight)
            return list(tape.gradient(loss, variables))
        finally:
            _restore(saved)

    def _loss(self, x: Any, y: Any, y_pred: Any, sample_weight: Any) -> Any:
        if self.loss_fn is not None:
            return tf.reduce_mean(self.loss_fn(y, y_pred))
        # Keras 3 takes ``training``; tf.keras 2 (TF_USE_LEGACY_KERAS=1) does not.
        takes_training = "training" in inspect.signature(self.model.compute_loss).parameters
        mode = {"training": True} if takes_training else {}
        try:
            return self.model.compute_loss(
                x=x, y=y, y_pred=y_pred, sample_weight=sample_weight, **mode
            )
        except ValueError as error:
            raise InputError(
                f"GradientLogger could not compute the model's loss ({error}); "
                "compile the model with a loss or pass loss_fn=(y_true, y_pred) -> loss"
            ) from error


def _check_options(
    log_dir: str | None, writer: Any, data: Any, every_n_steps: int | None, per_epoch: bool
) -> None:
    if (log_dir is None) == (writer is None):
        raise InputError("GradientLogger needs exactly one of log_dir= or writer=")
    if data is None:
        raise InputError(
            "GradientLogger needs data=(x, y): a batch of training data to take gradients on "
            "(Keras does not pass gradients to callbacks)"
        )
    if every_n_steps is not None and (not isinstance(every_n_steps, int) or every_n_steps < 1):
        raise InputError(f"every_n_steps must be a positive integer or None, got {every_n_steps!r}")
    if every_n_steps is None and not per_epoch:
        raise InputError("GradientLogger would never log: set every_n_steps or per_epoch=True")


def _snapshot(model: Any) -> list[tuple[Any, Any]]:
    """Copies of the variables a forward pass may change (BatchNorm statistics, RNG seeds,
    metric accumulators), so that logging does not perturb training."""
    variables = list(model.non_trainable_variables) + list(getattr(model, "metrics_variables", []))
    unique = {id(v): v for v in variables}.values()
    return [(v, tf.identity(v)) for v in unique]


def _restore(saved: list[tuple[Any, Any]]) -> None:
    for variable, value in saved:
        variable.assign(value)
