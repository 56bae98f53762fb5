"""``gradcheck.config``, as the docs show it: the thresholds live in ``verdicts/config.py``."""

from gradcheck.verdicts.config import DEFAULT_CONFIG, Config, load_config

__all__ = ["DEFAULT_CONFIG", "Config", "load_config"]
