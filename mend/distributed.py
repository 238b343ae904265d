"""Batches on Ray (``mend scan``/``mend fix`` ``--ray [ADDRESS]``): one Ray task per target.

The driver (the ``mend`` process) connects to a cluster, submits every target of the batch
as a task, shows progress as tasks finish (done, left, failed, as the local loop does) and
yields the outcomes in the order of the specs, whatever order the tasks finish in.

* A task runs ``run_one(spec)`` on a node and returns what it returned (a ScanResult, or
  for ``mend fix`` the FixResult with the files it wrote, relative path -> bytes): nothing
  is written to the driver's filesystem from a node. The driver writes ``mend fix``'s files
  atomically under DIR/<target>/ (:func:`fix_parts`).
* A task runs in the driver's working directory when its node has that folder (one machine,
  a shared filesystem), else in its own (a runtime_env ``working_dir``): FILE.py and
  MODULE:FACTORY targets resolve on the node, so every node needs the same files and the
  same packages (mend, torch, transformers) as the driver.
* A task whose worker dies (killed, out of memory, node lost) is retried once (Ray's
  ``max_retries=1``), then recorded as that target's failure (``worker died: ...``); an
  error of the target itself (a MendError, or a crash in mend) is not retried and is
  recorded as the local loop records it. The batch goes on.

Ray is an optional extra (``pip install 'graphmend[ray]'``); nothing here imports it until
a batch runs with ``--ray``.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
import threading
from pathlib import Path

import click

from mend.errors import MendError, target_failure

INSTALL = "pip install 'graphmend[ray]'"
# auto, local, ray://HOST:PORT (Ray Client), HOST:PORT or [IPv6]:PORT (a head's GCS)
_ADDRESS = re.compile(r"auto|local|ray://\S+|[\w.-]+:\d+|\[[0-9A-Fa-f:.]+\]:\d+")
_DIED = ("WorkerCrashedError", "OutOfMemoryError", "NodeDiedError", "LocalRayletDiedError")


def check_address(ctx, param, value: str | None) -> str | None:
    """click callback of ``--ray``: ``value`` unchanged (None: no ``--ray``; "": ``--ray``
    alone). Raises click.BadParameter (exit 2) for a value that is no Ray address: most
    often a target that ``--ray`` took as its ADDRESS."""
    if value and not _ADDRESS.fullmatch(value):
        raise click.BadParameter(f"{value!r} is not a Ray address (auto, local, HOST:PORT, ray://HOST:PORT). "
                                 "--ray takes the word after it as ADDRESS: give --ray after the targets, "
                                 "or --ray=auto", ctx=ctx, param=param)
    return value


def ray_option(f):
    """The ``--ray [ADDRESS]`` option of ``mend scan`` and ``mend fix``."""
    return click.option("--ray", "ray", is_flag=False, flag_value="", default=None, metavar="[ADDRESS]",
                        callback=check_address,
                        help="Run the batch as Ray tasks, one per target: --ray alone starts a local cluster "
                        "(or joins RAY_ADDRESS), --ray ADDRESS joins a cluster (auto, ray://HEAD:10001). Needs "
                        f"{INSTALL}; the nodes need the same files and packages (see README).")(f)


def _import_ray():
    try:
        import ray
    except ImportError as exc:
        raise MendError(f"--ray: Ray is not installed ({exc}); install it with {INSTALL}") from exc
    return ray


class _OwnThreadStdout:
    """``sys.stdout`` while a batch runs: the thread that runs the batch writes to the real
    stdout (the table, the JSON), every other thread to stderr. Ray's driver prints worker
    logs and its error messages (``(raylet) A worker died ...``) to ``sys.stdout`` from its
    own threads; they must not end up inside ``--json`` or ``--sarif`` output."""

    def __init__(self, real):
        self._real, self._owner = real, threading.get_ident()

    def _to(self):
        return self._real if threading.get_ident() == self._owner else sys.stderr

    def write(self, text):
        return self._to().write(text)

    def flush(self):
        self._to().flush()

    def __getattr__(self, name):
        return getattr(self._real, name)


@contextlib.contextmanager
def _connected(ray, address: str):
    """Ray, connected to ``address`` ("": ``ray.init()``, a local cluster or RAY_ADDRESS) for
    the duration, unless this process is connected already (then it stays connected).
    Raises MendError when the cluster cannot be reached."""
    import logging

    owned = not ray.is_initialized()
    real = sys.stdout
    sys.stdout = _OwnThreadStdout(real)
    try:
        if owned:
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    ray.init(address=address or None, logging_level=logging.WARNING)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                where = f"--ray {address}" if address else "--ray"
                raise MendError(f"{where}: cannot start or reach a Ray cluster: {_one_line(exc)}") from exc
        try:
            yield
        finally:
            if owned:
                with contextlib.redirect_stdout(sys.stderr):  # shutdown prints Ray's last worker lines
                    ray.shutdown()
    finally:
        sys.stdout = real


def _one_line(exc: BaseException, limit: int = 600) -> str:
    text = " ".join(str(exc).split())
    return text if len(text) <= limit else text[:limit] + " ..."


def _run_on_node(run_one, spec: str, cwd: str):
    """The body of a task: ``(None, run_one(spec))``, or ``(message, None)`` when the target
    failed (a MendError or a crash in mend, recorded as the local loop records them; an
    exception is not raised, so that Ray does not retry it)."""
    import ray

    here = os.getcwd()
    if not (ray.get_runtime_context().runtime_env or {}).get("working_dir") and os.path.isdir(cwd):
        os.chdir(cwd)  # relative FILE.py targets and MODULE:FACTORY imports, as on the driver
    try:
        with contextlib.redirect_stdout(sys.stderr):
            return None, run_one(spec)
    except Exception as exc:  # noqa: BLE001 - recorded as the local loop records it
        return target_failure(spec, exc), None
    finally:
        os.chdir(here)


def _failure(ray, spec: str, exc: Exception) -> str:
    """A target's failure message for an error Ray raised instead of the task's result."""
    if isinstance(exc, ray.exceptions.RayTaskError):  # the task did not get to run_one: its arguments, its result
        cause = exc.cause if isinstance(getattr(exc, "cause", None), BaseException) else exc
        return f"{spec}: internal error on the Ray worker: {type(cause).__name__}: {_one_line(cause)}"
    if type(exc).__name__ in _DIED:
        return f"{spec}: worker died (after 1 retry): {type(exc).__name__}: {_one_line(exc)}"
    return f"{spec}: ray: {type(exc).__name__}: {_one_line(exc)}"


def each_target(specs: list[str], verb: str, run_one, address: str, *, finish=None, progress):
    """Run ``run_one(spec)`` as a Ray task for each spec; yields ``(spec, result, None)`` or
    ``(spec, None, message)`` in the order of ``specs``, as ``mend.cli._each_target`` does.

    ``run_one`` must pickle (cloudpickle: closures too) and its result too; ``finish(spec,
    value)``, when given, runs on the driver as each task's value arrives and its return is
    the result (a MendError or OSError there is that target's failure). ``address``: "" for
    ``ray.init()``, else ``ray.init(address=address)``. ``progress()`` gives the rich Progress
    the local loop uses (done, left, failed). Raises MendError when Ray is not installed or no cluster can be reached."""
    ray = _import_ray()
    with _connected(ray, address):
        task = ray.remote(max_retries=1, retry_exceptions=False)(_run_on_node)
        work, cwd = ray.put(run_one), os.getcwd()
        pending = {task.options(name=f"mend {verb} {spec}").remote(work, spec, cwd): spec for spec in specs}
        outcomes, failed, nxt = {}, 0, 0
        with progress() as bar_progress:
            bar = bar_progress.add_task(f"{verb} on Ray", total=len(specs), failed=0)
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                spec = pending.pop(ref)
                try:
                    error, value = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    error, value = _failure(ray, spec, exc), None
                if error is None and finish is not None:
                    try:
                        value = finish(spec, value)
                    except Exception as exc:  # noqa: BLE001 - that target's failure
                        error, value = target_failure(spec, exc), None
                outcomes[spec] = (spec, value, error)
                failed += error is not None
                bar_progress.update(bar, advance=1, failed=failed)
                while nxt < len(specs) and specs[nxt] in outcomes:
                    yield outcomes.pop(specs[nxt])
                    nxt += 1


def fix_parts(one, root: Path, slug):
    """``(on_node, finish)`` for a ``mend fix`` batch on Ray. ``one(spec, out, html)`` is the
    ``mend fix`` closure (run the pipeline, emit into ``out``); ``on_node(spec)`` runs it on a
    node into a temporary folder and returns ``(FixResult, {relative path: bytes}, folder)``;
    ``finish(spec, value)`` on the driver writes each file atomically under
    ``root/slug(spec)/`` (a certificate's path to the original file re-based to where it now
    lies, and re-sealed), then the review page, and returns ``(folder, res, written paths)``
    as the local batch's step does. Raises MendError (in ``finish``) for a file that is
    read-only or cannot be written."""
    return _FixOnNode(one), _FixFinish(Path(root), slug)


class _FixOnNode:
    def __init__(self, one):
        self.one = one

    def __call__(self, spec: str):
        with tempfile.TemporaryDirectory(prefix="mend-ray-") as tmp:
            tmp = os.path.realpath(tmp)
            res, written = self.one(spec, tmp, None)
            files = {}
            for path in written:
                rel = os.path.relpath(path, tmp)
                if rel.startswith(os.pardir):
                    raise MendError(f"{spec}: wrote {path} outside its output folder")
                files[rel] = Path(path).read_bytes()
        return res, files, tmp


class _FixFinish:
    def __init__(self, root: Path, slug):
        self.root, self.slug = root, slug

    def __call__(self, spec: str, value):
        from mend.pipeline.emit import write_atomic
        from mend.review import write_html

        res, files, node_dir = value
        folder = self.root / self.slug(spec)
        written = []
        for rel, data in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            text = data.decode("utf-8")
            if Path(rel).parent.name == "certificates" and rel.endswith(".json"):
                text = _rebase_certificate(text, os.path.join(node_dir, rel), path)
            write_atomic(path, text)  # emit's: the same read-only and unwritable errors as a local batch
            written.append(str(path))
        write_html(res, folder / "review.html", written)
        return folder, res, written


def _rebase_certificate(text: str, node_cert: str, cert: Path) -> str:
    """The certificate ``text`` written at ``node_cert`` on a node, as it reads at ``cert``:
    its ``paths.original`` (relative to the certificate's folder) re-based and the digest
    re-sealed; the other paths lie inside the output folder and move with it."""
    from verifier.certs import dumps, relpath_from, seal

    doc = json.loads(text)
    original = (doc.get("paths") or {}).get("original")
    if not original or os.path.isabs(original):
        return text
    source = os.path.normpath(os.path.join(os.path.dirname(node_cert), original))
    rebased = relpath_from(cert, source)
    if rebased == original:
        return text
    doc["paths"]["original"] = rebased
    return dumps(seal(doc))
