"""`sextant run` and run logs, end to end: the real binary launches Python
training scripts that use the real mlflow client, against a real server.

Covers: default and overridden experiment and run names, the training
code's own run_name winning, metrics landing in the launcher's run, the
captured lines (order, streams, raw tee), exit statuses (0, 3, SIGTERM),
resuming, two launchers of one multi-node job sharing a run, a server
killed (SIGKILL) and restarted while a job prints, and `sextant logs`
(follow, grep, node filter, save as artifact), and the job's GPUs sampled
for the run (a simulated source) as the run's MLflow system metrics."""

from __future__ import annotations

import os
import pwd
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import requests
from mlflow import MlflowClient

import sextant_e2e
from sextant_e2e import artifacts_url, artifact_key

RUN_NAME = re.compile(r"^jobTaskRun-[a-z0-9]{5}$")
# What the mlflow client prints when a run ends (mlflow 3).
MLFLOW_LINK = re.compile(r"^\S+ View (run|experiment) ")
LAUNCH_TIMEOUT_S = 120


def os_user() -> str:
    return pwd.getpwuid(os.getuid()).pw_name


def write_script(tmp_path: Path, name: str, body: str) -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(body))
    return p


def launcher_env(srv, **extra) -> dict:
    env = dict(os.environ)
    for k in ("MLFLOW_RUN_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_EXPERIMENT_ID", "MLFLOW_TRACKING_USERNAME",
              "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID",
              "NODE_RANK", "GROUP_RANK", "LOCAL_RANK", "WORLD_SIZE"):
        env.pop(k, None)
    env["MLFLOW_TRACKING_URI"] = srv.url
    env["PYTHONUNBUFFERED"] = "1"
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_launcher(bin_path, srv, script: Path, *flags: str, env_extra: dict | None = None,
                 timeout: float = LAUNCH_TIMEOUT_S) -> subprocess.CompletedProcess:
    argv = [bin_path, "run", *flags, "--", sys.executable, str(script)]
    return subprocess.run(argv, env=launcher_env(srv, **(env_extra or {})), cwd=script.parent,
                          stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)


def run_id_of(proc_stderr: bytes) -> str:
    m = re.search(rb"sextant: run ([0-9a-f]{32}) ", proc_stderr)
    assert m, f"the launcher did not announce its run:\n{proc_stderr.decode(errors='replace')}"
    return m.group(1).decode()


def get_logs(srv, run_id: str, **params) -> list[dict]:
    """Every line of a run's log (paging through /logs/get)."""
    out: list[dict] = []
    from_line = 1
    while True:
        r = requests.get(srv.api("/sextant/logs/get"), params={"run_id": run_id, "from_line": from_line,
                                                               "limit": 10000, **params}, timeout=30)
        assert r.status_code == 200, r.text
        body = r.json()
        out += body["lines"]
        if body["next_line"] > body["total_lines"]:
            return out
        assert body["next_line"] > from_line
        from_line = body["next_line"]


TRAIN = """
    import sys, time, mlflow
    print("starting", flush=True)
    time.sleep(0.05)
    print("a warning on stderr", file=sys.stderr, flush=True)
    time.sleep(0.05)
    with mlflow.start_run() as run:
        for step in range(5):
            mlflow.log_metric("loss", 1.0 / (step + 1), step=step)
        print("logged to", run.info.run_id, flush=True)
    time.sleep(0.05)
    print("done", file=sys.stderr, flush=True)
"""


def test_default_names_metrics_and_lines(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "train.py", TRAIN)
    p = run_launcher(sextant_bin, server, script)
    assert p.returncode == 0, p.stderr.decode()
    run_id = run_id_of(p.stderr)
    client = MlflowClient(server.url)
    run = client.get_run(run_id)
    exp = client.get_experiment(run.info.experiment_id)
    assert exp.name == f"/Users/{os_user()}/train"
    assert RUN_NAME.match(run.info.run_name), run.info.run_name
    assert run.info.status == "FINISHED" and run.info.end_time
    assert run.data.tags["sextant.exit_code"] == "0"
    # The training code's start_run() attached to the launcher's run.
    assert [m.value for m in sorted(client.get_metric_history(run_id, "loss"), key=lambda m: m.step)] == \
        [1.0, 0.5, 1 / 3, 0.25, 0.2]
    assert len(client.search_runs([exp.experiment_id])) == 1
    lines = get_logs(server, run_id)
    assert [l["line"] for l in lines] == list(range(1, len(lines) + 1))
    # The mlflow client itself prints links when the run ends ("View run
    # ... at: ..."): those are output of the job too.
    links = [l for l in lines if MLFLOW_LINK.match(l["text"])]
    assert links and all(l["stream"] == "stdout" for l in links)
    got = [(l["stream"], l["text"]) for l in lines if l not in links]
    assert got == [
        ("stdout", "starting"),
        ("stderr", "a warning on stderr"),
        ("stdout", f"logged to {run_id}"),
        ("stderr", "done"),
    ], got
    assert all(l["node"] == 0 and l["local_rank"] == -1 for l in lines)
    # The terminal got the output unchanged.
    stdout_lines = [l["text"] for l in lines if l["stream"] == "stdout"]
    assert p.stdout == "".join(t + "\n" for t in stdout_lines).encode()
    assert b"a warning on stderr\ndone\n" in p.stderr


def test_gpus_sampled_for_the_run(sextant_bin, server, tmp_path):
    """The launcher samples the GPUs the job can see (a simulated node of 4,
    CUDA_VISIBLE_DEVICES=1) while it runs; the mlflow client reads them as
    the run's system metrics, next to the training code's own metrics."""
    script = write_script(tmp_path, "train.py", """
        import time, mlflow
        with mlflow.start_run():
            mlflow.log_metric("loss", 0.5)
            time.sleep(2)
    """)
    p = run_launcher(sextant_bin, server, script, "--gpu-source", "sim:4", "--gpu-interval", "200ms",
                     env_extra={"CUDA_VISIBLE_DEVICES": "1"})
    assert p.returncode == 0, p.stderr.decode()
    run_id = run_id_of(p.stderr)
    client = MlflowClient(server.url)
    keys = set(client.get_run(run_id).data.metrics)
    assert "loss" in keys
    assert {"system/gpu_1_utilization_percentage", "system/gpu_1_memory_usage_megabytes",
            "system/gpu_1_memory_usage_percentage", "system/gpu_1_power_usage_watts"} <= keys, keys
    assert not [k for k in keys if k.startswith("system/gpu_") and not k.startswith("system/gpu_1_")], keys
    util = client.get_metric_history(run_id, "system/gpu_1_utilization_percentage")
    assert len(util) >= 5, util  # about 10 in the 2 s the job ran
    assert all(0 <= m.value <= 100 for m in util)
    assert [m.step for m in util] == sorted(m.step for m in util)


def test_user_from_tracking_username(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "train.py", "print('hi')\n")
    p = run_launcher(sextant_bin, server, script, env_extra={
        "MLFLOW_TRACKING_USERNAME": "alice@example.com", "MLFLOW_TRACKING_PASSWORD": "unused-in-single-user-mode"})
    assert p.returncode == 0, p.stderr.decode()
    run = MlflowClient(server.url).get_run(run_id_of(p.stderr))
    assert MlflowClient(server.url).get_experiment(run.info.experiment_id).name == "/Users/alice@example.com/train"
    assert run.info.user_id == "alice@example.com"


def test_module_entry_point(sextant_bin, server, tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "finetune.py").write_text("print('module ran')\n")
    argv = [sextant_bin, "run", "--", sys.executable, "-m", "pkg.finetune"]
    p = subprocess.run(argv, env=launcher_env(server), cwd=tmp_path, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=LAUNCH_TIMEOUT_S)
    assert p.returncode == 0, p.stderr.decode()
    run = MlflowClient(server.url).get_run(run_id_of(p.stderr))
    assert MlflowClient(server.url).get_experiment(run.info.experiment_id).name == f"/Users/{os_user()}/finetune"


def test_overridden_names(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "train.py", "print('x')\n")
    client = MlflowClient(server.url)
    p = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/flag", "--run-name", "custom-name")
    assert p.returncode == 0, p.stderr.decode()
    run = client.get_run(run_id_of(p.stderr))
    assert run.info.run_name == "custom-name"
    assert client.get_experiment(run.info.experiment_id).name == "/Shared/launcher/flag"

    p = run_launcher(sextant_bin, server, script, env_extra={"MLFLOW_EXPERIMENT_NAME": "/Shared/launcher/env"})
    assert p.returncode == 0, p.stderr.decode()
    run = client.get_run(run_id_of(p.stderr))
    assert client.get_experiment(run.info.experiment_id).name == "/Shared/launcher/env"
    assert RUN_NAME.match(run.info.run_name)

    # The flag wins over the environment.
    p = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/flag",
                     env_extra={"MLFLOW_EXPERIMENT_NAME": "/Shared/launcher/env"})
    assert client.get_experiment(client.get_run(run_id_of(p.stderr)).info.experiment_id).name == "/Shared/launcher/flag"

    # In single-user mode a relative name is taken as the server takes it
    # (test_first_hour.py has the rule on both kinds of server).
    p = run_launcher(sextant_bin, server, script, env_extra={"MLFLOW_EXPERIMENT_NAME": "relative-name"})
    assert p.returncode == 0, p.stderr.decode()
    assert client.get_experiment(client.get_run(run_id_of(p.stderr)).info.experiment_id).name == "relative-name"


def test_training_code_run_name_wins(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "sft.py", """
        import mlflow
        with mlflow.start_run(run_name="llama7b-sft-lr3e5") as run:
            mlflow.log_param("lr", "3e-5")
            print("in", run.info.run_id, flush=True)
    """)
    p = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/names")
    assert p.returncode == 0, p.stderr.decode()
    run_id = run_id_of(p.stderr)
    assert p.stdout.decode().splitlines()[0] == f"in {run_id}"
    client = MlflowClient(server.url)
    run = client.get_run(run_id)
    assert run.info.run_name == "llama7b-sft-lr3e5"
    assert run.data.tags["mlflow.runName"] == "llama7b-sft-lr3e5"
    assert run.data.params == {"lr": "3e-5"}
    assert len(client.search_runs([run.info.experiment_id])) == 1


def test_exit_code_3(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "fail.py", """
        import sys, time
        print("about to fail", flush=True)
        time.sleep(0.05)  # order across the two streams is the order they were read
        print("Traceback: something broke", file=sys.stderr, flush=True)
        sys.exit(3)
    """)
    p = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/exit")
    assert p.returncode == 3, p.stderr.decode()
    run = MlflowClient(server.url).get_run(run_id_of(p.stderr))
    assert run.info.status == "FAILED"
    assert run.data.tags["sextant.exit_code"] == "3"
    assert "sextant.signal" not in run.data.tags
    assert [l["text"] for l in get_logs(server, run.info.run_id)] == ["about to fail", "Traceback: something broke"]


def test_sigterm_is_forwarded(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "long.py", """
        import os, signal, sys, time
        def on_term(signum, frame):
            print("child got SIGTERM", flush=True)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
        signal.signal(signal.SIGTERM, on_term)
        print("ready", flush=True)
        while True:
            time.sleep(0.05)
    """)
    argv = [sextant_bin, "run", "--experiment", "/Shared/launcher/signals", "--", sys.executable, str(script)]
    proc = subprocess.Popen(argv, env=launcher_env(server), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout.readline() == b"ready\n"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + signal.SIGTERM, err.decode()
    assert out == b"child got SIGTERM\n"
    run = MlflowClient(server.url).get_run(run_id_of(err))
    assert run.info.status == "KILLED"
    assert run.data.tags["sextant.signal"] == "SIGTERM"
    assert run.data.tags["sextant.exit_code"] == "143"
    assert [l["text"] for l in get_logs(server, run.info.run_id)] == ["ready", "child got SIGTERM"]


def test_resume_continues_run_and_lines(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "steps.py", """
        import os, mlflow
        phase = os.environ["PHASE"]
        for i in range(3):
            print(f"{phase} line {i}", flush=True)
        with mlflow.start_run():
            mlflow.log_metric(f"m_{phase}", 1.0)
    """)
    client = MlflowClient(server.url)
    p1 = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/resume", env_extra={"PHASE": "first"})
    assert p1.returncode == 0, p1.stderr.decode()
    run_id = run_id_of(p1.stderr)
    p2 = run_launcher(sextant_bin, server, script, "--resume", run_id, env_extra={"PHASE": "second"})
    assert p2.returncode == 0, p2.stderr.decode()
    assert run_id_of(p2.stderr) == run_id
    # MLFLOW_RUN_ID resumes too.
    p3 = run_launcher(sextant_bin, server, script, env_extra={"PHASE": "third", "MLFLOW_RUN_ID": run_id})
    assert p3.returncode == 0, p3.stderr.decode()
    assert run_id_of(p3.stderr) == run_id
    lines = get_logs(server, run_id)
    # Line numbers continue across the three launches.
    assert [l["line"] for l in lines] == list(range(1, len(lines) + 1))
    assert [l["text"] for l in lines if not MLFLOW_LINK.match(l["text"])] == [
        f"{phase} line {j}" for phase in ("first", "second", "third") for j in range(3)]
    second = next(l["line"] for l in lines if l["text"] == "second line 0")
    assert second > next(l["line"] for l in lines if l["text"] == "first line 2")
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert set(run.data.metrics) == {"m_first", "m_second", "m_third"}
    assert len(client.search_runs([run.info.experiment_id])) == 1


def test_two_nodes_share_one_run(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "ddp.py", """
        import os, sys, time
        rank = os.environ["NODE_RANK"]
        for i in range(300):
            print(f"node {rank} line {i}", flush=True)
            if i % 50 == 0:
                print(f"node {rank} err {i}", file=sys.stderr, flush=True)
        time.sleep(0.2)
    """)
    procs = []
    for rank in (1, 0):  # node 1 first: it waits for node 0's run
        argv = [sextant_bin, "run", "--job-id", "e2e-job-7", "--nnodes", "2", "--experiment", "/Shared/launcher/ddp",
                "--", sys.executable, str(script)]
        procs.append(subprocess.Popen(argv, env=launcher_env(server, NODE_RANK=rank), stdin=subprocess.DEVNULL,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        time.sleep(1.0)
    outs = [p.communicate(timeout=LAUNCH_TIMEOUT_S) for p in procs]
    for p, (_, err) in zip(procs, outs):
        assert p.returncode == 0, err.decode()
    ids = {run_id_of(err) for _, err in outs}
    assert len(ids) == 1, ids
    run_id = ids.pop()
    client = MlflowClient(server.url)
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert run.data.tags["sextant.job_id"] == "e2e-job-7"
    assert run.data.tags["sextant.node.0.exit_code"] == "0" and run.data.tags["sextant.node.1.exit_code"] == "0"
    assert len(client.search_runs([run.info.experiment_id])) == 1
    lines = get_logs(server, run_id)
    assert [l["line"] for l in lines] == list(range(1, len(lines) + 1))
    for rank in (0, 1):
        mine = [l for l in lines if l["node"] == rank]
        assert [l["text"] for l in mine if l["stream"] == "stdout"] == [f"node {rank} line {i}" for i in range(300)]
        assert [l["text"] for l in mine if l["stream"] == "stderr"] == [f"node {rank} err {i}" for i in range(0, 300, 50)]
        # The node filter of the API returns the same lines.
        assert [l["line"] for l in get_logs(server, run_id, node=rank)] == [l["line"] for l in mine]


def test_server_restart_while_printing(sextant_bin, start_server, tmp_path, monkeypatch):
    srv = start_server()
    script = write_script(tmp_path, "chatty.py", """
        import time
        for i in range(2500):
            print(f"line {i:05d} " + "x" * 60, flush=True)
            time.sleep(0.0015)
    """)
    argv = [sextant_bin, "run", "--experiment", "/Shared/launcher/restart", "--", sys.executable, str(script)]
    proc = subprocess.Popen(argv, env=launcher_env(srv), stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Read both pipes all along, so that the launcher's tee never waits.
    outs: dict[str, bytes] = {}
    readers = [threading.Thread(target=lambda k=k, f=f: outs.__setitem__(k, f.read()), daemon=True)
               for k, f in (("out", proc.stdout), ("err", proc.stderr))]
    for r in readers:
        r.start()
    try:
        time.sleep(1.5)
        srv.kill()  # SIGKILL while the job prints
        time.sleep(1.5)
        port = srv.port
        monkeypatch.setattr(sextant_e2e, "free_port", lambda: port)
        srv.start()  # same data directory, same port
        assert srv.port == port
        proc.wait(timeout=LAUNCH_TIMEOUT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
    for r in readers:
        r.join(timeout=10)
    err = outs["err"]
    assert proc.returncode == 0, err.decode()
    assert b"cannot send output to the server" in err, err.decode()
    run_id = run_id_of(err)
    lines = get_logs(srv, run_id)
    texts = [l["text"] for l in lines]
    want = [f"line {i:05d} " + "x" * 60 for i in range(2500)]
    assert len(texts) == len(set(texts)), "a line was stored twice"
    missing = sorted(set(want) - set(texts))
    assert not missing, f"{len(missing)} lines lost, first {missing[:3]}"
    assert texts == want
    assert [l["line"] for l in lines] == list(range(1, 2501))
    assert MlflowClient(srv.url).get_run(run_id).info.status == "FINISHED"
    assert outs["out"] == "".join(w + "\n" for w in want).encode()


def test_raw_output_kept_and_stored(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "raw.py", """
        import sys, time
        out = sys.stdout.buffer
        out.write(b"bad \\xff\\xfe bytes\\n")
        out.write(b"\\x1b[32mgreen\\x1b[0m\\r\\n")
        for p in (10, 50, 100):
            out.write(b"\\rprogress %d%%" % p)
            out.flush()
            time.sleep(0.02)
        out.write(b"\\n")
        out.write(b"L" * (1536 * 1024) + b"\\n")
        out.write(b"no newline at the end")
        out.flush()
    """)
    p = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/raw")
    assert p.returncode == 0, p.stderr.decode()
    expected = (b"bad \xff\xfe bytes\n\x1b[32mgreen\x1b[0m\r\n\rprogress 10%\rprogress 50%\rprogress 100%\n"
                + b"L" * (1536 * 1024) + b"\nno newline at the end")
    assert p.stdout == expected  # the tee is byte for byte
    lines = get_logs(server, run_id_of(p.stderr))
    got = [(l["text"] if len(l["text"]) < 100 else f"L*{len(l['text'])}", l.get("cr", False), l.get("partial", False))
           for l in lines]
    assert got == [
        ("bad \ufffd bytes", False, False),
        ("\x1b[32mgreen\x1b[0m", False, False),
        ("progress 10%", True, False),
        ("progress 50%", True, False),
        ("progress 100%", False, False),
        (f"L*{1024 * 1024}", False, True),
        (f"L*{512 * 1024}", False, False),
        ("no newline at the end", False, False),
    ], got


def test_logs_command(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "slow.py", """
        import os, sys, time
        print("RUN", os.environ["MLFLOW_RUN_ID"], flush=True)
        for i in range(40):
            print(f"step {i}", flush=True)
            if i % 10 == 9:
                time.sleep(0.03)
                print(f"WARN at {i}", file=sys.stderr, flush=True)
            time.sleep(0.03)
    """)
    argv = [sextant_bin, "run", "--experiment", "/Shared/launcher/logs", "--", sys.executable, str(script)]
    job = subprocess.Popen(argv, env=launcher_env(server), stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = job.stdout.readline().decode()
    run_id = first.split()[1]
    follow = subprocess.Popen([sextant_bin, "logs", run_id, "-f"], env=launcher_env(server),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    job_out, job_err = job.communicate(timeout=LAUNCH_TIMEOUT_S)
    assert job.returncode == 0, job_err.decode()
    followed, ferr = follow.communicate(timeout=60)  # -f ends once the run has ended
    assert follow.returncode == 0, ferr.decode()
    want_all = [first.strip()] + [x for i in range(40) for x in ([f"step {i}"] + ([f"WARN at {i}"] if i % 10 == 9 else []))]
    assert followed.decode().splitlines() == want_all

    env = launcher_env(server)
    grep = subprocess.run([sextant_bin, "logs", "--grep", "^WARN", run_id], env=env, capture_output=True, timeout=60)
    assert grep.returncode == 0, grep.stderr.decode()
    assert grep.stdout.decode().splitlines() == [f"WARN at {i}" for i in (9, 19, 29, 39)]
    labelled = subprocess.run([sextant_bin, "logs", run_id, "--stream", "stderr", "--labels", "--node", "0"],
                              env=env, capture_output=True, timeout=60)
    assert labelled.stdout.decode().splitlines()[0] == "[node 0 stderr] WARN at 9"

    saved = subprocess.run([sextant_bin, "logs", run_id, "--save-artifact"], env=env, capture_output=True, timeout=60)
    assert saved.returncode == 0, saved.stderr.decode()
    run = MlflowClient(server.url).get_run(run_id)
    r = requests.get(artifacts_url(server, artifact_key(run.info.artifact_uri) + "/logs/output.txt"), timeout=30)
    assert r.status_code == 200, r.text
    assert r.text.splitlines() == want_all
    listed = [f.path for f in MlflowClient(server.url).list_artifacts(run_id, "logs")]
    assert listed == ["logs/output.txt"]

    missing = subprocess.run([sextant_bin, "logs", "ffffffffffffffffffffffffffffffff"], env=env, capture_output=True, timeout=60)
    assert missing.returncode == 1 and b"no run has the id or name \"ffffffffffffffffffffffffffffffff\"" in missing.stderr, missing.stderr


def test_deleted_run_log_unreadable(sextant_bin, server, tmp_path):
    script = write_script(tmp_path, "gone.py", "print('secret')\n")
    p = run_launcher(sextant_bin, server, script, "--experiment", "/Shared/launcher/deleted")
    run_id = run_id_of(p.stderr)
    assert [l["text"] for l in get_logs(server, run_id)] == ["secret"]
    MlflowClient(server.url).delete_run(run_id)
    r = requests.get(server.api("/sextant/logs/get"), params={"run_id": run_id}, timeout=30)
    assert r.status_code == 404 and r.json()["error_code"] == "RESOURCE_DOES_NOT_EXIST"
    MlflowClient(server.url).restore_run(run_id)
    assert [l["text"] for l in get_logs(server, run_id)] == ["secret"]


@pytest.mark.replicas
def test_tail_across_replicas(sextant_bin, tmp_path, postgres_db):
    """A tail waiting on one replica sees lines appended through another:
    tails read the shared database, not a replica's memory."""
    if postgres_db is None:
        pytest.fail("replicas share one PostgreSQL database: run with SEXTANT_E2E_DB=postgres, or deselect -m 'not replicas'")
    import uuid

    from sextant_e2e import SextantServer

    shared = "logs_" + uuid.uuid4().hex[:8]
    a = SextantServer(sextant_bin, tmp_path / "a", tmp_path / "a.log", shared=shared).start()
    b = SextantServer(sextant_bin, tmp_path / "b", tmp_path / "b.log", shared=shared).start()
    try:
        script = write_script(tmp_path, "replicated.py", """
            import time
            print("first", flush=True)
            time.sleep(3)
            print("second", flush=True)
            time.sleep(0.5)
        """)
        argv = [sextant_bin, "run", "--experiment", "/Shared/launcher/replicas", "--", sys.executable, str(script)]
        job = subprocess.Popen(argv, env=launcher_env(a), stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert job.stdout.readline() == b"first\n"
        err_line = job.stderr.readline()
        run_id = run_id_of(err_line)
        # Wait on replica b for the line after "first" (at most line 1 is stored yet).
        deadline = time.monotonic() + 10
        while True:
            r = requests.get(b.api("/sextant/logs/get"), params={"run_id": run_id}, timeout=30)
            assert r.status_code == 200, r.text
            if r.json()["total_lines"] >= 1:
                break
            assert time.monotonic() < deadline, "the first line never reached replica b"
            time.sleep(0.05)
        t0 = time.monotonic()
        r = requests.get(b.api("/sextant/logs/tail"), params={"run_id": run_id, "after_line": 1, "wait_ms": 20000}, timeout=60)
        waited = time.monotonic() - t0
        assert r.status_code == 200, r.text
        assert [l["text"] for l in r.json()["lines"]] == ["second"]
        assert 2.0 < waited < 5.0, f"the tail on b answered after {waited:.2f}s"
        job.communicate(timeout=LAUNCH_TIMEOUT_S)
        assert job.returncode == 0
    finally:
        for srv in (a, b):
            srv.stop_and_check()
