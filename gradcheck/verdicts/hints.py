"""Usual causes and fixes for a verdict, by where the parameter sits and what it is.

In the spirit of DeepDiagnosis's fix suggestions: a short, concrete list a user can try, chosen
by the kind of finding (which rule fired), the parameter's position in the network (first
appearance order) and its kind (BatchNorm gamma/beta, BatchNorm moving statistics, other).
"""

from __future__ import annotations

import functools
import re
from typing import Literal

ParameterKind = Literal["bn_affine", "bn_moving", "embedding", "other"]
GradientLogging = Literal["logged", "not_for_this", "not_in_run"]
"""Whether a parameter's gradient was logged, or only other parameters' were, or none at all."""

_BN_LAYER = re.compile(r"(?:batch_?norm|(?:^|[/._])bn\d*(?:[/._]|$))", re.IGNORECASE)
_BN_MOVING = re.compile(r"(?:moving|running)_(?:mean|var(?:iance)?)$", re.IGNORECASE)
_BN_AFFINE_KERAS = re.compile(r"(?:^|[/._])(?:gamma|beta)$", re.IGNORECASE)
_TORCH_AFFINE = re.compile(r"\.(?:weight|bias)$")
# ``embed.weight``, ``word_embeddings.weight``, Keras ``embedding/embeddings``, ``tok_embed``
_EMBEDDING = re.compile(r"embed", re.IGNORECASE)
# torch's ``weight_hh_l0``/``bias_ih_l1_reverse``, Keras' ``recurrent_kernel``, layer names
_RECURRENT = re.compile(
    r"(?:weight|bias)_(?:hh|ih)_l\d|recurrent_kernel|lstm|gru|rnn", re.IGNORECASE
)
_GATED = re.compile(r"lstm|gru", re.IGNORECASE)


@functools.lru_cache(maxsize=1 << 14)
def parameter_kind(name: str) -> ParameterKind:
    """BatchNorm moving statistics, BatchNorm gamma/beta, an embedding table, or anything else
    (by name); kept for the last 16,384 names (the rules ask several times a parameter, and a
    sweep's runs share their names)."""
    if _BN_MOVING.search(name):
        return "bn_moving"
    if _BN_AFFINE_KERAS.search(name):
        return "bn_affine"
    if _TORCH_AFFINE.search(name) and _BN_LAYER.search(name.rsplit(".", 1)[0]):
        return "bn_affine"
    if _EMBEDDING.search(name):
        return "embedding"
    return "other"


def layer_of(name: str) -> str:
    """The layer a parameter belongs to: its name without the last component."""
    for separator in ("/", "."):
        if separator in name:
            return name.rsplit(separator, 1)[0]
    return name


Position = Literal["early", "middle", "late"]


def position(depth: int, count: int) -> Position:
    """Where a parameter sits among ``count`` parameters (order of first appearance)."""
    if count < 3:
        return "late" if depth == count - 1 else "early"
    fraction = depth / (count - 1)
    return "early" if fraction < 1 / 3 else "late" if fraction > 2 / 3 else "middle"


NAN_AFTER_RISE = (
    "Gradients blew up before the NaN: lower the learning rate, clip the global gradient norm "
    "(torch.nn.utils.clip_grad_norm_, tf.clip_by_global_norm, Keras global_clipnorm), add "
    "warm-up, and "
    "check that inputs and targets are normalised."
)
NAN_AFTER_LOSS_RISE = (
    "The training loss blew up before the NaN (by orders of magnitude): lower the learning rate, "
    "clip the global gradient norm (torch.nn.utils.clip_grad_norm_, tf.clip_by_global_norm, "
    "Keras global_clipnorm), add warm-up, and check that inputs and targets are normalised; "
    "log gradients more often to see where they rose."
)
NAN_PLAIN = (
    "Look for log(0), division by zero or sqrt of a negative in the loss or a custom layer, "
    "inputs that already hold NaN, and fp16 overflow (use loss scaling or bf16); find the first "
    "bad op with torch.autograd.set_detect_anomaly(True) or tf.debugging.enable_check_numerics()."
)
NAN_SCALED = (
    "Non-finite values that loss scaling did not absorb: look for log(0), division by zero or "
    "sqrt of a negative in the loss or a custom layer, inputs that already hold NaN, and ops "
    "that overflow fp16 even unscaled (softmax/exp, large activations: keep them in float32 or "
    "use bf16); find the first bad op with torch.autograd.set_detect_anomaly(True) or "
    "tf.debugging.enable_check_numerics()."
)
OVERFLOW = (
    "Dynamic loss scaling skipped these steps and lowered its scale: harmless in small numbers "
    "(GradScaler starts high on purpose). Many skipped steps waste updates: start from a lower "
    "init_scale, or look for an op that overflows fp16 (keep it in float32, or use bf16)."
)


def nan_hint(loss_scaling: bool) -> str:
    """The NaN hint; a run that already uses loss scaling is not told to use it."""
    return NAN_SCALED if loss_scaling else NAN_PLAIN


DIVERGING = (
    "The training loss diverged: the learning rate is too large for this model (clipping bounds "
    "each update's length, not whether it helps, so a clipped run diverges too): lower the "
    "learning rate (10x), add warm-up, and check that inputs and targets are normalised and the "
    "loss averaged, not summed."
)
EXPLODING_RISE = (
    "Learning rate too large or no gradient clipping: lower the learning rate, clip the global "
    "norm (see the suggested clip norm), add warm-up; unnormalised inputs or targets and "
    "recurrent layers without clipping do this too."
)
EXPLODING_RECURRENT = (
    "Gradients through time blew up, as recurrent layers do without clipping: clip the global "
    "gradient norm (see the suggested clip norm; clipping by value changes the gradient's "
    "direction), lower the learning rate, and initialise the recurrent weights orthogonally "
    "(torch.nn.init.orthogonal_ on weight_hh, Keras recurrent_initializer='orthogonal') so that "
    "their gain starts near 1."
)
RECURRENT_GATING = (
    " If it is a plain RNN, use a gated layer (LSTM or GRU): its gates carry the gradient "
    "across many more time steps."
)
VANISHING_RECURRENT = (
    "Gradients fade through the recurrent layer's time steps: the recurrent weights shrink the "
    "gradient at every step and saturated gates or tanh units pass little back. Initialise the "
    "recurrent weights orthogonally (torch.nn.init.orthogonal_ on weight_hh, Keras "
    "recurrent_initializer='orthogonal'), keep the LSTM forget-gate bias at 1 (Keras "
    "unit_forget_bias=True), shorten the sequences (truncated backpropagation through time)."
)


def is_recurrent(name: str) -> bool:
    """A parameter of a recurrent layer, by name (``rnn.weight_hh_l0``, ``lstm/recurrent_kernel``,
    ``gru_cell/kernel``)."""
    return bool(_RECURRENT.search(name))


def exploding_rise_hint(name: str) -> str:
    """The hint for a rising gradient: recurrent layers get theirs (clip, not activations)."""
    if not is_recurrent(name):
        return EXPLODING_RISE
    return EXPLODING_RECURRENT + ("" if _GATED.search(name) else RECURRENT_GATING)


EXPLODING_DWARF = (
    "Gradients far larger than the weights they update: the loss scale and learning rate do not "
    "match (a sum instead of a mean reduction?) or targets are unnormalised; lower the learning "
    "rate or clip gradients."
)
EXPLODING_WEIGHTS = (
    "Weights grow without bound: learning rate too large, no weight decay, or unnormalised "
    "targets; lower the learning rate, clip gradients, and log gradients to see the cause."
)
EXPLODING_FROM_START = (
    "The model's weights grew orders of magnitude beyond their initial scale between the first "
    "logged steps: the learning rate is orders of magnitude too high (clipping does not stop "
    "it: Adam moves each weight by about the learning rate whatever the gradient's norm); "
    "lower it (10-100x), add warm-up, and log the first steps (HF Trainer: logging_steps) to "
    "see where it began."
)
VANISHING_EARLY = (
    "Gradients shrink layer by layer on the way back: saturating activations (sigmoid/tanh) deep "
    "in the stack or too-small initialisation. Use ReLU/GELU-family activations, He/Glorot "
    "initialisation, BatchNorm/LayerNorm, or residual connections."
)
VANISHING_LATE = (
    "Gradient far below the rest of the network near the output: a saturated output activation "
    "(sigmoid/softmax on extreme logits: compute the loss from logits) or a layer barely "
    "connected to the loss."
)
VANISHING_ZERO = (
    "Gradient practically zero: dead ReLUs (lower the learning rate, use LeakyReLU), a layer "
    "not connected to the loss, or a stop_gradient/detach in the graph."
)
VANISHING_DECAY = (
    "Gradient decayed by orders of magnitude while the loss did not: units saturate or die "
    "during training; lower the learning rate, add normalisation, check for dying ReLUs."
)
STATIC_BN_AFFINE = (
    "BatchNorm gamma/beta not learning: the layer is frozen (trainable=False), missing from the "
    "optimizer's parameters, or the model runs in inference mode while training "
    "(training=False, model.eval()). Frozen on purpose?"
)
STATIC_BN_MOVING = (
    "BatchNorm moving statistics not updated: the layer runs in inference mode (Keras "
    "trainable=False puts BatchNorm in inference mode; PyTorch model.eval()). Frozen on purpose?"
)
STATIC_PLAIN = (
    "Weights never updated: a frozen layer (trainable=False, requires_grad=False), a parameter "
    "missing from the optimizer, or no gradient reaching it. Frozen on purpose?"
)
STATIC_NEVER_TRAINED = (
    "No weight of the run moved while it trained: the optimizer step is never taken "
    "(optimizer.step(), apply_gradients or minimize missing from the loop), the learning rate "
    "is 0, or the optimizer was given other variables than the model's (a copy of the model, "
    "a parameter list built before the layers)."
)
STATIC_STOPPED = (
    "The weights stopped changing part-way while training went on: a learning-rate schedule "
    "that reached 0 (a scheduler stepped every batch but sized in epochs, e.g. LambdaLR or a "
    "linear decay given the number of epochs where it counts optimizer steps), or the "
    "parameter frozen or dropped from the optimizer part-way. Log the learning rate and size "
    "the schedule in optimizer steps."
)
STATIC_FLOAT32 = (
    "Updates too small to move the weights: the learning rate ({rate}) times the gradient is "
    "below float32 resolution of these weights (every step rounds away) or a tiny fraction of "
    "their scale. Raise the learning "
    "rate (by orders of magnitude), check the scheduler has not decayed it to about zero, and "
    "keep weights in float32 under mixed precision."
)
STATIC_NO_GRADIENTS = (
    " Gradients were not logged: log them (gradcheck.keras / gradcheck.torch helpers) to tell a "
    "frozen layer from vanishing gradients."
)
STATIC_FROZEN = (
    "Weights never updated and no gradient logged for them while the run logs other "
    "parameters' gradients: nothing computes one, as for a frozen parameter "
    "(requires_grad=False, trainable=False) or one not connected to the loss. Frozen on purpose?"
)
STATIC_NO_GRADIENT_HERE = (
    " No gradient was logged for it while the run logs other parameters' gradients: nothing "
    "computes one (requires_grad=False, trainable=False, or not connected to the loss)."
)


DEAD = (
    "ReLU units stopped firing: a learning rate too large (one big update pushes the "
    "pre-activations below zero for good), too negative a bias, or a bad init. Lower the "
    "learning rate, use He init and a small positive bias, or LeakyReLU/GELU; BatchNorm before "
    "the activation keeps pre-activations centred."
)
SATURATED = (
    "tanh/sigmoid units sit at their bounds, where the derivative is near zero: too large an "
    "init or learning rate, or unnormalised inputs. Use Glorot (Xavier) init, normalise the "
    "inputs or add normalisation before the activation, lower the learning rate, or use ReLU."
)


def vanishing_hint(rule: str, where: Position, name: str = "") -> str:
    """The hint for a vanishing finding from ``rule`` (depth, absolute, decay) on ``name``."""
    if is_recurrent(name):
        return VANISHING_RECURRENT + ("" if _GATED.search(name) else RECURRENT_GATING)
    if rule == "absolute":
        return VANISHING_ZERO
    if rule == "decay":
        return VANISHING_DECAY
    return VANISHING_LATE if where == "late" else VANISHING_EARLY


def static_hint(kind: ParameterKind, gradients: GradientLogging) -> str:
    """The hint for a static finding on a parameter of ``kind``, with what the logged
    gradients say (BatchNorm moving statistics never have one). A parameter left out of the
    optimizer still gets a gradient; one without any, in a run that logs them, is frozen."""
    if kind == "bn_moving":
        return STATIC_BN_MOVING
    if gradients == "not_for_this":
        return STATIC_FROZEN if kind != "bn_affine" else STATIC_BN_AFFINE + STATIC_NO_GRADIENT_HERE
    text = STATIC_BN_AFFINE if kind == "bn_affine" else STATIC_PLAIN
    return text if gradients == "logged" else text + STATIC_NO_GRADIENTS


_BIAS = re.compile(r"^(?P<stem>.*?)(?P<word>bias|beta)(?P<collision>#\d+)?$", re.IGNORECASE)
_SIBLINGS = {"bias": ("kernel", "weight", "weights", "w"), "beta": ("gamma",)}


def sibling_weights(name: str) -> tuple[str, ...]:
    """Names the weight of a bias's layer may have (``dense/bias`` -> ``dense/kernel``, ...)."""
    match = _BIAS.match(name)
    if not match:
        return ()
    stem, collision = match.group("stem"), match.group("collision") or ""
    if stem and stem[-1] not in "/._":
        return ()
    words = _SIBLINGS[match.group("word").lower()]
    return tuple(f"{stem}{word}{collision}" for word in words)
