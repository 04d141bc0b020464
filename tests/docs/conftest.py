"""The docs test: every command block of README.md and docs/ runs as written.

    SEXTANT_BIN=/path/to/sextant python -m pytest tests/docs -q

Run it in the ML environment (scripts/test.sh's ml_venv, which has what the
blocks use: mlflow, torch); `./scripts/test.sh docs` does. Without
SEXTANT_BIN the binary is built once with `go build ./cmd/sextant`. How
blocks run and how to mark them: tests/docs/README.md.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import docblocks

REPO = Path(__file__).resolve().parents[2]

# Filled by the tests, printed at the end: what ran, what was not run and why.
RESULTS: list[docblocks.Result] = []

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DO_NOT_TRACK", "true")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="session")
def tools(tmp_path_factory) -> docblocks.Tools:
    missing = [m for m in ("mlflow", "torch") if subprocess.run([sys.executable, "-c", f"import {m}"],
                                                                 capture_output=True).returncode]
    if missing:
        pytest.fail(f"the docs' blocks need {', '.join(missing)}: run the docs test in the ML environment "
                    "(./scripts/test.sh docs)")
    work = tmp_path_factory.mktemp("docs-tools")
    binary = os.environ.get("SEXTANT_BIN")
    if not binary:
        binary = str(work / "sextant-built")
        subprocess.run(["go", "build", "-o", binary, "./cmd/sextant"], cwd=REPO, check=True)
    return docblocks.make_tools(Path(binary).resolve(), REPO, work, Path(sys.prefix))


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    tr = terminalreporter
    counts: dict[str, int] = {}
    for r in RESULTS:
        counts[r.status] = counts.get(r.status, 0) + 1
    tr.section("docs blocks")
    verbose = tr.config.getoption("verbose") > 0
    for r in RESULTS:
        if r.status in ("not run", "failed"):
            tr.write_line(f"{r.status}: {r.block.where}: {r.detail}")
        elif verbose:
            extra = f" ({r.detail})" if r.detail else ""
            tr.write_line(f"{r.status}: {r.block.where} {r.block.lang}{extra} {r.seconds:.1f}s")
    tr.write_line(", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
