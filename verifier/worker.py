"""Out-of-process runs for targets whose source lives in installed packages.

The parent process has the original library imported, so a mended copy can only be
loaded in a fresh interpreter with the import overlay active (:mod:`mend.overlay`).
``python -m verifier.worker REQUEST.json`` builds the target there and either scans it
or records its observable behaviour on a list of inputs (saved with ``torch.save``).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def worker_env() -> dict:
    """Environment of a verification interpreter: one intra-op thread, and the user's
    working directory importable, as ``mend`` made it for MODULE:FACTORY targets."""
    path = [os.getcwd(), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return dict(os.environ, OMP_NUM_THREADS="1", PYTHONWARNINGS="ignore", PYTHONPATH=os.pathsep.join(path))


def _observe_all(request: dict) -> list:
    import torch

    from mend import validation_runtime
    from mend.targets import load_target
    from verifier import forcing
    from verifier.differential import _flatten, _observe

    target = load_target(request["target"])
    model = validation_runtime.install(target.model)
    if request.get("compiled"):
        model = torch.compile(model, backend=request.get("backend", "eager"))
    inputs = torch.load(request["inputs"], weights_only=False)
    settings = [(None, None)] + [(line, v) for line in request.get("force", []) for v in (True, False)]
    out = []
    for item in inputs:
        args, kwargs = item if isinstance(item, (tuple, list)) else ((), item)  # (args, kwargs), or kwargs
        for line, value in settings:
            ctx = forcing.forced(line, value) if line is not None else _null()
            with ctx:
                result, stdout, warned, records, _, buffers, after = _observe(model, tuple(args), kwargs, grad=False)
            if not (isinstance(result, tuple) and result and result[0] == "raised"):
                result = [t.detach().clone() for t in _flatten(result)]
            out.append({"setting": [line, value], "obs": (result, stdout, warned, records, None, buffers, after)})
    return {"observations": out, "seen": {str(k): sorted(forcing.seen(k) - {None}) for k in request.get("force", [])}}


class _null:
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
    return doc


def main(argv: list[str]) -> int:
    import torch

    request = json.loads(Path(argv[1]).read_text())
    if request.get("overlay"):
        from mend.overlay import activate

        activate(request["overlay"])
    torch.set_num_threads(1)
    if request["action"] == "scan":
        Path(request["out"]).write_text(json.dumps(_scan(request)))
    else:
        torch.save(_observe_all(request), request["out"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
