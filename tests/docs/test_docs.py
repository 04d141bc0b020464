"""Every page of the user docs runs as written (see conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import docblocks
from conftest import REPO, RESULTS

# The pages: README.md and everything under docs/ (SEXTANT_DOCS_ROOT names
# another tree, for the runner's own test).
ROOT = Path(os.environ.get("SEXTANT_DOCS_ROOT") or REPO)
PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


@pytest.mark.parametrize("doc", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_page_runs_as_written(doc: Path, tools, tmp_path):
    rel = str(doc.relative_to(ROOT))
    failure = None
    try:
        page = docblocks.Page(docblocks.extract(rel, doc.read_text()), tools, tmp_path)
        try:
            page.run()
        finally:
            RESULTS.extend(page.results)
    except (docblocks.DocError, docblocks.BlockFailed) as e:
        failure = str(e)
    if failure:
        pytest.fail(failure, pytrace=False)
