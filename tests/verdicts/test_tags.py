"""Roles of tags and their pairing under one parameter name."""

from __future__ import annotations

import pytest

from gradcheck.errors import ConfigError
from gradcheck.tags import TagRules, classify_tag, parameter_name
from gradcheck.tags.scalars import ScalarRole, scalar_role, training_loss_rank
from gradcheck.verdicts.pairing import pair_parameters

GRADIENT_TAGS = {
    # TF2 custom loop of the seed question: 'Gradients_' + var.name
    "Gradients_dense/kernel:0": "dense/kernel",
    "Gradients/dense/kernel:0": "dense/kernel",
    "gradients/dense_1/kernel": "dense_1/kernel",
    "GRADS/fc1.weight": "fc1.weight",
    "grad/fc1.weight": "fc1.weight",
    # PyTorch hand-written: name + '/grad', name + '.grad', name + '_grad'
    "fc1.weight/grad": "fc1.weight",
    "fc1.weight.grad": "fc1.weight",
    "conv1.bias_grad": "conv1.bias",
    "layer/kernel/gradient": "layer/kernel",
    "layer/kernel/Gradients": "layer/kernel",
    # Keras 2 write_grads: weight name with ':' -> '_' plus '_grad'
    "dense_1/kernel_0_grad": "dense_1/kernel",
    # a prefix path before the marker stays part of the name
    "train/grads/fc1.weight": "train/fc1.weight",
}

WEIGHT_TAGS = {
    "dense/kernel:0": "dense/kernel",
    "fc1.weight": "fc1.weight",
    "weights/dense_1/kernel": "dense_1/kernel",
    "weights/sequential/dense_1/kernel": "sequential/dense_1/kernel",
    "params/fc1.weight": "fc1.weight",
    "param/fc1.weight": "fc1.weight",
    "parameters/fc1.weight": "fc1.weight",
    "fc1.weight/value": "fc1.weight",
    "dense_1/kernel/histogram": "dense_1/kernel",
    "L1_16_Dense_RELU/kernel_0/histogram": "L1_16_Dense_RELU/kernel",
    "dense/kernel_0": "dense/kernel",
    "kernel/histogram": "kernel",
    "layer1/weights/layer1/weights": "layer1/weights/layer1/weights",
    "output/Weights": "output/Weights",
    "lstm_cell/W_x": "lstm_cell/W_x",
    "w": "w",
}

OTHER_TAGS = [
    "layer1/X",
    "pre_activations",
    "layer1/Wx_plus_b/pre_activations",  # tensorboard's mnist_with_summaries (log_tayo)
    "x/preactivation",
    "inputs",
    "logits",
]
ACTIVATION_TAGS = {  # tag -> the layer its row is named after
    "layer1/layer1/outputs": "layer1/layer1",  # MorvanZhou's tutorial (the corpus)
    "dnn/dnn/hiddenlayer_0_activation": "dnn/dnn/hiddenlayer_0",  # TF Estimators
    "dnn/dnn/logits_activation": "dnn/dnn/logits",
    "conv1/activations": "conv1",
    "layer1/activations": "layer1",  # a TF1 name scope
    "layer1/activations_1": "layer1",  # ... uniquified by TF1
    "block.output": "block",
    "fc1/output": "fc1",
    "fc1/outputs": "fc1",
    "fc1/out": "fc1",
    "fc1/activation": "fc1",
    "activations/fc1": "fc1",  # a forward hook's add_histogram
    "activations/encoder/layer.0": "encoder/layer.0",
    "act/relu2": "relu2",
    "model/activations/fc1": "model/fc1",
    "dense_1/activations/histogram": "dense_1",
}


@pytest.mark.parametrize(("tag", "name"), sorted(GRADIENT_TAGS.items()))
def test_gradient_tags_are_recognised_and_named(tag: str, name: str) -> None:
    assert classify_tag(tag) == "gradient"
    assert parameter_name(tag) == name


@pytest.mark.parametrize(("tag", "name"), sorted(WEIGHT_TAGS.items()))
def test_weight_tags_are_recognised_and_named(tag: str, name: str) -> None:
    assert classify_tag(tag) == "weight"
    assert parameter_name(tag) == name


@pytest.mark.parametrize("tag", OTHER_TAGS)
def test_input_and_pre_activation_tags_are_other(tag: str) -> None:
    assert classify_tag(tag) == "other"


@pytest.mark.parametrize(("tag", "layer"), sorted(ACTIVATION_TAGS.items()))
def test_activation_tags_are_named_after_their_layer(tag: str, layer: str) -> None:
    """Issue 35: ``activations/<layer>`` was a weight named ``activations/<layer>`` (and could
    be flagged exploding); ``<layer>/activations`` and ``<layer>/output`` were dropped."""
    assert classify_tag(tag) == "activation"
    assert parameter_name(tag) == layer


def test_activation_tags_are_not_paired_as_parameters() -> None:
    keys = [("activations/fc1", 0), ("fc1.weight", 0), ("fc1.weight/grad", 0)]
    assert [p.name for p in pair_parameters(keys, [])] == ["fc1.weight"]


@pytest.mark.parametrize(
    ("weight", "gradient", "name"),
    [
        ("dense/kernel:0", "Gradients_dense/kernel:0", "dense/kernel"),
        ("fc1.weight", "fc1.weight/grad", "fc1.weight"),
        ("weights/dense_1/kernel", "gradients/dense_1/kernel", "dense_1/kernel"),
        ("dense_1/kernel_0", "dense_1/kernel_0_grad", "dense_1/kernel"),
    ],
)
def test_weight_and_gradient_of_one_parameter_pair(weight: str, gradient: str, name: str) -> None:
    assert parameter_name(weight) == parameter_name(gradient)
    assert parameter_name(weight) == name  # the same name, and the right one
    assert (classify_tag(weight), classify_tag(gradient)) == ("weight", "gradient")


def test_user_patterns_take_precedence_and_name_the_parameter() -> None:
    rules = TagRules.from_patterns(grad=r"^d_(?P<name>.+)$", weight=r"^theta_(?P<name>.+)$")
    assert rules.classify("d_layer3") == ("gradient", "layer3")
    assert rules.classify("theta_layer3") == ("weight", "layer3")
    # tags the user patterns do not match fall back to the built-in rules
    assert rules.classify("fc1.weight/grad") == ("gradient", "fc1.weight")
    assert classify_tag("d_layer3", rules) == "gradient"


def test_user_pattern_name_is_normalised_like_builtin_names() -> None:
    rules = TagRules.from_patterns(grad=r"^dL_(?P<name>.+)$")
    assert rules.classify("dL_dense/kernel:0") == ("gradient", "dense/kernel")


@pytest.mark.parametrize(
    ("grad", "weight", "message"),
    [
        ("grad_(?P<name>.+", None, "not a valid regular expression"),
        ("grad_(.+)", None, "named group"),
        (None, "w_(?P<param>.+)", "named group"),
    ],
)
def test_bad_user_patterns_raise_config_error(
    grad: str | None, weight: str | None, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        TagRules.from_patterns(grad=grad, weight=weight)


def test_empty_user_patterns_mean_builtin_rules() -> None:
    assert TagRules.from_patterns(None, "") == TagRules()


@pytest.mark.parametrize(
    ("tag", "role"),
    [
        ("gradient_norm/global", ScalarRole("global_grad_norm")),
        ("gradient_nonfinite/global", ScalarRole("global_grad_nonfinite")),
        ("gradient_norm/fc1.weight", ScalarRole("grad_norm", "fc1.weight")),
        ("weight_norm/dense_1/kernel", ScalarRole("weight_norm", "dense_1/kernel")),
        ("gradient_nonfinite/fc1.weight", ScalarRole("grad_nonfinite", "fc1.weight")),
        ("weight_nonfinite/fc1.weight", ScalarRole("weight_nonfinite", "fc1.weight")),
        ("train/grad_norm", ScalarRole("global_grad_norm")),
        ("grad_2.0_norm_total", ScalarRole("global_grad_norm")),
        ("global_grad_norm", ScalarRole("global_grad_norm")),
        ("epoch_loss", ScalarRole("loss")),
        ("Loss/train", ScalarRole("loss")),
        ("3. TimeGAN training - GAN/1. Unsupervised loss", ScalarRole("loss")),
        ("epoch_accuracy", None),
        ("train/learning_rate", ScalarRole("learning_rate")),
        ("epoch_learning_rate", ScalarRole("learning_rate")),
        ("lr-SGD/pg1", ScalarRole("learning_rate")),
        ("lr-Adam", ScalarRole("learning_rate")),
        ("lr-Adam-momentum", None),
        ("lr_scale", None),
    ],
)
def test_scalar_roles(tag: str, role: ScalarRole | None) -> None:
    assert scalar_role(tag) == role


def test_training_losses_rank_before_validation_losses() -> None:
    tags = ["val_loss", "Loss/test", "loss", "epoch_loss"]
    assert sorted(tags, key=training_loss_rank)[:2] == ["loss", "epoch_loss"]


def test_pairing_groups_series_and_scalars_in_order_of_appearance() -> None:
    histograms = [
        ("weights/fc1.weight", 0),
        ("gradients/fc1.weight", 0),
        ("layer1/activations", 0),
        ("fc2.weight", 0),
        ("Gradients_fc2.weight", 0),
        ("kernel/histogram", 0),
        ("kernel/histogram", 1),
    ]
    scalars = ["loss", "gradient_norm/fc1.weight", "weight_norm/fc1.weight", "weight_norm/fc3"]
    params = pair_parameters(histograms, scalars)
    assert [p.name for p in params] == ["fc1.weight", "fc2.weight", "kernel", "kernel#1", "fc3"]
    assert [p.depth for p in params] == [0, 1, 2, 3, 4]
    fc1 = params[0]
    assert fc1.weight == ("weights/fc1.weight", 0) and fc1.gradient == ("gradients/fc1.weight", 0)
    assert fc1.grad_norm == "gradient_norm/fc1.weight"
    assert fc1.weight_norm == "weight_norm/fc1.weight"
    assert params[3].weight == ("kernel/histogram", 1) and params[3].gradient is None
    assert params[4].weight is None and params[4].weight_norm == "weight_norm/fc3"


def test_pairing_makes_two_writers_series_of_one_variable_one_parameter() -> None:
    """Issue 37: a variable logged by two writers (the TF name and Keras 2's histogram tag;
    Keras' TensorBoard callback beside GradientLogger) is one parameter, named once."""
    params = pair_parameters([("dense/kernel:0", 0), ("dense/kernel_0", 0)], [])
    assert [p.name for p in params] == ["dense/kernel"]
    assert params[0].weight == ("dense/kernel:0", 0)
    assert params[0].weight_also == (("dense/kernel_0", 0),)
    keras = [
        ("net/dense/kernel/histogram", 0),
        ("net/dense/bias/histogram", 0),
        ("weights/net/dense/kernel", 0),
        ("gradients/net/dense/kernel", 0),
        ("weights/net/dense/bias", 0),
        ("gradients/net/dense/bias", 0),
        ("fc1.weight", 0),
        ("fc1.weight/grad", 0),
        ("gradients/fc1.weight", 0),
        ("weights/fc1.weight", 0),
    ]
    scalars = ["weight_norm/net/dense/kernel", "gradient_norm/net/dense/kernel"]
    params = pair_parameters(keras, scalars)
    assert [p.name for p in params] == ["net/dense/kernel", "net/dense/bias", "fc1.weight"]
    kernel, bias, torch_weight = params
    assert kernel.weight == ("net/dense/kernel/histogram", 0)
    assert kernel.weight_also == (("weights/net/dense/kernel", 0),)
    assert kernel.gradient == ("gradients/net/dense/kernel", 0) and kernel.gradient_also == ()
    assert kernel.weight_norm == "weight_norm/net/dense/kernel"
    assert bias.weight_also == (("weights/net/dense/bias", 0),)
    assert torch_weight.gradient == ("fc1.weight/grad", 0)
    assert torch_weight.gradient_also == (("gradients/fc1.weight", 0),)
    assert torch_weight.weight_also == (("weights/fc1.weight", 0),)
