"""Fresh-interpreter runs for the out-of-process executor (hf:, MODULE:FACTORY targets).

The parent process has the original library imported, so a mended copy can only be
loaded in a fresh interpreter with the import overlay active (:mod:`mend.overlay`).
``python -m mend.worker REQUEST.json`` builds the target there and, by ``action``:

* ``scan``: scans it (JSON);
* ``observe``: records its observable behaviour on a list of inputs (``torch.save``),
  with :func:`verifier.differential.observe`;
* ``facts``: traces the facts the proof obligations read (JSON), with
  :func:`verifier.facts.collect_facts`.
* ``time``: the steady-state ms per call of the model under Inductor on the target's
  example inputs (JSON ``{"ms"}``, :func:`mend.pipeline.timing.steady_ms`; ``mend fix
  --choose measure``).

This module belongs to ``mend`` (it builds targets); the verifier functions it calls
take a model and never import ``mend`` (Alive2's separation).
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from pathlib import Path

from mend.errors import InputsRejected, MendError

ROOT = Path(__file__).resolve().parents[1]


def worker_env() -> dict:
    """Environment of a verification interpreter: one intra-op thread, and the user's
    working directory importable, as ``mend`` made it for MODULE:FACTORY targets."""
    path = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONPATH=os.pathsep.join(path))


def start_early(specs) -> None:
    """Start the warm server now when one of ``specs`` will be verified through it (hf:NAME,
    MODULE:FACTORY: the overlay executor), so that its imports (about 9 s on 2 cores)
    overlap the caller's own imports, target build and first scan instead of following
    them. A FILE.py target verifies in process and starts nothing."""
    if any(spec.startswith("hf:") or not spec.partition(":")[0].endswith(".py") for spec in specs):
        _WarmServer.start()


def run_worker(request: dict, tmp: Path, tag: str):
    """Run one request in a fresh process; returns its result (a dict for ``scan`` and
    ``facts``, the observations for ``observe``). Raises MendError with the worker's last
    stderr line when it fails.

    The process is a child forked from the warm worker (:mod:`mend._warm`: a server that has
    imported torch, the verifier and transformers' core, never a model file or user code), so each request
    still starts from a fresh module state with its own import overlay, without paying
    torch's import again; a request whose overlay replaces a preloaded module runs in a
    fresh interpreter. ``MEND_WORKERS=fresh`` runs each request
    in a new interpreter instead (the reference path)."""
    result = run_workers([(request, tag)], tmp)[0]
    if isinstance(result, MendError):
        raise result
    return result


def run_workers(requests: list[tuple[dict, str]], tmp: Path) -> list:
    """:func:`run_worker` for several independent requests at once, each in its own
    process (at most :func:`mend._warm.jobs` at a time, in the order given: put the longest
    first). Returns, in the same order, each result or the MendError it failed with; the
    caller decides which failure counts, as if it had run them one after another."""
    return start_workers(requests, tmp).results()


def start_workers(requests: list[tuple[dict, str]], tmp: Path) -> "Started":
    """Submit ``requests`` to the warm server now and return at once; :meth:`Started.results`
    waits for them (what :func:`run_workers` returns). Lets a caller start a run it will
    probably need (mend fix: the candidate's Inductor run while its facts are traced) and
    drop it unread when it is not needed. With ``MEND_WORKERS=fresh`` nothing starts
    before :meth:`Started.results` (the reference path stays one interpreter per request)."""
    staged = []
    for request, tag in requests:
        req = Path(tmp) / f"{tag}.json"
        request = {**request, "out": str(Path(tmp) / f"{tag}.out")}
        req.write_text(json.dumps(request))
        staged.append((request, req, Path(tmp) / f"{tag}.log"))
    ids = None
    if os.environ.get("MEND_WORKERS", "warm") != "fresh":
        ids = [_WarmServer.submit({"req": str(req), "env": worker_env(), "cwd": str(ROOT), "log": str(log)})
               for _, req, log in staged]
    return Started(staged, ids)


class Started:
    """Requests submitted by :func:`start_workers`, not yet collected."""

    def __init__(self, staged: list, ids: list[int] | None) -> None:
        self.staged, self.ids = staged, ids

    def results(self) -> list:
        import torch

        staged = self.staged
        codes: list = [None] * len(staged)
        if self.ids is not None:
            from mend._warm import STALE

            for k, job_id in enumerate(self.ids):
                code = _WarmServer.wait(job_id)
                if code != STALE:  # else the overlay replaces a module the warm worker preloaded
                    codes[k] = (code, staged[k][2].read_text(errors="replace") if staged[k][2].exists() else "")
        fresh = [k for k, c in enumerate(codes) if c is None]
        if fresh:
            from concurrent.futures import ThreadPoolExecutor

            from mend._warm import jobs

            def interpreter(k: int):
                proc = subprocess.run([sys.executable, "-m", "mend.worker", str(staged[k][1])], capture_output=True,
                                      text=True, env=worker_env(), cwd=str(ROOT))
                return proc.returncode, proc.stderr

            with ThreadPoolExecutor(max_workers=jobs()) as pool:
                for k, code in zip(fresh, pool.map(interpreter, fresh)):
                    codes[k] = code
        results = []
        for (request, _, _), (code, stderr) in zip(staged, codes):
            if code != 0:
                tail = stderr.strip().splitlines()[-1:] or [f"(no output; exit code {code})"]
                prefix = f"{InputsRejected.__module__}.{InputsRejected.__name__}: "
                if tail[0].startswith(prefix) and request.get("overlay"):  # the candidate raised, not the worker
                    results.append(InputsRejected(tail[0][len(prefix):], ""))
                    continue
                results.append(MendError(f"verification worker failed for {request['target']}: {tail[0]}"))
            elif request["action"] in ("scan", "facts", "time"):
                results.append(json.loads(Path(request["out"]).read_text()))
            else:
                results.append(torch.load(request["out"], weights_only=False))
        return results

    def drop(self) -> None:
        """Not needed after all: its replies are discarded when they come (the children run
        to their end; killing one mid-compile could leave Inductor's cache half written)."""
        for job_id in self.ids or ():
            if _WarmServer.done.pop(job_id, None) is None:  # not answered yet
                _WarmServer.discard.add(job_id)


class _WarmServer:
    """The ``python -m mend._warm`` process of this mend run (started on first use, or by
    :meth:`start` ahead of time, ended when mend exits). Jobs are submitted and their exit
    codes collected by id; the server runs each in a freshly forked child."""

    proc = None
    pending: dict = {}   # job id -> job, until its reply is read
    done: dict = {}      # job id -> exit code, replies read while waiting for another
    discard: set = set()  # job ids whose replies nobody will read
    next_id = 0

    @classmethod
    def start(cls) -> None:
        """Start the server now (it imports torch and transformers for about 9 s on 2 cores),
        so that it is ready when the first candidate is verified. No-op when running."""
        if os.environ.get("MEND_WORKERS", "warm") == "fresh":
            return
        if cls.proc is None or cls.proc.poll() is not None:
            cls.proc = subprocess.Popen([sys.executable, "-m", "mend._warm"], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True, cwd=str(ROOT), env=worker_env())
            atexit.register(cls.stop)

    @classmethod
    def _send(cls, job_id: int, job: dict) -> None:
        cls.start()
        try:
            cls.proc.stdin.write(json.dumps({**job, "id": job_id}) + "\n")
            cls.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            pass  # the server died: wait() notices and starts it again

    @classmethod
    def submit(cls, job: dict) -> int:
        cls.next_id += 1
        cls.pending[cls.next_id] = job
        cls._send(cls.next_id, job)
        return cls.next_id

    @classmethod
    def wait(cls, job_id: int) -> int:
        """The exit code of job ``job_id``. A server that died (killed, out of memory) is
        started again once and given the jobs it had not answered."""
        restarted = False
        while job_id not in cls.done:
            try:
                line = cls.proc.stdout.readline()
            except (OSError, ValueError):
                line = ""
            if line:
                reply = json.loads(line)
                cls.pending.pop(reply["id"], None)
                if reply["id"] in cls.discard:
                    cls.discard.discard(reply["id"])
                else:
                    cls.done[reply["id"]] = int(reply["code"])
                continue
            cls.stop()
            if restarted:
                cls.pending.clear()
                raise MendError("the warm verification worker stopped (rerun with MEND_WORKERS=fresh)")
            restarted = True
            for pending_id, job in list(cls.pending.items()):
                if pending_id in cls.discard:  # nobody waits for it
                    del cls.pending[pending_id]
                    cls.discard.discard(pending_id)
                else:
                    cls._send(pending_id, job)
        return cls.done.pop(job_id)

    @classmethod
    def stop(cls) -> None:
        if cls.proc is not None and cls.proc.poll() is None:
            if set(cls.pending) <= cls.discard:
                # nothing left or only dropped runs (their children die too): nobody reads a
                # reply, and the server's own interpreter teardown (about 1 s) is not waited for
                cls.proc.kill()
            else:
                cls.proc.stdin.close()
            try:
                cls.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                cls.proc.kill()
        cls.proc = None
        for job_id in cls.discard:  # never to be sent again
            cls.pending.pop(job_id, None)
        cls.discard.clear()


def _observe_all(request: dict) -> dict:
    import torch

    from mend import validation_runtime
    from mend.targets import load_target
    from verifier import forcing
    from verifier.differential import flatten, observe

    target = load_target(request["target"])
    model = validation_runtime.install(target.model)
    if request.get("compiled"):
        model = torch.compile(model, backend=request.get("backend", "eager"))
    inputs = torch.load(request["inputs"], weights_only=False)[:request.get("limit")]
    # natural, then each predicate forced both ways with what reaches it (verifier.forcing.settings)
    settings = forcing.settings(request.get("force", []))
    out = []
    for item in inputs:
        args, kwargs = item if isinstance(item, (tuple, list)) else ((), item)  # (args, kwargs), or kwargs
        # the differential test's autocast leg (verifier.legs.under_autocast)
        device = next((t.device.type for t in flatten([args, kwargs])), "cpu")
        amp = torch.autocast(device, dtype=getattr(torch, request["autocast"])) if request.get("autocast") else _Null()
        for setting in settings:
            with forcing.forced_all(setting), amp:
                result, stdout, warned, records, _, buffers, after, aliases, attrs, *py_state = observe(
                    model, tuple(args), kwargs, grad=False)
            if not (isinstance(result, tuple) and result and result[0] == "raised"):
                result = [t.detach().clone() for t in flatten(result)]
            out.append({"setting": [[k, v] for k, v in setting.items()],
                        "obs": (result, stdout, warned, records, None, buffers, after, aliases, attrs, *py_state)})
    return {"observations": out, "seen": {str(k): sorted(forcing.seen(k) - {None}) for k in request.get("force", [])}}


class _Null:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def _scan(request: dict) -> dict:
    from mend.detect import display_path
    from mend.scan import scan
    from mend.targets import load_target

    result = scan(load_target(request["target"]))
    doc = result.to_json()
    root = Path(request["overlay"]).resolve() if request.get("overlay") else None
    for site, raw in zip(doc["sites"], result.sites):
        path = Path(raw.file)
        if root is not None and path.is_relative_to(root):
            site["file"] = str(path.relative_to(root))
            site["overlay"] = True
        site["abs_file"] = raw.file
        site["display"] = display_path(raw.file)
        for frame in site.get("stack", []):   # the package's path, as for an installed file, not the scratch copy
            if root is not None and Path(frame["file"]).is_absolute() and Path(frame["file"]).is_relative_to(root):
                frame["file"] = str(Path(frame["file"]).relative_to(root))
    return doc


def _facts(request: dict) -> dict:
    import importlib.util

    from mend.targets import load_target
    from verifier.facts import collect_facts

    target = load_target(request["target"])
    spec = importlib.util.find_spec(request["module"])
    file = spec.origin if spec else request["file"]
    return collect_facts(target.model, target.args, target.kwargs, file, request["facts"])


def _time(request: dict) -> dict:
    from mend.pipeline.executors import install_runtimes
    from mend.pipeline.timing import steady_ms
    from mend.targets import load_target

    target = load_target(request["target"])
    return {"ms": steady_ms(install_runtimes(target.model), target.args, target.kwargs)}


def main(argv: list[str]) -> int:
    import torch

    request = json.loads(Path(argv[1]).read_text())
    if request.get("overlay"):
        from mend.overlay import activate

        activate(request["overlay"])
    torch.set_num_threads(1)
    try:
        return _serve(request)
    except InputsRejected as exc:
        if not request.get("overlay"):
            raise
        # the original ran on these inputs when the target was loaded: here it is the
        # rewritten source that raises, and the decline should say so
        raise InputsRejected(f"{request['target']}: with the rewritten source the model raised on its example "
                             f"inputs, which the original runs on: {exc.cause}", exc.cause) from None


def _serve(request: dict) -> int:
    import torch

    action = request["action"]
    if action == "scan":
        Path(request["out"]).write_text(json.dumps(_scan(request)))
    elif action == "facts":
        Path(request["out"]).write_text(json.dumps(_facts(request)))
    elif action == "time":
        Path(request["out"]).write_text(json.dumps(_time(request)))
    elif action == "observe":
        # forced predicates and drawn inputs recompile the frame: stay compiled past Dynamo's
        # default limit (8), or the "compiled" runs would silently run eagerly
        torch._dynamo.config.recompile_limit = 64
        torch.save(_observe_all(request), request["out"])
    else:
        print(f"mend.worker: unknown action {action!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
