"""Extracts the command blocks of the user docs and runs them as a reader would.

A page's command blocks are its fenced blocks tagged sh, bash, shell, console
or python (tests/docs/README.md says how to write them). They
run top to bottom in one working directory, against the page's own server,
as one reader at one terminal would run them:

- sh/bash/shell blocks run in bash with `set -e -o pipefail`; the variables a
  block sets and the directory it ends in carry over to the next block, as in
  one terminal (bash runs with `set -a`, so they are exported);
- console blocks: lines starting with `$ ` are commands (a trailing `\\`
  continues one onto the next line), the lines after them are the output the
  reader should see;
- python blocks run as a script with the page's `python`;
- a `#=> text` comment at the end of a line says the output shows the line
  `text`. Expected lines (these and a console block's output) must appear in
  the block's output (stdout and stderr, as a terminal shows them) in that
  order; other lines may come between; `...` in an expected line matches
  anything (ids, times); runs of spaces count as one (table columns).

How a block runs is said next to it:

- `# not run by the docs test: <why>` as the block's first line: it is not
  run, and the report says "not run: <why>". For what needs something this
  machine lacks (Kubernetes, systemd, a real GPU, a cloud bucket).
- HTML comments on the lines just above the fence, which readers do not
  see: `<!-- docs-test: server -->` (the block starts a server that keeps
  running: it runs in the background and the next blocks use it),
  `<!-- docs-test: file NAME -->` (the text tells the reader to save the
  block as NAME: it is saved, not run), `<!-- docs-test: replace OLD NEW -->`
  (OLD in the block is replaced by NEW, which is shell text: for a value
  the reader copies from a previous output), `<!-- docs-test: timeout S -->`.

Anything else in a docs-test comment is an error, so a typo never skips a
block silently.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

SHELL_LANGS = {"sh", "bash", "shell"}
CONSOLE_LANGS = {"console", "shell-session"}
PYTHON_LANGS = {"python", "py", "python3"}

# The address the docs use for the server; each page's blocks get their own
# server's instead.
DOC_ADDRESSES = ("127.0.0.1:5000", "localhost:5000", "--port 5000")

DEFAULT_TIMEOUT_S = 180
SERVER_START_TIMEOUT_S = 120

_FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^`\s]*)[^`]*$")
_DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(?P<body>.*?)\s*-->\s*$")
_HTML_COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
_NOT_RUN = re.compile(r"^\s*#\s*not run by the docs test:\s*(?P<why>.*?)\s*$", re.I)
_NOT_RUN_ANYWHERE = re.compile(r"not run by the docs test", re.I)
_EXPECT = re.compile(r"(?:^|\s)#=>[ \t]?(?P<want>.*)$")


class DocError(Exception):
    """A page that cannot be run as written: a malformed block or marker."""


@dataclass
class Block:
    """One fenced block of a page."""

    path: str  # the page, relative to the repository
    line: int  # the line of its opening fence, from 1
    lang: str  # the info string's first word, lower case
    text: str  # its content, without the fence's indentation
    not_run: str | None = None
    server: bool = False
    save_as: str | None = None
    replace: list[tuple[str, str]] = field(default_factory=list)
    timeout_s: float = DEFAULT_TIMEOUT_S

    @property
    def kind(self) -> str | None:
        """shell, console, python, or None for a block that is not commands."""
        if self.lang in SHELL_LANGS:
            return "shell"
        if self.lang in CONSOLE_LANGS:
            return "console"
        if self.lang in PYTHON_LANGS:
            return "python"
        return None

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    def listing(self) -> str:
        """The block with the page's line numbers, for failure messages."""
        return "\n".join(f"{self.line + 1 + i:5} | {s}" for i, s in enumerate(self.text.splitlines()))


def extract(path: str, text: str) -> list[Block]:
    """Returns the fenced blocks of a page, with their markers parsed.

    Only blocks whose kind is not None are commands; the others are returned
    too so that a marker on one of them is an error."""
    lines = text.splitlines()
    blocks: list[Block] = []
    used: set[int] = set()  # lines of docs-test comments attached to a block
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, indent, fence = i, m["indent"], m["fence"]
        close = re.compile(r"^[ \t]*" + re.escape(fence[0]) + "{" + str(len(fence)) + r",}[ \t]*$")
        body: list[str] = []
        i += 1
        while i < len(lines) and not close.match(lines[i]):
            s = lines[i]
            body.append(s[len(indent):] if s.startswith(indent) else s.lstrip())
            i += 1
        if i == len(lines):
            raise DocError(f"{path}:{start + 1}: the block opened here is never closed")
        i += 1
        b = Block(path=path, line=start + 1, lang=m["info"].lower(), text="\n".join(body) + "\n")
        _attach_directives(b, lines, start, used)
        _parse_not_run(b)
        blocks.append(b)
    for n, s in enumerate(lines):
        if _DIRECTIVE.match(s) and n not in used:
            raise DocError(f"{path}:{n + 1}: a docs-test comment must be on the lines just above a block's fence")
    return blocks


def _attach_directives(b: Block, lines: list[str], fence: int, used: set[int]) -> None:
    n = fence - 1
    found: list[tuple[int, str]] = []
    while n >= 0 and (not lines[n].strip() or _HTML_COMMENT.match(lines[n])):
        m = _DIRECTIVE.match(lines[n])
        if m:
            found.append((n, m["body"]))
        n -= 1
    for n, body in reversed(found):
        used.add(n)
        where = f"{b.path}:{n + 1}"
        if b.kind is None:
            raise DocError(f"{where}: docs-test comment above a {b.lang or 'plain'} block, which is not run")
        try:
            words = shlex.split(body)
        except ValueError as e:
            raise DocError(f"{where}: docs-test comment: {e}") from None
        key, args = (words[0], words[1:]) if words else ("", [])
        if key == "server" and not args:
            b.server = True
        elif key == "file" and len(args) == 1:
            b.save_as = args[0]
        elif key == "replace" and len(args) == 2:
            b.replace.append((args[0], args[1]))
        elif key == "timeout" and len(args) == 1 and args[0].isdigit():
            b.timeout_s = float(args[0])
        else:
            raise DocError(f"{where}: unknown docs-test comment {body!r}: use server, file NAME, "
                           "replace OLD NEW or timeout SECONDS (tests/docs/README.md)")


def _parse_not_run(b: Block) -> None:
    if b.kind is None:
        return
    content = [s for s in b.text.splitlines() if s.strip()]
    if content:
        m = _NOT_RUN.match(content[0])
        if m:
            if not m["why"]:
                raise DocError(f"{b.where}: 'not run by the docs test:' must say why")
            b.not_run = m["why"]
    rest = content[1:] if b.not_run else content
    if any(_NOT_RUN_ANYWHERE.search(s) for s in rest):
        raise DocError(f"{b.where}: '# not run by the docs test: <why>' must be the block's first line")
    if b.not_run and (b.server or b.save_as):
        raise DocError(f"{b.where}: a block that is not run cannot also be a server or a file")
    if b.kind == "console" and not b.not_run and not any(s.startswith("$ ") for s in content):
        raise DocError(f"{b.where}: a console block needs its commands after '$ ' prompts")
    if b.kind == "shell" and any(s.startswith("$ ") for s in content):
        raise DocError(f"{b.where}: '$ ' prompts in a {b.lang} block: tag it console, whose output lines are checked")


def script_and_expected(b: Block, text: str) -> tuple[str, list[str]]:
    """Splits a block (after substitutions) into what runs and the output
    lines it must show."""
    if b.kind == "console":
        cmds: list[str] = []
        want: list[str] = []
        cont = False
        for s in text.splitlines():
            if cont:
                cmds.append(s)
                cont = s.endswith("\\")
            elif s.startswith("$ "):
                cmds.append(s[2:])
                cont = s.endswith("\\")
            elif s.strip():
                want.append(s.strip())
        return "\n".join(cmds) + "\n", want
    want = [m["want"].strip() for s in text.splitlines() if (m := _EXPECT.search(s))]
    return text, want


def _squeeze(s: str) -> str:
    return " ".join(s.split())


def _line_pattern(want: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(_squeeze(p)) for p in want.split("...")))


def missing_expected(output: str, want: list[str]) -> tuple[int, str] | None:
    """Returns (index, line) of the first expected line that the output does
    not show in order, or None when it shows them all."""
    got = [_squeeze(s) for s in output.replace("\r", "\n").splitlines()]
    k = 0
    for i, w in enumerate(want):
        p = _line_pattern(w)
        while k < len(got) and not p.fullmatch(got[k]):
            k += 1
        if k == len(got):
            return i, w
        k += 1
    return None


@dataclass
class Result:
    block: Block
    status: str  # "ran", "saved", "server", "not run", "failed"
    detail: str = ""
    seconds: float = 0.0


class BlockFailed(AssertionError):
    """A block failed: the message names the page, the line and the output."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def tail(path: Path, n: int) -> str:
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return ""
    cut = f"  [... {len(lines) - n} lines before]\n" if len(lines) > n else ""
    return cut + "\n".join("  " + s for s in lines[-n:])


@dataclass
class Tools:
    """What every page's environment is made from, prepared once."""

    sextant: Path  # the binary, built once from the repository
    bin_dir: Path  # sextant, and the go stand-in (see make_tools)
    base_prefix: Path  # the Python environment the runner runs in
    go_env: dict[str, str]
    repo: Path
    stand_ins: Path  # files every page's directory starts with


GO_STAND_IN = """#!/usr/bin/env bash
# The docs test's `go`: `go run ./cmd/sextant ARGS` and
# `go build [-o OUT] ./cmd/sextant` use the binary the runner built once
# with `go build ./cmd/sextant` in the repository (a page's directory is not
# a clone, and building there would compile everything again); anything
# else goes to Go itself.
sextant=@SEXTANT@
if [ "$1" = run ] && [ "$2" = ./cmd/sextant ]; then
	shift 2
	exec "$sextant" "$@"
fi
if [ "$1" = build ] && [ "${@: -1}" = ./cmd/sextant ]; then
	out=sextant
	while [ $# -gt 1 ]; do
		if [ "$1" = -o ]; then out=$2; shift; fi
		shift
	done
	[ -d "$out" ] && out=$out/sextant
	exec cp -f "$sextant" "$out"
fi
exec @GO@ "$@"
"""


def make_tools(sextant: Path, repo: Path, work: Path, base_prefix: Path) -> Tools:
    bin_dir = work / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "sextant").symlink_to(sextant)
    go = subprocess.run(["bash", "-c", "command -v go"], capture_output=True, text=True).stdout.strip() or "false"
    stand_in = bin_dir / "go"
    stand_in.write_text(GO_STAND_IN.replace("@SEXTANT@", shlex.quote(str(sextant))).replace("@GO@", shlex.quote(go)))
    stand_in.chmod(0o755)
    go_env: dict[str, str] = {}
    if go != "false":
        out = subprocess.run([go, "env", "-json", "GOCACHE", "GOMODCACHE", "GOPATH"], capture_output=True, text=True)
        if out.returncode == 0:
            go_env = json.loads(out.stdout)
    return Tools(sextant=sextant, bin_dir=bin_dir, base_prefix=base_prefix, go_env=go_env, repo=repo,
                 stand_ins=Path(__file__).parent / "workdir")


def make_venv(base_prefix: Path, venv: Path) -> None:
    """A fresh virtual environment over the runner's own (a .pth names its
    site-packages), standing for the one the docs tell the reader to make:
    `pip install` in it installs into it, finds what the runner's
    environment has, and never downloads (PIP_NO_INDEX); the runner's
    environment is never changed."""
    subprocess.run([str(base_prefix / "bin" / "python"), "-m", "venv", "--without-pip", str(venv)], check=True)
    code = "import sysconfig, sys; p = sysconfig.get_paths(); print(p['purelib']); print(p['platlib'])"
    paths = subprocess.run([str(base_prefix / "bin" / "python"), "-c", code], capture_output=True, text=True,
                           check=True).stdout.split()
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "_docs_test_base.pth").write_text("\n".join(dict.fromkeys(paths)) + "\n")
    # The base environment's commands (pip, mlflow, torchrun, ...), run by
    # this environment's python.
    shebang = f"#!{base_prefix}/bin/python"
    for f in sorted((base_prefix / "bin").iterdir()):
        if f.name.startswith(("python", "activate", "Activate")) or not f.is_file():
            continue
        try:
            text = f.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        first, _, rest = text.partition("\n")
        if first.startswith(shebang):
            dst = venv / "bin" / f.name
            dst.write_text(re.sub(r"^#!\S+", f"#!{venv}/bin/python", first) + "\n" + rest)
            dst.chmod(0o755)


class Page:
    """Runs one page's blocks top to bottom in a directory of its own,
    against a server of its own on a free port."""

    def __init__(self, blocks: list[Block], tools: Tools, root: Path):
        self.blocks = blocks
        self.tools = tools
        self.root = root
        self.cwd = root / "work"  # the reader's directory
        self.scratch = root / "runner"  # the runner's files
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server: subprocess.Popen | None = None
        self.server_log: Path | None = None
        self.server_what = ""
        self.results: list[Result] = []
        self.env: dict[str, str] = {}

    # ------------------------------------------------------------------ setup

    def _setup(self) -> None:
        self.cwd.mkdir(parents=True)
        self.scratch.mkdir(parents=True)
        home = self.root / "home"
        home.mkdir()
        # The reader's own files (train.py, ...), and ./python as in the
        # clone (a copy: `pip install ./python` builds in place).
        if self.tools.stand_ins.is_dir():
            shutil.copytree(self.tools.stand_ins, self.cwd, dirs_exist_ok=True)
        shutil.copytree(self.tools.repo / "python", self.cwd / "python",
                        ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
        venv = self.root / "venv"
        make_venv(self.tools.base_prefix, venv)
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("MLFLOW_TRACKING", "MLFLOW_EXPERIMENT", "MLFLOW_RUN", "SEXTANT_", "PIP_",
                                    "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "DOCS_"))}
        env.update(self.tools.go_env)
        env.update({
            "HOME": str(home),
            "PATH": f"{self.tools.bin_dir}:{venv / 'bin'}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "VIRTUAL_ENV": str(venv),
            # The server the docs' default address stands for: every client
            # command and the mlflow client find the page's server, and
            # `sextant server` without --port listens on it.
            "MLFLOW_TRACKING_URI": self.url,
            "SEXTANT_PORT": str(self.port),
            # Marks the page's processes: what its blocks leave running is
            # stopped when the page ends (_kill_leftovers).
            "DOCS_TEST_PAGE": str(self.root),
            # pip installs from what the environment has; it never downloads.
            "PIP_NO_INDEX": "1",
            "PIP_NO_BUILD_ISOLATION": "0",
            "PIP_DISABLE_PIP_VERSION_CHECK": "1",
            "PIP_NO_WARN_SCRIPT_LOCATION": "0",
        })
        self.env = env

    def _substitute(self, b: Block) -> str:
        text = b.text
        for a in DOC_ADDRESSES:
            text = text.replace(a, a.replace("5000", str(self.port)).replace("localhost", "127.0.0.1"))
        for old, new in b.replace:
            if old not in text:
                raise BlockFailed(f"{b.where}: docs-test replace: {old!r} is not in the block")
            text = text.replace(old, self._shell_value(b, new))
        return text

    def _shell_value(self, b: Block, expr: str) -> str:
        r = subprocess.run(["bash", "-c", f"printf %s {expr}"], cwd=self.cwd, env=self.env,
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0 or not r.stdout:
            raise BlockFailed(f"{b.where}: docs-test replace: {expr} gave nothing (exit {r.returncode})\n{r.stderr}")
        return r.stdout

    # ---------------------------------------------------------------- servers

    def _start_server(self, b: Block | None, script: str) -> None:
        self._stop_server()
        n = b.line if b else 0
        self.server_log = self.scratch / f"server-{n}.log"
        self.env["DOCS_SERVER_LOG"] = str(self.server_log)
        self.server_what = f"started by {b.where}" if b else "started by the runner: `sextant server`, before the page's first block"
        path = self.scratch / f"server-{n}.sh"
        path.write_text(script)
        with open(self.server_log, "wb") as log:
            self.server = subprocess.Popen(["bash", "-e", str(path)], cwd=self.cwd, env=self.env, stdout=log,
                                           stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                           start_new_session=True)
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while True:
            if self.server.poll() is not None:
                self._fail(b, f"the server exited with status {self.server.returncode} before it answered", self.server_log)
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=5) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.monotonic() > deadline:
                self._fail(b, f"the server did not answer {self.url}/health in {SERVER_START_TIMEOUT_S}s", self.server_log)
            time.sleep(0.2)

    def _stop_server(self, check: bool = True) -> None:
        """Stops the page's server with SIGTERM, as a reader's Ctrl-C would,
        and waits until every process of it is gone (the next server takes
        the same port). With check, a server that had died or does not stop
        fails the page."""
        p, self.server = self.server, None
        if p is None:
            return
        died = p.poll()
        _signal_group(p.pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        # Reaped as it goes: a zombie leader would keep the group alive.
        while (p.poll() is None or _group_alive(p.pid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        stuck = _group_alive(p.pid)
        if stuck:
            _signal_group(p.pid, signal.SIGKILL)
        p.wait()
        if not check:
            return
        what = f"{self.blocks[0].path}: the page's server ({self.server_what})"
        if died is not None:
            raise BlockFailed(f"{what} had exited with status {died}:\n{tail(self.server_log, 40)}")
        if stuck:
            raise BlockFailed(f"{what} did not stop within 60 s of SIGTERM:\n{tail(self.server_log, 40)}")

    # ----------------------------------------------------------------- blocks

    def _fail(self, b: Block | None, why: str, output: Path | None) -> None:
        where = b.where if b else self.blocks[0].path
        if b:
            self.results.append(Result(b, "failed", why.splitlines()[0]))
        msg = [f"{where}: {b.kind + ' block' if b else 'page'} failed: {why}"]
        if b:
            msg += ["", b.listing()]
        if output and output.exists():
            msg += ["", "output:", tail(output, 80)]
        if self.server_log and output != self.server_log:
            msg += ["", f"the page's server ({self.server_what}; {self.url}), last lines:", tail(self.server_log, 12)]
        raise BlockFailed("\n".join(msg))

    def _run_block(self, b: Block) -> None:
        text = self._substitute(b)
        script, want = script_and_expected(b, text)
        out = self.scratch / f"block-{b.line}.out"
        state = self.scratch / f"block-{b.line}.env"
        if b.kind == "python":
            path = self.scratch / f"block-{b.line}.py"
            path.write_text(script)
            argv = ["python", str(path)]
        else:
            path = self.scratch / f"block-{b.line}.sh"
            # What the reader's terminal keeps between blocks: variables
            # (exported, so that they can be read back) and the directory.
            path.write_text(f"set -a -e -o pipefail\n{script}\n{{ pwd; env -0; }} > {shlex.quote(str(state))}\n")
            argv = ["bash", str(path)]
        t = time.monotonic()
        with open(out, "wb") as f:
            p = subprocess.Popen(argv, cwd=self.cwd, env=self.env, stdout=f, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, start_new_session=True)
        try:
            rc = p.wait(b.timeout_s)
        except subprocess.TimeoutExpired:
            _signal_group(p.pid, signal.SIGKILL)
            p.wait()
            self._fail(b, f"still running after {b.timeout_s:.0f}s (if it starts a server, put "
                          "<!-- docs-test: server --> above it; if it is slow, <!-- docs-test: timeout S -->)", out)
        secs = time.monotonic() - t
        if rc != 0:
            self._fail(b, f"exit status {rc}", out)
        if want:
            miss = missing_expected(out.read_text(errors="replace"), want)
            if miss:
                i, w = miss
                shown = "\n".join(f"  {'  ' if j < i else '>>'} {s}" for j, s in enumerate(want))
                self._fail(b, f"the output does not show {w!r} (expected line {i + 1} of {len(want)}, "
                              f"in this order):\n{shown}", out)
        if b.kind != "python" and state.exists():
            cwd, _, env = state.read_bytes().partition(b"\n")
            self.cwd = Path(cwd.decode())
            self.env = dict(kv.split("=", 1) for kv in env.decode(errors="replace").split("\0") if "=" in kv)
            for k in ("_", "SHLVL", "PWD", "OLDPWD"):
                self.env.pop(k, None)
        self.results.append(Result(b, "ran", f"{len(want)} expected lines" if want else "", secs))

    def run(self) -> list[Result]:
        """Runs every block; raises BlockFailed at the first that fails (the
        ones after it would run on its missing results)."""
        commands = [b for b in self.blocks if b.kind]
        runnable = [b for b in commands if not b.not_run]
        ok = False
        try:
            if runnable:
                self._setup()
                if not runnable[0].server:
                    self._start_server(None, "sextant server\n")
            for b in commands:
                if b.not_run:
                    self.results.append(Result(b, "not run", b.not_run))
                elif b.save_as:
                    dst = self.cwd / b.save_as
                    dst.parent.mkdir(parents=True, exist_ok=True)
                    dst.write_text(self._substitute(b))
                    self.results.append(Result(b, "saved", b.save_as))
                elif b.server:
                    t = time.monotonic()
                    self._start_server(b, self._substitute(b))
                    self.results.append(Result(b, "server", f"on {self.url}", time.monotonic() - t))
                else:
                    self._run_block(b)
            ok = True
        finally:
            try:
                self._stop_server(check=ok)
            finally:
                _kill_leftovers(self.env.get("DOCS_TEST_PAGE", ""))
        return self.results


def _signal_group(pid: int, sig: int) -> None:
    """Signals the process group of a process the runner started in a
    session of its own (its id is the group's while any member lives)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _group_alive(pid: int) -> bool:
    try:
        os.killpg(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def _kill_leftovers(marker: str) -> None:
    """Kills what a page's blocks left running (a `cmd &`): the processes
    whose environment holds the page's DOCS_TEST_PAGE, and no others."""
    if not marker:
        return
    want = f"DOCS_TEST_PAGE={marker}".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            env = (d / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if want in env:
            try:
                os.kill(int(d.name), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
