# Written by `sextant run` into its agent directory, which it puts first on
# the job's PYTHONPATH, so that every Python process of the job runs it at
# start (docs/run.md, "Hangs"). It lets the launcher collect the process's
# stacks when the job hangs, without changes to the job's code:
#
# - faulthandler dumps every thread's stack to <dir>/<pid>.stacks on
#   SIGUSR2, from a C-level handler, so it works while the main thread is
#   blocked inside a C call (a collective);
# - <dir>/<pid>.proc says who the process is (rank, local rank, host, argv,
#   main thread), and is the launcher's proof that SIGUSR2 is safe to send;
# - when torch.distributed is in use, a daemon thread writes a Flight
#   Recorder dump to <dir>/<pid>.fr once the launcher creates <dir>/dump.
#
# It then runs the sitecustomize it shadows, if any. Without
# SEXTANT_AGENT_DIR it does nothing but that.
import os as _os
import sys as _sys


def _sextant_agent():
    d = _os.environ.get("SEXTANT_AGENT_DIR")
    if not d or not _os.path.isdir(d):
        return
    import faulthandler
    import json
    import signal
    import socket
    import threading

    pid = _os.getpid()
    try:
        f = open(_os.path.join(d, "%d.stacks" % pid), "ab", buffering=0)
        faulthandler.register(signal.SIGUSR2, file=f, all_threads=True, chain=False)
    except (OSError, ValueError, RuntimeError, AttributeError):
        return
    _sys.modules[__name__]._sextant_stacks_file = f  # keep it open for the handler
    _fr_buffer_env()
    info = {
        "pid": pid, "rank": _os.environ.get("RANK"), "local_rank": _os.environ.get("LOCAL_RANK"),
        "world_size": _os.environ.get("WORLD_SIZE"), "host": socket.gethostname(), "argv": list(_sys.argv),
        "main_thread": "0x%016x" % threading.main_thread().ident,
    }
    # The newest request before this process registers is not for it; one
    # made once the launcher can see the .proc file is.
    first = _fr_request(d)
    tmp = _os.path.join(d, "%d.proc.tmp" % pid)
    try:
        with open(tmp, "w") as pf:
            json.dump(info, pf)
        _os.replace(tmp, _os.path.join(d, "%d.proc" % pid))
    except OSError:
        return

    threading.Thread(target=_fr_dumper, args=(d, pid, first), name="sextant-hang-agent", daemon=True).start()


def _torch_version():
    # The installed torch's (major, minor), read from torch/version.py
    # without importing torch (seconds, and no business of a job that does
    # not use it); None without torch or when unreadable.
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    for loc in (spec and spec.submodule_search_locations) or ():
        try:
            with open(_os.path.join(loc, "version.py")) as f:
                lines = f.read().splitlines()
        except OSError:
            continue
        for line in lines:
            name, eq, value = line.partition("=")
            if eq and name.split(":")[0].strip() == "__version__":
                try:
                    major, minor = value.strip().strip("'\"").split(".")[:2]
                    return int(major), int(minor)
                except ValueError:
                    return None
    return None


def _fr_buffer_env():
    # Make the Flight Recorder record collectives when the user did not
    # choose a buffer size. torch 2.8 renamed TORCH_NCCL_TRACE_BUFFER_SIZE
    # to TORCH_FR_BUFFER_SIZE and warns, in the job's output, when the old
    # name is set: set the one name the installed torch reads, and nothing
    # for a job without torch.
    if "TORCH_FR_BUFFER_SIZE" in _os.environ or "TORCH_NCCL_TRACE_BUFFER_SIZE" in _os.environ:
        return
    v = _torch_version()
    if v is None:
        return
    _os.environ["TORCH_FR_BUFFER_SIZE" if v >= (2, 8) else "TORCH_NCCL_TRACE_BUFFER_SIZE"] = "2000"


def _write_atomic(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    _os.replace(tmp, path)


def _fr_trace(dist):
    # (dump, "json"|"pickle", entries) of the process's Flight Recorder.
    # torch keeps two: ProcessGroupNCCL's own, which only NCCL collectives
    # go to (its dump functions exist in CUDA builds), and the generic one
    # (torch >= 2.8) that gloo records into. A job whose default group uses
    # NCCL gets NCCL's; any other the generic one. JSON when torch can, so
    # that nobody has to unpickle a dump to read it.
    import json
    import pickle

    c = _sys.modules["torch._C._distributed_c10d"]
    backend = str(dist.get_backend())
    prefix = "_dump_nccl_trace" if "nccl" in backend else "_dump_fr_trace"
    fn = getattr(c, prefix + "_json", None)
    if fn is not None:
        out = fn()
        data = out.encode() if isinstance(out, str) else bytes(out)
        return data, "json", json.loads(data).get("entries") or []
    fn = getattr(c, prefix, None)
    if fn is None:
        raise RuntimeError("this torch has no Flight Recorder for the %s backend" % backend)
    data = bytes(fn())
    return data, "pickle", pickle.loads(data).get("entries") or []  # our own process's dump


def _fr_dump(d, pid, gen):
    # Writes <pid>.<gen>.fr (the dump) and then <pid>.<gen>.frdone, a JSON
    # object the launcher waits for: {"format": "json"|"pickle",
    # "entries": N} or {"error": why there is no dump}.
    import json

    done = {}
    dist = _sys.modules.get("torch.distributed")
    try:
        if dist is None:
            done["error"] = "torch.distributed not in use"
        elif not dist.is_available() or not dist.is_initialized():
            done["error"] = "torch.distributed not initialized"
        else:
            data, done["format"], entries = _fr_trace(dist)
            done["entries"] = len(entries)
            _write_atomic(_os.path.join(d, "%d.%d.fr" % (pid, gen)), data)
    except Exception as e:  # best effort: the stacks matter more
        done = {"error": "%s: %s" % (type(e).__name__, e)}
    try:
        _write_atomic(_os.path.join(d, "%d.%d.frdone" % (pid, gen)), json.dumps(done).encode())
    except OSError:
        pass


def _fr_request(d):
    # The generation number in <dir>/dump, the launcher's newest request
    # for dumps; 0 before the first.
    try:
        with open(_os.path.join(d, "dump")) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def _fr_dumper(d, pid, last):
    # The launcher asks for dumps by replacing <dir>/dump with a new
    # generation number. Reading it every 0.1 s costs a few microseconds;
    # the answer comes well within the launcher's wait.
    import time

    while True:
        time.sleep(0.1)
        g = _fr_request(d)
        if g > last:
            last = g
            _fr_dump(d, pid, g)


def _sextant_chain():
    # Run the sitecustomize this one shadows (Debian's, a virtualenv's).
    import importlib.machinery
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    path = [p for p in _sys.path if _os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    mod = importlib.util.module_from_spec(spec)
    _sys.modules["_sextant_shadowed_sitecustomize"] = mod
    spec.loader.exec_module(mod)


try:
    _sextant_agent()
except Exception:
    pass
_sextant_chain()
