"""The warm verification worker: ``python -m mend._warm`` imports torch, Dynamo, Inductor,
the solver, LibCST, Hypothesis and the parts of mend and the verifier a worker runs, then
forks one child per request (:func:`mend.worker.run_worker`), each a fresh copy of this
clean state (a forkserver, as Python's multiprocessing has, without its re-import of the
caller's ``__main__``).

It imports transformers' shared core (``transformers.modeling_utils`` and what it pulls
in) but no model file and no user module. The import overlay replaces mended modules; a
child whose overlay holds one of the preloaded modules is refused by
``mend.overlay.activate`` (a module already imported would keep its old code) and exits
with :data:`STALE`, and :func:`mend.worker.run_worker` runs that request in a fresh
interpreter instead.

Protocol, one JSON line each way on stdin/stdout: ``{"id", "req", "env", "cwd", "log"}``
in, ``{"id", "code"}`` (the child's exit status) out, in the order the children end. At
most ``MEND_JOBS`` children run at once (default: the usable cores, at most 2); the others
wait in the order they came. EOF on stdin ends the server once its children have ended.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import sys


STALE = 75  # the child's overlay replaces a preloaded module: rerun in a fresh interpreter


def _preload() -> None:
    import hypothesis  # noqa: F401
    import libcst  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401
    import torch._inductor.compile_fx  # noqa: F401
    import z3  # noqa: F401

    import mend.overlay  # noqa: F401
    import mend.scan  # noqa: F401
    import mend.validation_runtime  # noqa: F401
    import verifier.differential  # noqa: F401
    import verifier.facts  # noqa: F401
    import verifier.forcing  # noqa: F401

    torch.set_num_threads(1)
    try:  # optional: the hf: catalogue's library, without any model file
        import transformers.modeling_utils  # noqa: F401
    except ImportError:
        pass
    _probe_vec_isa()


def _probe_vec_isa() -> None:
    """Inductor probes which vector ISAs the C++ compiler and this CPU support on its first
    CPU kernel, compiling and loading a test library per ISA (2 s with a warm cache, 7 s
    cold), in every child that compiles. The answer depends on the machine alone
    (``ATEN_CPU_CAPABILITY`` is read per call, not cached), so it is probed once here and
    the children inherit it; where the probe fails, nothing is cached and each child
    probes (and reports) as it would without this. Measured on hf:t5 with an empty cache:
    the fix 51.6 s -> 47.8 s.

    The answers are also kept in mend's cache (:func:`mend.files.cache_dir`), keyed by
    everything they depend on: torch's version, the compiler and its version, the CPU's
    ISA flags. A later run reads them instead of compiling (7 s of the two cores, spent
    while the caller builds and scans). A wrong answer could only make a kernel fail to
    build or load, which fails the Inductor run and declines the rewrite; it cannot
    pass one."""
    if not sys.platform.startswith("linux"):
        return
    try:
        from torch._inductor import config
        from torch._inductor import cpu_vec_isa as isa

        if config.cpp.vec_isa_ok is not None:  # set by the user: Inductor probes nothing
            return
        path = _isa_cache_path()
        try:
            known = json.loads(path.read_text())
        except (OSError, ValueError):
            known = None
        flags = isa.x86_isa_checker()
        candidates = [i for i in isa.supported_vec_isa_list if all(flag in flags for flag in str(i).split())]
        if isinstance(known, dict) and all(isinstance(known.get(str(i)), bool) for i in candidates):
            build = isa.VecISA.check_build
            # seeds Inductor's caches; an ISA the file does not name is probed as before
            isa.VecISA.check_build = lambda self, code: known[str(self)] if str(self) in known else build(self, code)
            try:
                isa.valid_vec_isa_list()
            finally:
                isa.VecISA.check_build = build
            return
        isa.valid_vec_isa_list()
        from mend.files import write_cache

        write_cache(path, json.dumps({str(i): bool(i) for i in candidates}))
    except Exception:  # noqa: BLE001 - see above
        pass


def _isa_cache_path():
    """The cache file of this machine's vector-ISA answers (see :func:`_probe_vec_isa`)."""
    import hashlib
    import platform

    import torch
    from torch._inductor.cpp_builder import get_compiler_version_info, get_cpp_compiler
    from torch._inductor.cpu_vec_isa import x86_isa_checker

    from mend.files import cache_dir

    compiler = get_cpp_compiler()
    key = json.dumps([torch.__version__, platform.machine(), compiler, get_compiler_version_info(compiler),
                      x86_isa_checker()])
    return cache_dir() / f"vec-isa-{hashlib.sha256(key.encode()).hexdigest()[:16]}.json"


def _child(job: dict) -> int:
    """Run one request as ``python -m mend.worker REQ`` would, with ``job["env"]`` in
    ``job["cwd"]``: the environment, ``sys.path`` (cwd and PYTHONPATH first), warnings
    ignored, stdout and stderr to ``job["log"]``."""
    import warnings

    fd = os.open(job["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    os.environ.clear()
    os.environ.update(job["env"])
    os.chdir(job["cwd"])
    first = [job["cwd"], *filter(None, job["env"].get("PYTHONPATH", "").split(os.pathsep))]
    sys.path[:] = first + [p for p in sys.path if p not in first and p not in ("", ".")]
    warnings.simplefilter("ignore")
    from mend.worker import main

    try:
        return main(["mend.worker", job["req"]])
    except RuntimeError as exc:
        if str(exc).startswith("already imported"):
            print(f"mend._warm: {exc}", file=sys.stderr)
            return STALE
        raise


def jobs() -> int:
    """How many verification children may run at once: ``MEND_JOBS``, else the usable
    cores, at most 2 (each child holds a model and compiles; more only contend)."""
    env = os.environ.get("MEND_JOBS")
    if env:
        return max(1, int(env))
    return max(1, min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _fork(job: dict) -> int:
    server = os.getpid()
    pid = os.fork()
    if pid:
        return pid
    if sys.platform.startswith("linux"):  # a child must not outlive a killed server: its rerun
        import ctypes                     # would write the same output files
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() != server:
            os._exit(1)
    code = 1
    try:
        code = _child(job)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported in the log, as an interpreter would
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        atexit._run_exitfuncs()
        os._exit(code)


def serve() -> None:
    _preload()
    limit = jobs()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a stray print in this process must not corrupt the replies
    stdin = sys.stdin.fileno()
    buffer, queue, running, open_ = b"", [], {}, True  # running: pid -> job id
    while open_ or queue or running:
        while queue and len(running) < limit:
            job = queue.pop(0)
            running[_fork(job)] = job.get("id")
        if open_:
            # raw reads: a buffered readline would hide lines from select
            ready, _, _ = select.select([stdin], [], [], 0.05 if running else None)
            if ready:
                chunk = os.read(stdin, 1 << 16)
                open_ = bool(chunk)
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                queue += [json.loads(line) for line in lines if line.strip()]
        elif running:
            select.select([], [], [], 0.05)
        for pid in list(running):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                replies.write(json.dumps({"id": running.pop(pid), "code": os.waitstatus_to_exitcode(status)}) + "\n")
                replies.flush()


if __name__ == "__main__":
    serve()
