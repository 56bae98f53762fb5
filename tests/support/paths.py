"""Where the tests find the repository, their committed data and the shared corpus."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
TEST_DATA = TESTS / "data"
"""Committed logs: real writers' files (``writers``), the issue-15 runs, the sweep."""
GOLDEN = TESTS / "golden"
SAMPLE_RUNS = REPO / "sample_runs"
CORPUS = REPO.parent / "shared" / "corpus"
"""Real event files from other people's projects (``../shared/corpus``), when present."""
CORPUS_RUNS = CORPUS / "runs"
