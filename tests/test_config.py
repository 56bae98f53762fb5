"""Thresholds: defaults, loading from --config FILE and [tool.gradcheck], bad values."""

from __future__ import annotations

from pathlib import Path

import pytest

from gradcheck.config import DEFAULT_CONFIG, Config, load_config
from gradcheck.errors import ConfigError


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
        ("explode_factor = -1\n", "must be a positive number"),
        ("explode_sustain_steps = 2.5\n", "whole number"),
        ("baseline_fraction = 2\n", "at most 1"),
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


def test_missing_config_file_raises_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(str(tmp_path / "nope.toml"))


def test_every_threshold_is_documented() -> None:
    source = Path(__file__).resolve().parents[1].joinpath("gradcheck", "config.py").read_text()
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
