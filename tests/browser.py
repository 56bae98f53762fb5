"""Open a page in headless Chromium: its DOM after the scripts ran, its console, a screenshot.

Chromium's ``--dump-dom`` prints the document as the page's scripts left it, and
``--enable-logging=stderr`` prints every console message (``console.log``/``error`` and uncaught
exceptions alike) as an ``INFO:CONSOLE`` line. The flags keep Chromium off the network and
out of the machine's profile (a fresh ``--user-data-dir`` each time).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

BINARIES = ("chromium", "chromium-browser", "google-chrome", "chrome")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)
CONSOLE = re.compile(r":CONSOLE[:(]\d*\)?\] (.*)")
TIME_BUDGET_MS = 10_000  # virtual time for the page's scripts (plotly draws in well under 1 s)


@dataclass(frozen=True)
class Rendered:
    dom: str  # the document after its scripts ran
    console: list[str]  # every console message (errors, logs and uncaught exceptions)


def chromium() -> str:
    """The Chromium binary; skip the test (saying why) when the machine has none."""
    for name in BINARIES:
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(f"no Chromium binary ({', '.join(BINARIES)}) on PATH: apt-get install chromium")


def _run(page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    command = [
        chromium(),
        *FLAGS,
        f"--user-data-dir={profile}",
        f"--virtual-time-budget={TIME_BUDGET_MS}",
        *extra,
        page.resolve().as_uri(),
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, check=True)


def render(page: Path, workdir: Path) -> Rendered:
    """Open ``page`` (a file) and return its final DOM and console messages."""
    done = _run(page, workdir / "profile-dom", "--enable-logging=stderr", "--v=0", "--dump-dom")
    return Rendered(dom=done.stdout, console=CONSOLE.findall(done.stderr))


def screenshot(page: Path, target: Path, width: int = 1280, height: int = 2400) -> Path:
    """A PNG of ``page`` at ``width`` x ``height`` CSS pixels."""
    size = f"--window-size={width},{height}"
    _run(page, target.parent / "profile-shot", f"--screenshot={target}", size, "--hide-scrollbars")
    return target
