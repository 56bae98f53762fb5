"""Thresholds: defaults, loading from --config FILE and [tool.gradcheck], bad values."""

from __future__ import annotations

import math
import os
from dataclasses import fields
from pathlib import Path

import pytest

from gradcheck.errors import ConfigError
from gradcheck.verdicts.config import DEFAULT_CONFIG, MAX_CONFIG_BYTES, RANGES, Config, load_config
from tests.support.paths import REPO


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_defaults_without_any_file(tmp_path: Path) -> None:
    assert load_config(None, cwd=str(tmp_path)) == DEFAULT_CONFIG == Config()
    assert DEFAULT_CONFIG.vanish_absolute == 1e-7
    assert DEFAULT_CONFIG.vanish_depth_ratio == 1e-3


def test_pyproject_tool_section_in_the_working_directory(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        '[project]\nname = "x"\n\n[tool.gradcheck]\nexplode-factor = 50\n'
        'vanish_absolute = 1e-8\nfail_on = ["nan", "vanishing"]\n',
    )
    config = load_config(None, cwd=str(tmp_path))
    assert config.explode_factor == 50.0 and isinstance(config.explode_factor, float)
    assert config.vanish_absolute == 1e-8
    assert config.fail_on == "nan,vanishing"
    assert config.static_movement == DEFAULT_CONFIG.static_movement


def test_pyproject_without_tool_section_gives_defaults(tmp_path: Path) -> None:
    write(tmp_path / "pyproject.toml", '[project]\nname = "x"\n[tool.ruff]\nline-length = 9\n')
    assert load_config(None, cwd=str(tmp_path)) == DEFAULT_CONFIG


def test_config_file_with_top_level_keys(tmp_path: Path) -> None:
    path = write(
        tmp_path / "gradcheck.toml",
        "explode_sustain_steps = 5\ngrad_pattern = 'd_(?P<name>.+)'\n",
    )
    config = load_config(path)
    assert config.explode_sustain_steps == 5 and config.grad_pattern == "d_(?P<name>.+)"


def test_config_file_with_tool_section(tmp_path: Path) -> None:
    path = write(tmp_path / "other.toml", "[tool.gradcheck]\nstatic_movement = 1e-5\n")
    assert load_config(path).static_movement == 1e-5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("explode_factr = 3\n", "unknown setting 'explode_factr'"),
        ("explode_factor = 'big'\n", "must be a number"),
        ("explode_factor = true\n", "must be a number"),
        ("explode_factor = -1\n", "explode_factor must be a finite number above 1, got -1.0"),
        ("explode_factor = inf\n", "explode_factor must be a finite number above 1, got inf"),
        ("explode_factor = 1e400\n", "explode_factor must be a finite number above 1, got inf"),
        ("explode_factor = 1\n", "explode_factor must be a finite number above 1, got 1.0"),
        ("explode_spike_factor = nan\n", "explode_spike_factor must be a finite number above 1"),
        ("vanish_absolute = -inf\n", "vanish_absolute must be a finite number above 0"),
        ("static_movement = 0\n", "static_movement must be a finite number above 0, got 0.0"),
        ("vanish_decay_factor = 1\n", r"vanish_decay_factor must be a number in \(0, 1\), got"),
        ("explode_sustain_steps = 2.5\n", "whole number"),
        ("explode_sustain_steps = 0\n", "explode_sustain_steps must be a finite number above 0"),
        ("baseline_fraction = 2\n", r"baseline_fraction must be a number in \(0, 1\], got 2.0"),
        ("clip_suggest_percentile = 120\n", r"\(0, 100\]"),
        ("fail_on = 'nan,sometimes'\n", "unknown value"),
        ("grad_pattern = 3\n", "must be a string"),
        ("explode_factor = = 3\n", "not valid TOML"),
        ("[tool]\ngradcheck = 3\n", "must be a table"),
    ],
)
def test_bad_config_files_raise_config_error(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path / "bad.toml", text)
    with pytest.raises(ConfigError, match=message):
        load_config(path)


def test_every_threshold_has_a_range_and_its_default_is_in_it() -> None:
    numbers = {f.name for f in fields(Config)} - {"grad_pattern", "weight_pattern", "fail_on"}
    assert set(RANGES) == numbers
    for name, allowed in RANGES.items():
        assert getattr(DEFAULT_CONFIG, name) in allowed, name
    with pytest.raises(ConfigError, match="explode_factor must be a finite number above 1"):
        Config(explode_factor=math.inf)  # the Python API is checked as the TOML file is


def test_a_fifo_or_a_device_as_config_file_is_refused_without_reading(tmp_path: Path) -> None:
    """Opening a FIFO for reading would wait for a writer, /dev/zero never ends."""
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    with pytest.raises(ConfigError, match=r"is a FIFO \(named pipe\), not a regular file"):
        load_config(str(fifo))
    with pytest.raises(ConfigError, match="is a character device, not a regular file"):
        load_config("/dev/zero")
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        load_config(str(tmp_path))


def test_a_config_file_over_one_mib_is_refused(tmp_path: Path) -> None:
    at_limit = write(tmp_path / "at.toml", "#" * (MAX_CONFIG_BYTES - 1) + "\n")
    assert load_config(at_limit) == DEFAULT_CONFIG  # a comment of 1 MiB is still read
    over = write(tmp_path / "over.toml", "#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match=r"larger than 1048576 bytes \(1 MiB\)"):
        load_config(over)


@pytest.mark.parametrize("opening", ["[", "{a="])
def test_toml_nested_too_deeply_is_a_config_error(tmp_path: Path, opening: str) -> None:
    closing = {"[": "]", "{a=": "}"}[opening]
    path = write(tmp_path / "deep.toml", f"a = {opening * 100_000}1{closing * 100_000}\n")
    with pytest.raises(ConfigError, match="not valid TOML: nested too deeply"):
        load_config(path)


def test_missing_config_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope.toml"))


def test_every_threshold_is_documented() -> None:
    source = REPO.joinpath("gradcheck", "verdicts", "config.py").read_text()
    for name in Config.__dataclass_fields__:
        declaration = source.index(f"    {name}:")
        assert '"""' in source[declaration : declaration + 200], name


def test_a_config_file_that_is_not_utf8_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(b'explode_factor = "\xff"\n')
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(str(path))


def test_a_pyproject_without_gradcheck_in_it_is_not_parsed(tmp_path: Path) -> None:
    """Not even read as TOML (start-up): its errors are another tool's business."""
    write(tmp_path / "pyproject.toml", "[project\nname = 'other'\n")
    assert load_config(cwd=str(tmp_path)) == DEFAULT_CONFIG
    write(tmp_path / "pyproject.toml", "[project\ndependencies = ['gradcheck']\n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_config(cwd=str(tmp_path))
