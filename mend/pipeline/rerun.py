"""``mend cert verify --rerun``: replay a certificate's differential test with the executor
that made it (``executor`` in the certificate), from the recorded seed and number of
examples. Passed to :func:`verifier.certs.verify_file` by the CLI."""
from __future__ import annotations

import tempfile
from pathlib import Path

import torch

from mend.pipeline.executors import (build_pair, compare_runs, draw_inputs, factory_of, install_runtimes,
                                     model_maker)
from mend.errors import MendError
from mend.targets import load_target
from verifier.certs import resolve, sha256_file
from verifier.differential import Mismatch, differential_test
from verifier.legs import other_dtypes


def rerun(path: Path, doc: dict) -> tuple[bool, str]:
    """(passed, what was run or why it failed) for the certificate ``doc`` read from ``path``."""
    ev = doc["evidence"]
    seed, n = int(ev["hypothesis_seed"]), max(int(ev["examples"]) - 1, 1)
    mended = resolve(path, (doc.get("paths") or {}).get("mended"))
    if doc.get("executor") == "overlay":
        return _rerun_overlay(doc, mended, seed, n)
    return _rerun_in_process(path, doc, mended, seed, n)


def _rerun_overlay(doc: dict, mended: Path | None, seed: int, n: int) -> tuple[bool, str]:
    from mend.worker import run_workers

    mended = mended.resolve() if mended else None
    root = Path(str(mended)[: -len(doc["file"])]) if mended and str(mended).endswith(doc["file"]) else None
    if root is None:
        return False, "the mended file is not under its package path (DIR/<package path>)"
    target = doc["target"]
    t = load_target(target)
    with tempfile.TemporaryDirectory(prefix="mend-rerun-") as tmpname:
        tmp = Path(tmpname)
        inputs = draw_inputs(t.args, t.kwargs, seed, n)
        torch.save(inputs, tmp / "inputs.pt")
        base = {"target": target, "action": "observe", "inputs": str(tmp / "inputs.pt"), "force": []}
        comp, ref, emit = run_workers([({**base, "overlay": str(root), "compiled": True}, "compiled"),
                                       (dict(base), "ref"), ({**base, "overlay": str(root)}, "eager")], tmp)
        for run in (ref, emit, comp):  # the first failure in the order the checks read them
            if isinstance(run, MendError):
                raise run
        try:
            worst = max(compare_runs(ref, emit, exact=True), compare_runs(ref, comp, exact=False))
        except Mismatch as exc:
            return False, str(exc)
    return True, f"{len(inputs)} inputs, seed {seed}, eager and compiled agree (max abs error {worst:.3g})"


def _rerun_in_process(path: Path, doc: dict, mended: Path | None, seed: int, n: int) -> tuple[bool, str]:
    paths = doc.get("paths") or {}
    orig = resolve(path, paths.get("original"))
    if orig is None or not orig.is_file():
        return False, "the original file is not available (--write replaced it; use --out to keep it)"
    if sha256_file(orig) != doc["sha256_original"]:
        return False, "the original file changed"
    if mended is None or not mended.is_file():
        return False, "the mended file is not available"
    factory = factory_of(doc["target"])
    mods, models = build_pair(orig, mended, model_maker(factory))
    kwargs: dict = {}
    if factory is not None:  # the factory's example inputs, positional and keyword
        torch.manual_seed(0)
        built = getattr(mods[0], factory)()
        args, traps = tuple(built[1]), []
        kwargs = dict(built[2]) if len(built) > 2 and built[2] else {}
    else:
        args = tuple(mods[0].get_inputs())
        traps = [tuple(mods[0].get_trap_inputs())] if hasattr(mods[0], "get_trap_inputs") else []
    res = differential_test(models[0], models[1], args, example_kwargs=kwargs, extra_inputs=traps, seed=seed,
                            max_examples=n, prepare=install_runtimes, other_dtypes=other_dtypes(doc.get("obligations") or []))
    if not res.passed:
        return False, f"{res.reason} on {res.counterexample}"
    return True, f"{res.examples} inputs, seed {seed}, eager and compiled agree (max abs error {res.max_abs_error:.3g})"
