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
    # Record collectives for the Flight Recorder when the user did not choose.
    _os.environ.setdefault("TORCH_FR_BUFFER_SIZE", "2000")
    _os.environ.setdefault("TORCH_NCCL_TRACE_BUFFER_SIZE", "2000")
    info = {
        "pid": pid, "rank": _os.environ.get("RANK"), "local_rank": _os.environ.get("LOCAL_RANK"),
        "world_size": _os.environ.get("WORLD_SIZE"), "host": socket.gethostname(), "argv": list(_sys.argv),
        "main_thread": "0x%016x" % threading.main_thread().ident,
    }
    tmp = _os.path.join(d, "%d.proc.tmp" % pid)
    try:
        with open(tmp, "w") as pf:
            json.dump(info, pf)
        _os.replace(tmp, _os.path.join(d, "%d.proc" % pid))
    except OSError:
        return

    def fr_dumper():
        import time
        trigger, done = _os.path.join(d, "dump"), False
        while not done:
            time.sleep(1.0)
            if not _os.path.exists(trigger):
                continue
            done = True
            dist = _sys.modules.get("torch.distributed")
            try:
                if dist is None or not dist.is_available() or not dist.is_initialized():
                    continue
                c = _sys.modules["torch._C._distributed_c10d"]
                dump = getattr(c, "_dump_fr_trace", None) or getattr(c, "_dump_nccl_trace")
                data = dump()
                with open(_os.path.join(d, "%d.fr.tmp" % pid), "wb") as out:
                    out.write(data)
                _os.replace(_os.path.join(d, "%d.fr.tmp" % pid), _os.path.join(d, "%d.fr" % pid))
            except Exception as e:  # best effort: the stacks matter more
                try:
                    with open(_os.path.join(d, "%d.fr.err" % pid), "w") as out:
                        out.write("%s: %s\n" % (type(e).__name__, e))
                except OSError:
                    pass

    threading.Thread(target=fr_dumper, name="sextant-hang-agent", daemon=True).start()


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
