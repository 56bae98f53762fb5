"""MkDocs hooks: the reference tables that come from the code, so that they cannot drift.

A page asks for a generated part with a marker line ``<!-- generated: NAME -->``:

- ``config-table``: every setting of ``gradcheck.verdicts.config.Config``, its default and its
  allowed values (``RANGES``), with the first sentence of its docstring;
- ``thresholds``: every threshold with its whole docstring (where its value comes from),
  grouped by the source's ``# --- section ---`` comments;
- ``exit-status``: each command's exit-status table, as its ``--help`` prints it;
- ``verdict-registry``: each verdict's entry in ``gradcheck/verdicts/registry.py``: its rank,
  base severity, rule, what the rule judges, and whether the default ``--fail-on`` has it.

Docstrings of dataclass fields are not kept at run time, so the fields are read from
``config.py``'s source with :mod:`ast`. ``tests/project/test_docs.py`` builds these parts too.
"""

from __future__ import annotations

import ast
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONFIG_SOURCE = ROOT / "gradcheck" / "verdicts" / "config.py"
MARKER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.M)


@dataclass(frozen=True)
class Setting:
    """One field of ``Config`` as its source writes it."""

    name: str
    default: str  # the source's expression (``1e-3``, ``None``)
    doc: str  # its docstring, dedented
    section: str  # the ``# --- name ---`` comment above it


def settings() -> list[Setting]:
    """The fields of ``Config`` in source order, with their docstrings and sections."""
    source = CONFIG_SOURCE.read_text(encoding="utf-8")
    tree = ast.parse(source)
    (config,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Config"]
    lines = source.splitlines()
    found: list[Setting] = []
    body = config.body
    for index, node in enumerate(body):
        if not (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        doc = ""
        if isinstance(following, ast.Expr) and isinstance(following.value, ast.Constant):
            doc = textwrap.dedent(str(following.value.value)).strip()
        found.append(
            Setting(
                name=node.target.id,
                default=ast.get_source_segment(source, node.value) if node.value else "",
                doc=" ".join(doc.split()).replace("``", "`"),  # reST literals as Markdown
                section=_section_above(lines, node.lineno),
            )
        )
    return found


def _section_above(lines: list[str], lineno: int) -> str:
    for line in reversed(lines[: lineno - 1]):
        match = re.match(r"\s*# --- (.+?) -+$", line)
        if match:
            return match.group(1)
    return ""


def config_table() -> str:
    """The settings as a Markdown table: key, default, allowed values, meaning."""
    from gradcheck.verdicts.config import DEFAULT_CONFIG, RANGES

    rows = ["| setting | default | allowed | meaning |", "| --- | --- | --- | --- |"]
    for setting in settings():
        default = getattr(DEFAULT_CONFIG, setting.name)
        shown = "none" if default is None else f"`{default:g}`" if _number(default) else default
        allowed = str(RANGES[setting.name]) if setting.name in RANGES else "text"
        rows.append(
            f"| `{setting.name}` | {shown} | {allowed} | {_cell(_first_sentence(setting.doc))} |"
        )
    return "\n".join(rows)


def thresholds() -> str:
    """Every setting's whole docstring, by section: where each value comes from."""
    parts: list[str] = []
    section = None
    for setting in settings():
        if setting.section != section:
            section = setting.section
            parts.append(f"## {section[:1].upper()}{section[1:]}\n")
        parts.append(f"`{setting.name}` = `{setting.default}`\n: {setting.doc}\n")
    return "\n".join(parts)


def exit_status() -> str:
    """Each command's exit-status table as ``--help`` shows it (its epilog)."""
    from gradcheck import cli

    parts = []
    for name, command in sorted(cli.cli.commands.items()):
        epilog = (command.epilog or "").replace("\b\n", "").strip()
        parts.append(f"### gradcheck {name}\n\n```text\n{epilog}\n```\n")
    return "\n".join(parts)


PHASES = {
    "blow_up": "each parameter, every step",
    "quiet": "each parameter, the steps before the run's blow-up",
    "loss": "the run's training loss",
    "activation": "each layer's outputs (activation histograms)",
}


def verdict_registry() -> str:
    """The verdicts as the registry declares them, most severe first."""
    from gradcheck.verdicts.registry import ENTRIES

    rows = [
        "| rank | verdict | base severity | rule | judges | default `--fail-on` |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for rank, entry in enumerate(ENTRIES, 1):
        module, _, function = entry.rule.rpartition(".")
        rule = f"`rules/{module}.py` `{function}`" if entry.rule else "none (no finding)"
        phase = next((e.phase for e in ENTRIES if e.rule == entry.rule and e.phase), "")
        judges = PHASES.get(phase, "")
        fails = "yes" if entry.fail_on else "no"
        rows.append(f"| {rank} | {entry.name} | {entry.severity:g} | {rule} | {judges} | {fails} |")
    return "\n".join(rows)


GENERATORS = {
    "config-table": config_table,
    "thresholds": thresholds,
    "exit-status": exit_status,
    "verdict-registry": verdict_registry,
}


def expand(markdown: str) -> str:
    """``markdown`` with every ``<!-- generated: NAME -->`` line replaced by its part."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            raise ValueError(f"unknown generated part {name!r} (known: {', '.join(GENERATORS)})")
        return GENERATORS[name]()

    return MARKER.sub(replace, markdown)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs: expand the generated parts of every page."""
    return expand(markdown)


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _first_sentence(text: str) -> str:
    """Up to the first full stop outside parentheses, 20 characters in at least (a docstring
    that continues the one before starts with "...")."""
    depth = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        at_end = index + 1 == len(text) or text[index + 1].isspace()
        if char == "." and depth == 0 and index >= 20 and at_end:
            return text[: index + 1]
    return text


def _cell(text: str) -> str:
    return text.replace("|", "\\|")
