"""Names built to attack each output (escapes, bidi, Markdown, HTML, formulas), and the
checks that a text is safe for a terminal and renders as Markdown would."""

from __future__ import annotations

import re

HOSTILE_PARAMETERS = (
    "clear\x1b[2J\x1b[Hscreen",  # CSI: clear the screen, cursor home
    "osc\x1b]8;;https://evil.example\x07link\x1b]8;;\x07",  # OSC 8 hyperlink
    "title\x1b]0;owned\x1b\\",  # OSC window title, ST-terminated
    "bidi\u202eevil\u2066iso\u2069",  # right-to-left override, isolates
    "c1\x9b31mcsi\x85nel\x7fdel",  # C1 CSI, NEL, DEL
    "zero\u200bwidth\ufeffbom",  # invisible format characters
    "new\nline\r\n## All gradients healthy",  # a fake heading on a line of its own
    "tick`code``span|pipe",
    "<img src=x onerror=alert(1)>",
    "[link](https://evil.example) ![image](x.png) **bold** _em_ ~~strike~~ $x$",
    "[bold red]markup[/bold red]",
    '=HYPERLINK("https://evil.example","click")',
    "+1+2",
    "-2+3",
    "@SUM(A1:A9)",
    "\tleading tab",
    "\rleading return",
)
BIDI_AND_FORMAT = re.compile("[\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]")


def assert_terminal_safe(text: str) -> None:
    """Nothing a terminal would act on: no control character but line ends, no bidi."""
    assert all(c.isprintable() for line in text.split("\n") for c in line), repr(text)
    assert not BIDI_AND_FORMAT.search(text)


def rendered_markdown(text: str) -> str:
    """HTML as GitHub would render ``text``: CommonMark with raw HTML, tables, strikethrough."""
    from markdown_it import MarkdownIt

    renderer = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
    return renderer.render(text)
