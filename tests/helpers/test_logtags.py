"""The tag names of gradcheck's logging helpers, and the install hint for a missing framework."""

from __future__ import annotations

import subprocess
import sys

import pytest

from gradcheck._optional import MissingDependencyError, require
from gradcheck.errors import GradcheckError
from gradcheck.tags import logtags


def test_tags_round_trip_through_split_tag() -> None:
    assert logtags.tag(logtags.GRADIENTS, "net/dense/kernel") == "gradients/net/dense/kernel"
    assert logtags.split_tag("gradient_norm/fc1.weight") == ("gradient_norm", "fc1.weight")
    assert logtags.split_tag(logtags.GLOBAL_GRADIENT_NORM) == ("gradient_norm", "global")
    assert logtags.split_tag(logtags.GLOBAL_GRADIENT_NONFINITE) == ("gradient_nonfinite", "global")


@pytest.mark.parametrize("tag", ["loss", "epoch_loss", "gradients", "gradients/", "dense/kernel"])
def test_other_tags_are_not_ours(tag: str) -> None:
    assert logtags.split_tag(tag) is None


def test_missing_framework_gives_an_install_hint() -> None:
    with pytest.raises(MissingDependencyError) as caught:
        require("no_such_framework_xyz.sub", extra="keras", helper="gradcheck.keras")
    assert isinstance(caught.value, ImportError) and isinstance(caught.value, GradcheckError)
    assert str(caught.value) == (
        "gradcheck.keras needs no_such_framework_xyz, which is not installed: "
        "pip install tensorflow-cpu (gradcheck's keras extra)"
    )


def test_present_module_is_returned() -> None:
    assert require("json", extra="x", helper="y").dumps([1]) == "[1]"


@pytest.mark.parametrize(
    ("module", "framework", "package", "extra"),
    [("keras", "tensorflow", "tensorflow-cpu", "keras"), ("torch", "torch", "torch", "torch")],
)
def test_helpers_without_their_framework_say_how_to_install_it(
    module: str, framework: str, package: str, extra: str
) -> None:
    """Importing gradcheck.keras / gradcheck.torch where the framework is missing."""
    code = (
        f"import sys; sys.modules[{framework!r}] = None\n"
        "from gradcheck._optional import MissingDependencyError\n"
        "try:\n"
        f"    import gradcheck.{module}\n"
        "except MissingDependencyError as error:\n"
        "    print(error)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == (
        f"gradcheck.{module} needs {framework}, which is not installed: "
        f"pip install {package} (gradcheck's {extra} extra)"
    )
