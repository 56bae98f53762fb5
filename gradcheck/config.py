"""``gradcheck.config``, as the README shows it: the thresholds live in ``verdicts/config.py``."""

from gradcheck.verdicts.config import DEFAULT_CONFIG, Config, load_config

__all__ = ["DEFAULT_CONFIG", "Config", "load_config"]
