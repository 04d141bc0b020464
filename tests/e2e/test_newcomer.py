"""What a newcomer meets in the first minutes, end to end with the real
binary (issue 43): a client command against a closed port fails within
seconds, saying so at once and naming the URL and what to check; Ctrl-C in
a terminal during a job that catches SIGINT and exits 1 records KILLED
with `sextant.signal`; every outcome of `sextant run` ends with a closing
status line (SIGTERM to a job that exits 0 too); a command that cannot
start (`pythn`, a missing script, `python -c` without an experiment)
creates nothing; a second server on a data directory in use exits naming
the running one (SQLite only); `--resume latest` with other arguments
resumes the same run; and a process-based async save from a script
without a main guard raises within seconds instead of waiting 30 minutes
(marker `ml`: needs torch)."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import signal
import subprocess
import sys
import termios
import textwrap
import time
from pathlib import Path

import pytest
import requests
from mlflow import MlflowClient

import sextant_e2e
from sextant_e2e import REPO_ROOT, free_port, storage_flags

TIMEOUT_S = 120
CLEAN_ENV = ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_TRACKING_USERNAME",
             "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
             "NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "WORLD_SIZE")


def env_for(url: str, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN_ENV}
    env.update(MLFLOW_TRACKING_URI=url, PYTHONUNBUFFERED="1")
    env.update(extra)
    return env


def write_script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def run_id_of(stderr: str) -> str:
    m = re.search(r"sextant: run ([0-9a-f]{32}) ", stderr)
    assert m, f"the launcher did not announce its run:\n{stderr}"
    return m.group(1)


def experiment_names(srv) -> set[str]:
    r = requests.post(srv.api("/mlflow/experiments/search"), json={"max_results": 1000}, timeout=30)
    assert r.status_code == 200, r.text
    return {e["name"] for e in r.json().get("experiments", [])}


# ---------------------------------------------------------------- item 3


@pytest.mark.parametrize("args", [["runs", "ls"], ["logs", "--last"]])
def test_closed_port_fails_fast_and_says_so(sextant_bin, args):
    """Nothing listens on the port: the command says at once that it cannot
    reach the server and is retrying, and gives up within 15 s naming the
    URL and what to check (it was 58 s of silence)."""
    url = f"http://127.0.0.1:{free_port()}"
    start = time.monotonic()
    p = subprocess.Popen([sextant_bin, *args], env=env_for(url), stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = p.stderr.readline()
        rest = p.stderr.read()
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    took = time.monotonic() - start
    assert p.returncode != 0
    assert took < 15, f"took {took:.1f}s"
    # The first line is the notice, printed before the command gave up.
    assert "cannot reach the server at " + url in first and "retrying for up to" in first, first + rest
    assert "cannot reach the server at " + url in rest and "MLFLOW_TRACKING_URI" in rest and "--server" in rest, rest


# ---------------------------------------------------------------- item 4


def _set_ctty() -> None:
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def test_ctrl_c_in_a_terminal_is_killed_whatever_the_exit_code(sextant_bin, server, tmp_path):
    """`sextant run` at a terminal gives the job the terminal, so Ctrl-C
    reaches the job's process group, not the launcher. A job that catches
    SIGINT and exits 1 (Lightning does) is recorded KILLED with
    sextant.signal=SIGINT, not FAILED."""
    script = write_script(tmp_path, "lightning_like.py", """
        import signal, sys, time
        def on_int(signum, frame):
            print("shutting down after Ctrl-C", flush=True)
            sys.exit(1)
        signal.signal(signal.SIGINT, on_int)
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """)
    master, slave = pty.openpty()
    argv = [sextant_bin, "run", "--experiment", "/Shared/newcomer/ctrl-c", "--", sys.executable, str(script)]
    p = subprocess.Popen(argv, env=env_for(server.url), cwd=tmp_path, stdin=slave, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, start_new_session=True, preexec_fn=_set_ctty)
    os.close(slave)
    try:
        assert p.stdout.readline() == b"ready\n"
        os.write(master, b"\x03")  # Ctrl-C, as typed: the terminal signals its foreground group
        out, err = p.communicate(timeout=TIMEOUT_S)
    finally:
        if p.poll() is None:
            p.kill()
        os.close(master)
    err = err.decode(errors="replace")
    assert b"shutting down after Ctrl-C" in out, err
    assert p.returncode == 1, err
    run = MlflowClient(server.url).get_run(run_id_of(err))
    assert run.info.status == "KILLED", err
    assert run.data.tags["sextant.signal"] == "SIGINT"
    assert run.data.tags["sextant.exit_code"] == "1"
    assert re.search(r"sextant: python\S* ended by SIGINT \(exit code 1\); run [0-9a-f]{32} is KILLED", err), err


def test_sigterm_to_a_job_that_exits_0_prints_a_closing_line(sextant_bin, server, tmp_path):
    """SIGTERM to `sextant run`, forwarded to a job that stops cleanly with
    exit code 0: the run is KILLED, and the launcher says so in a closing
    line (it printed nothing)."""
    script = write_script(tmp_path, "graceful.py", """
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """)
    argv = [sextant_bin, "run", "--experiment", "/Shared/newcomer/sigterm", "--", sys.executable, str(script)]
    p = subprocess.Popen(argv, env=env_for(server.url), cwd=tmp_path, stdin=subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline() == b"ready\n"
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=TIMEOUT_S)
    finally:
        if p.poll() is None:
            p.kill()
    err = err.decode(errors="replace")
    assert p.returncode == 0, err
    run_id = run_id_of(err)
    assert f"ended by SIGTERM (exit code 0); run {run_id} is KILLED" in err.splitlines()[-1], err
    assert MlflowClient(server.url).get_run(run_id).data.tags["sextant.signal"] == "SIGTERM"


def test_a_finished_job_prints_a_closing_line(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "ok.py", "print('ok')\n")
    r = subprocess.run([sextant_bin, "run", "--experiment", "/Shared/newcomer/ok", "--", sys.executable, str(script)],
                       env=env_for(server.url), cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True,
                       text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    assert re.search(r"exited with code 0; run [0-9a-f]{32} is FINISHED$", r.stderr.strip()), r.stderr


@pytest.mark.parametrize("command,code,says", [
    (["--", "pythn", "train.py"], 127, "cannot start pythn: no such program on $PATH"),
    (["--", "PYTHON", "nope.py"], 2, "there is no file nope.py"),
    (["PYTHON", "-c", "print(1)"], 2, "give --experiment NAME"),
])
def test_a_command_that_cannot_start_creates_nothing(sextant_bin, server, tmp_path, command, code, says):
    """A typo in the program or the script, or inline Python with nothing to
    name the experiment after: refused before any experiment or run is
    created (they made an experiment and a FAILED run)."""
    command = [sys.executable if a == "PYTHON" else a for a in command]
    before = experiment_names(server)
    r = subprocess.run([sextant_bin, "run", *command], env=env_for(server.url), cwd=tmp_path,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == code, r.stderr
    assert says in r.stderr and "nothing was created on the server" in r.stderr, r.stderr
    assert "sextant: run " not in r.stderr
    assert experiment_names(server) == before


# ---------------------------------------------------------------- item 5


def test_second_server_on_a_data_directory_in_use(sextant_bin, start_server, tmp_path):
    """A second `sextant server` on the SQLite data directory of a running
    one exits non-zero at once, naming the running server (its pid and
    address); the first keeps serving."""
    if sextant_e2e.POSTGRES is not None:
        pytest.skip("the data directory's lock is SQLite's: replicas on PostgreSQL share storage on purpose")
    first = start_server()
    argv = [sextant_bin, "server", "--host", "127.0.0.1", "--port", str(free_port()), "--data-dir", str(first.data_dir),
            *storage_flags(first.data_dir)]
    r = subprocess.run(argv, cwd=tmp_path, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode != 0, r.stderr
    assert "is in use by another sextant server" in r.stderr, r.stderr
    assert f"pid {first.proc.pid}" in r.stderr and first.url in r.stderr, r.stderr
    assert requests.get(first.url + "/health", timeout=10).text.strip() == "OK"


# ---------------------------------------------------------------- item 7


def test_resume_latest_with_other_arguments_resumes_the_same_run(sextant_bin, server, tmp_path):
    """--resume latest finds the job's run by its script, not the exact
    command text: more epochs and another random port resume the same run,
    and the launcher says which run and why."""
    script = write_script(tmp_path, "train.py", "print('training')\n")
    exp = "/Shared/newcomer/resume"

    def launch(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sextant_bin, "run", "--experiment", exp, *args], env=env_for(server.url), cwd=tmp_path,
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S)

    first = launch("--", sys.executable, "train.py", "--epochs", "10", "--master-port", "29511")
    assert first.returncode == 0, first.stderr
    run_id = run_id_of(first.stderr)
    again = launch("--resume", "latest", "--", sys.executable, "-u", "train.py", "--epochs", "20", "--master-port", "31234")
    assert again.returncode == 0, again.stderr
    assert run_id_of(again.stderr) == run_id, again.stderr
    assert f"resuming run {run_id}" in again.stderr and "the newest run of script train.py" in again.stderr, again.stderr
    assert "--epochs 10 --master-port 29511" in again.stderr, again.stderr


# ---------------------------------------------------------------- item 6


NO_GUARD = """
    import torch
    import torch.distributed as dist
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict_saver import AsyncCheckpointerType

    from sextant.checkpoint import VolumeWriter

    dist.init_process_group("gloo")
    state = {"w": torch.zeros(4)}
    fut = dcp.async_save(state, storage_writer=VolumeWriter("/Volumes/main/ml/guard/step_1"),
                         async_checkpointer_type=AsyncCheckpointerType.PROCESS)
    fut.result()
    print("saved")
"""


@pytest.mark.ml
def test_process_save_without_main_guard_raises_at_once(server, tmp_path):
    """docs/volumes.md's process mode from a script without `if __name__ ==
    "__main__":`: the spawned checkpoint process imports the script again
    and would wait 1,800 s for its process group; instead it raises
    MainGuardError and the save fails well within a minute."""
    script = write_script(tmp_path, "noguard.py", NO_GUARD)
    env = env_for(server.url, PYTHONPATH=str(REPO_ROOT / "python"), RANK="0", WORLD_SIZE="1",
                  MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()), SEXTANT_STAGING_DIR=str(tmp_path))
    start = time.monotonic()
    r = subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=600)
    took = time.monotonic() - start
    assert r.returncode != 0 and "saved" not in r.stdout, r.stdout + r.stderr
    assert "MainGuardError" in r.stderr and "if __name__ == \"__main__\":" in r.stderr, r.stderr[-3000:]
    assert "Checkpoint background process is dead" in r.stderr, r.stderr[-3000:]
    # 1,800 s without the check; the time is torch's imports, twice.
    assert took < 300, f"took {took:.0f}s"


# ---------------------------------------------------------------- item 2


def test_turning_sign_in_on_from_a_running_single_user_server(sextant_bin, start_server, tmp_path):
    """`users add --admin` against a running single-user server says exactly
    what to run; doing that (users add --data-dir while it runs, then a
    restart) turns sign-in on, and the new administrator signs in."""
    srv = start_server()
    env = env_for(srv.url)
    r = subprocess.run([sextant_bin, "users", "add", "alice@example.com", "--admin"], env=env, input="alice-password-1\n",
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode != 0
    assert "single-user mode" in r.stderr and "restart the server" in r.stderr, r.stderr
    assert "sextant users add alice@example.com --admin --data-dir DIR" in r.stderr, r.stderr
    # The step, as the message gives it (--db in the PostgreSQL session).
    flags = storage_flags(srv.data_dir)
    where = flags[flags.index("--db"):flags.index("--db") + 2] if "--db" in flags else ["--data-dir", str(srv.data_dir)]
    r = subprocess.run([sextant_bin, "users", "add", "alice@example.com", "--admin", *where], env=env,
                       input="alice-password-1\n", capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, r.stderr
    if "--db" not in flags:
        assert f"the server running on it (pid {srv.proc.pid}" in r.stdout, r.stdout
    assert srv.stop() == 0
    srv.stopped = True
    srv = start_server(data_dir=srv.data_dir)
    assert requests.get(srv.api("/mlflow/experiments/search"), timeout=10).status_code == 401
    r = subprocess.run([sextant_bin, "users", "list"], capture_output=True, text=True, timeout=TIMEOUT_S,
                       env=env_for(srv.url, MLFLOW_TRACKING_USERNAME="alice@example.com",
                                   MLFLOW_TRACKING_PASSWORD="alice-password-1"))
    assert r.returncode == 0 and "alice@example.com" in r.stdout, r.stderr
