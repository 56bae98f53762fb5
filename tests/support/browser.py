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
PHONE_WIDTH = 390  # CSS pixels: an iPhone 12-15's screen in portrait
WIDTH_PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="{src}" style="width:{width}px;height:800px;border:0"></iframe>
<script>
document.getElementById("page").addEventListener("load", function () {{
  var frame = this;
  setTimeout(function () {{
    var root = frame.contentDocument.documentElement, right = 0;
    root.querySelectorAll(".main-svg").forEach(function (svg) {{
      right = Math.max(right, Math.ceil(svg.getBoundingClientRect().right));
    }});
    document.body.dataset.widths = root.scrollWidth + " " + root.clientWidth + " " + right;
  }}, 2000);
}});
</script></body></html>
"""
"""A page that shows ``src`` in a frame ``width`` CSS pixels wide (headless Chromium's window
is at least 500 pixels wide) and writes, once its charts are drawn, how wide the document is
how wide its viewport (without the scroll bar) and where the rightmost chart ends into
``body[data-widths]``."""
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


@dataclass(frozen=True)
class Widths:
    """CSS pixels, in a window of a given width."""

    document: int  # the document's scroll width
    viewport: int  # the window's, without its scroll bar
    charts: int  # where the rightmost chart's SVG ends (0 without charts)


def widths_at(page: Path, workdir: Path, width: int = PHONE_WIDTH) -> Widths:
    """How wide ``page``'s document and charts are in a window ``width`` CSS pixels wide: on
    a page that fits a phone, neither is wider than the viewport (a chart cut off by its
    ``overflow: hidden`` box is too wide as well)."""
    probe = workdir / f"probe-{page.stem}.html"
    probe.write_text(WIDTH_PROBE.format(src=page.resolve().as_uri(), width=width))
    allow = "--allow-file-access-from-files"  # the probe reads its frame's document
    done = _run(probe, workdir / "profile-width", allow, "--dump-dom")
    found = re.search(r'data-widths="(\d+) (\d+) (\d+)"', done.stdout)
    assert found, "the width probe wrote nothing: the page did not load in time"
    return Widths(*(int(number) for number in found.groups()))


def screenshot(page: Path, target: Path, width: int = 1280, height: int = 2400) -> Path:
    """A PNG of ``page`` at ``width`` x ``height`` CSS pixels."""
    size = f"--window-size={width},{height}"
    _run(page, target.parent / "profile-shot", f"--screenshot={target}", size, "--hide-scrollbars")
    return target


WINDOW_WIDTH = 1400  # CSS pixels: a laptop's browser window
BOX_PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="{src}" style="width:{width}px;height:900px;border:0"></iframe>
<script>
document.getElementById("page").addEventListener("load", function () {{
  var frame = this;
  setTimeout(function () {{
    var doc = frame.contentDocument, found = [];
    {selectors}.forEach(function (selector) {{
      var node = doc.querySelector(selector);
      if (!node) {{ found.push(selector + "=none"); return; }}
      var box = node.getBoundingClientRect();
      found.push(selector + "=" + [box.left, box.top, box.width, box.height].map(Math.round));
    }});
    document.body.dataset.boxes = found.join(";");
    document.body.dataset.scroll = doc.documentElement.scrollWidth + " "
      + doc.documentElement.clientWidth;
  }}, 2000);
}});
</script></body></html>
"""


@dataclass(frozen=True)
class Box:
    """Where an element lies on the page, in CSS pixels from the document's top left."""

    left: int
    top: int
    width: int
    height: int

    @property
    def bottom(self) -> int:
        return self.top + self.height


def boxes_at(
    page: Path, workdir: Path, selectors: list[str], width: int = WINDOW_WIDTH
) -> tuple[dict[str, Box | None], Widths]:
    """The box of the first element matching each CSS selector (None when none does) once the
    page's charts are drawn, in a window ``width`` CSS pixels wide, and how wide the document
    is there (``Widths.charts`` is 0: not measured)."""
    import json

    probe = workdir / f"boxes-{page.stem}.html"
    probe.write_text(
        BOX_PROBE.format(src=page.resolve().as_uri(), width=width, selectors=json.dumps(selectors))
    )
    allow = "--allow-file-access-from-files"
    done = _run(probe, workdir / "profile-boxes", allow, "--dump-dom")
    found = re.search(r'data-boxes="([^"]*)" data-scroll="(\d+) (\d+)"', done.stdout)
    assert found, "the box probe wrote nothing: the page did not load in time"
    boxes: dict[str, Box | None] = {}
    for item in found.group(1).split(";"):
        selector, _, numbers = item.rpartition("=")
        boxes[selector] = None if numbers == "none" else Box(*map(int, numbers.split(",")))
    document, viewport = int(found.group(2)), int(found.group(3))
    return boxes, Widths(document=document, viewport=viewport, charts=0)


def share_of_colour(
    png: Path, box: Box, colour: tuple[int, int, int], tolerance: int = 12
) -> float:
    """The share of ``box``'s pixels in the screenshot ``png`` within ``tolerance`` of
    ``colour`` (per channel): what a reader sees of that colour there."""
    from PIL import Image

    with Image.open(png) as image:
        region = image.convert("RGB").crop((box.left, box.top, box.left + box.width, box.bottom))
        pixels = list(region.getdata())
    close = sum(
        all(abs(a - b) <= tolerance for a, b in zip(p, colour, strict=True)) for p in pixels
    )
    return close / max(len(pixels), 1)
