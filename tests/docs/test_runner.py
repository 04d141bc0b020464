"""The docs test's own runner: what it reads from a page, that a failing or
mismatching block fails the page naming its line and showing its output,
and that a whole pytest run over failing docs fails."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import docblocks
from conftest import REPO


def page(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


# ------------------------------------------------------------------ reading


def test_extract_kinds_lines_and_markers():
    blocks = docblocks.extract("p.md", page("""
        # Title

        ```sh
        echo one   #=> one
        ```

        ```json
        {"a": 1}
        ```

        1. In a list:

           ```python
           print("two")
           ```

        <!-- e2e: another tool's comment -->
        <!-- docs-test: server -->
        <!-- docs-test: timeout 30 -->
        ```bash
        sextant server --data-dir d
        ```

        <!-- docs-test: replace <printed> "$(cat pw)" -->
        ```sh
        export P='<printed>'
        ```

        <!-- docs-test: file job.py -->
        ```python
        print("saved")
        ```

        ```sh
        # not run by the docs test: it needs a Kubernetes cluster
        kubectl apply -f sextant.yaml
        ```

        ```
        plain text
        ```
        """))
    got = [(b.line, b.kind) for b in blocks]
    assert got == [(3, "shell"), (7, None), (13, "python"), (20, "shell"), (25, "shell"), (30, "python"),
                   (34, "shell"), (39, None)]
    assert blocks[2].text == 'print("two")\n'  # the list's indentation is not part of the block
    assert blocks[3].server and blocks[3].timeout_s == 30
    assert blocks[4].replace == [("<printed>", "$(cat pw)")]
    assert blocks[5].save_as == "job.py"
    assert blocks[6].not_run == "it needs a Kubernetes cluster"
    assert not any(b.not_run for b in blocks[:6])
    assert docblocks.script_and_expected(blocks[0], blocks[0].text)[1] == ["one"]


@pytest.mark.parametrize("text, error", [
    ("<!-- docs-test: sever -->\n```sh\ntrue\n```\n", "p.md:1: unknown docs-test comment"),
    ("<!-- docs-test: server -->\n\nSome text.\n\n```sh\ntrue\n```\n", "p.md:1: a docs-test comment must be"),
    ("<!-- docs-test: server -->\n```yaml\na: 1\n```\n", "p.md:1: docs-test comment above a yaml block"),
    ("```sh\ntrue\n# not run by the docs test: late\n```\n", "p.md:1: '# not run by the docs test: <why>' must be the block's first line"),
    ("```sh\n# not run by the docs test:\ntrue\n```\n", "p.md:1: 'not run by the docs test:' must say why"),
    ("```console\nls\n```\n", "p.md:1: a console block needs its commands after '$ ' prompts"),
    ("```sh\n$ ls\n```\n", "p.md:1: '$ ' prompts in a sh block: tag it console"),
    ("text\n```sh\ntrue\n", "p.md:2: the block opened here is never closed"),
])
def test_extract_refuses_what_would_skip_silently(text, error):
    with pytest.raises(docblocks.DocError) as e:
        docblocks.extract("p.md", text)
    assert str(e.value).startswith(error), e.value


def test_console_blocks_split_commands_from_output():
    [b] = docblocks.extract("p.md", page("""
        ```console
        $ echo a \\
            b
        a b
        $ echo c

        c
        ```
        """))
    script, want = docblocks.script_and_expected(b, b.text)
    assert script == "echo a \\\n    b\necho c\n"
    assert want == ["a b", "c"]


@pytest.mark.parametrize("want, missing", [
    (["first", "third"], None),
    (["NAME ID STATUS", "run-1 ... FINISHED"], None),  # runs of spaces count as one; ... is anything
    (["third", "first"], (1, "first")),  # in order
    (["first", "fourth"], (1, "fourth")),
    (["first line"], (0, "first line")),  # whole lines
])
def test_expected_lines_are_matched_in_order(want, missing):
    output = "first\nNAME    ID     STATUS\nrun-1   3f9a   FINISHED\nsecond\nthird\n"
    assert docblocks.missing_expected(output, want) == missing


# ------------------------------------------------------------------ running


def run_page(tools, tmp_path: Path, text: str) -> list[docblocks.Result]:
    return docblocks.Page(docblocks.extract("page.md", page(text)), tools, tmp_path).run()


def test_a_page_runs_as_one_reader_at_one_terminal(tools, tmp_path):
    results = run_page(tools, tmp_path, """
        ```sh
        export GREETING=hello
        LOCAL=kept
        mkdir -p sub && cd sub
        sleep 1000 &
        echo $! > "$HOME/leftover.pid"
        ```

        ```sh
        # not run by the docs test: it needs a Kubernetes cluster
        kubectl apply -f x.yaml
        ```

        ```sh
        test "$GREETING $LOCAL" = "hello kept" && test "$(basename "$PWD")" = sub
        curl -sS http://127.0.0.1:5000/health; echo   #=> OK
        ```

        ```console
        $ echo "$GREETING, reader"
        hello, reader
        ```

        <!-- docs-test: file job.py -->
        ```python
        import os
        print(os.environ["GREETING"], os.getcwd().endswith("/sub"))
        ```

        ```python
        import runpy
        runpy.run_path("job.py")   #=> hello True
        ```

        <!-- docs-test: server -->
        ```sh
        sextant server --data-dir other-data
        ```

        ```sh
        ls -d other-data && curl -sS http://127.0.0.1:5000/health; echo   #=> OK
        ```
        """)
    assert [(r.block.line, r.status) for r in results] == [
        (1, "ran"), (9, "not run"), (14, "ran"), (19, "ran"), (25, "saved"), (30, "ran"), (36, "server"), (40, "ran")]
    assert results[1].detail == "it needs a Kubernetes cluster"
    pid = int((tmp_path / "home" / "leftover.pid").read_text())
    deadline = time.monotonic() + 30
    while Path(f"/proc/{pid}").exists() and "zombie" not in Path(f"/proc/{pid}/status").read_text().lower():
        assert time.monotonic() < deadline, "a process a block left running outlived its page"
        time.sleep(0.1)


@pytest.mark.parametrize("blocks, message", [
    ('```sh\necho before\nfalse\necho after\n```\n',
     ["page.md:1: shell block failed: exit status 1", "    3 | false", "output:", "  before"]),
    ('Text.\n\n```sh\necho "loss=0.5"   #=> loss=0.1\n```\n',
     ["page.md:3: shell block failed: the output does not show 'loss=0.1'", "  loss=0.5"]),
    ('```python\nimport json\njson.loads("{")\n```\n',
     ["page.md:1: python block failed: exit status 1", "json.decoder.JSONDecodeError"]),
    ('<!-- docs-test: timeout 2 -->\n```sh\necho started\nsleep 600\n```\n',
     ["page.md:2: shell block failed: still running after 2s", "  started"]),
    ('```sh\ntrue\n```\n\n<!-- docs-test: server -->\n```sh\nsextant server --no-such-flag\n```\n',
     ["page.md:6: shell block failed: the server exited with status"]),
])
def test_a_failing_block_fails_its_page_and_says_where_and_why(tools, tmp_path, blocks, message):
    with pytest.raises(docblocks.BlockFailed) as e:
        run_page(tools, tmp_path, blocks)
    for m in message:
        assert m in str(e.value), str(e.value)


def test_pytest_fails_on_docs_with_a_failing_block(tmp_path):
    """The docs test itself, over a tree whose README has a failing block:
    pytest exits non-zero, and its report names the file and line."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text("# Doc\n\n```sh\necho fine\n```\n\n```sh\nexit 3\n```\n")
    (tmp_path / "docs" / "ok.md").write_text("No blocks here.\n")
    env = dict(os.environ, SEXTANT_DOCS_ROOT=str(tmp_path))
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(Path(__file__).with_name("test_docs.py"))],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "README.md:7: shell block failed: exit status 3" in r.stdout, r.stdout
    assert "1 failed, 1 passed" in r.stdout, r.stdout
