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

Protocol, one JSON line each way on stdin/stdout: ``{"req", "env", "cwd", "log"}`` in,
``{"code"}`` (the child's exit status) out. EOF on stdin ends the server.
"""
from __future__ import annotations

import atexit
import json
import os
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


def serve() -> None:
    _preload()
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # a stray print in this process must not corrupt the replies
    for line in sys.stdin:
        job = json.loads(line)
        pid = os.fork()
        if pid == 0:
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
        _, status = os.waitpid(pid, 0)
        replies.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
        replies.flush()


if __name__ == "__main__":
    serve()
