"""The escapes of untrusted text, one per output (gradcheck.report.escape), as properties:
whatever the text, the terminal gets only printable characters, and Markdown renders it as
exactly the text the terminal would show, with no element of its own."""

from __future__ import annotations

import html
import string

from hypothesis import example, given
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from gradcheck.report.escape import (
    FORMULA_STARTS,
    csv_text,
    each_string,
    markdown_code,
    markdown_text,
    terminal,
)
from tests.support.handmade import sample_report

RENDERER = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# Markdown's own characters, controls and bidi often, any other character sometimes
HOSTILE = st.text(
    st.sampled_from(string.punctuation + " \t\n\r\x1b\x7f\x9b\u202e\u2066\u200b\u00a0ab")
    | st.characters(),
    max_size=40,
)


@given(HOSTILE)
def test_the_terminal_gets_only_printable_characters(text: str) -> None:
    shown = terminal(text)
    assert shown.isprintable()
    assert terminal(shown) == shown
    if text.isprintable():
        assert shown is text  # the usual name is not copied


@given(HOSTILE)
@example("## All gradients healthy\n<img src=x onerror=alert(1)>")
@example("[a](https://evil.example) **b** _c_ ~~d~~ $e$ \\`f` &lt;")
def test_markdown_text_renders_as_the_text_itself(text: str) -> None:
    inner = _paragraph(RENDERER.render(f"x {markdown_text(text)} y"))
    assert "<" not in inner and html.unescape(inner) == terminal(text)


@given(HOSTILE.filter(lambda text: terminal(text).strip(" ")))
@example("tick`code``span")
@example("`")
@example(" padded ")
def test_a_markdown_code_span_shows_the_text_exactly(text: str) -> None:
    inner = _paragraph(RENDERER.render(f"x {markdown_code(text)} y"))
    assert inner.startswith("<code>") and inner.endswith("</code>")
    code = inner.removeprefix("<code>").removesuffix("</code>")
    assert "<" not in code and html.unescape(code) == terminal(text)


def _paragraph(rendered: str) -> str:
    """What renders between ``x `` and `` y`` in the one paragraph ``rendered`` must be."""
    assert rendered.startswith("<p>x ") and rendered.endswith(" y</p>\n"), rendered
    return rendered.removeprefix("<p>x ").removesuffix(" y</p>\n")


def test_a_code_span_in_a_table_cell_escapes_its_pipes() -> None:
    assert markdown_code("a|b", in_table=True) == "`a\\|b`"
    rendered = RENDERER.render(f"| h |\n| --- |\n| {markdown_code('a|b', in_table=True)} |\n")
    assert "<td><code>a|b</code></td>" in rendered


@given(HOSTILE)
def test_csv_text_never_starts_like_a_formula(text: str) -> None:
    cell = csv_text(text)
    assert not cell.startswith(FORMULA_STARTS)
    assert cell in (text, "'" + text)


def test_each_string_reaches_every_field_and_copies_nothing_unchanged() -> None:
    report = sample_report()
    assert each_string(report, terminal) is report  # printable names: the very same report
    marked = each_string(report, lambda text: f"<{text}>")
    layer = marked.runs[0].layers[0]
    original = report.runs[0].layers[0]
    assert layer.name == f"<{original.name}>" and layer.evidence == f"<{original.evidence}>"
    assert marked.runs[0].run == f"<{report.runs[0].run}>"
    assert marked.runs[0].warnings == tuple(f"<{w}>" for w in report.runs[0].warnings)
    assert layer.trend == original.trend and layer.severity == original.severity
