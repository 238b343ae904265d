"""mend fix: plan -> verify -> emit for the fixable breaks of a single-file target.

Each candidate rewrite (one site at a time, from the rule's ``rewrite``) is verified
differentially against the version before it (both predicate outcomes covered), and the
final mended file is checked against the original once more. After each round the
mended file is scanned again, since breaks can hide behind the first.
"""
from __future__ import annotations

import difflib
import hashlib
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
import torch

from mend.detect import display_path
from mend import validation_runtime
from mend.errors import MendError, TargetError
from mend.rules import RULES, Decline
from mend.scan import ScanResult, scan
from mend.targets import Target, load_file_module, load_target
from verifier.differential import differential_test
from verifier.forcing import instrument
from verifier.worker import worker_env
from verifier.obligations import LEVELS, examples_for, facts_in_process, facts_out_of_process, prove


@dataclass
class FixResult:
    target: str
    file: Path
    original: str
    mended: str
    before: ScanResult
    after: ScanResult
    rewrites: list[dict] = field(default_factory=list)
    declined: list[dict] = field(default_factory=list)

    installed = False  # the user's own file: --write may replace it

    @property
    def originals(self) -> dict[str, str]:
        return {display_path(str(self.file)): self.original}

    @property
    def files(self) -> dict[str, str]:
        return {display_path(str(self.file)): self.mended} if self.mended != self.original else {}

    def diff(self) -> str:
        name = display_path(str(self.file))
        return "".join(difflib.unified_diff(self.original.splitlines(True), self.mended.splitlines(True),
                                            *_labels(name)))


def factory_of(spec: str) -> str | None:
    """The FACTORY of a FILE.py:FACTORY spec; None for FILE.py (and hf:)."""
    head, sep, tail = spec.rpartition(":")
    return tail if sep and head and not spec.startswith("hf:") and tail.isidentifier() else None


def model_maker(factory: str | None):
    """How a target file builds its model: ``Model(*get_init_inputs())``, or the model its
    ``factory()`` returns (FILE:FACTORY). Called on the original and on each candidate."""
    def make(mod):
        if factory is not None:
            return getattr(mod, factory)()[0]
        init = tuple(mod.get_init_inputs()) if hasattr(mod, "get_init_inputs") else ()
        return mod.Model(*init)
    return make


def _labels(name: str) -> tuple[str, str]:
    """Unified-diff labels: ``a/REL``/``b/REL``, or the absolute path twice (no ``a//abs``)."""
    return (name, name) if os.path.isabs(name) else (f"a/{name}", f"b/{name}")


def build_pair(orig_path: Path, cand_path: Path, make):
    """Both models from their files (``make(module)``), the candidate loaded with the
    original's weights."""
    # one module name for both: names derived from __name__ (loggers) must agree, as they
    # would when the mended file replaces the original
    mods = [load_file_module(p, "_mend_under_test") for p in (orig_path, cand_path)]
    models = []
    for mod in mods:
        torch.manual_seed(0)
        models.append(make(mod).eval())
    models[1].load_state_dict(models[0].state_dict(), strict=True)
    for model in models:  # restores exceptions that predicated validation turned into _assert_async
        validation_runtime.install(model)
    return mods, models


_SIMPLE = (int, float, bool, str, type(None))


def _state_snapshot(model: torch.nn.Module) -> dict:
    snap = {}
    for name, mod in model.named_modules():
        for key, value in vars(mod).items():
            if isinstance(value, _SIMPLE):
                snap[(name, key)] = value
        for key, buf in mod.named_buffers(recurse=False):
            snap[(name, "buffer:" + key)] = buf.detach().clone()
    return snap


def _mutates_state(build) -> bool:
    """Does a forward change module state (buffers, or plain Python attributes such as
    counters), in eval or in training mode? Runs a fresh build on the example inputs."""
    import contextlib
    import io
    import logging
    import warnings

    target = build()
    model = target.model
    for phase in (False, True):
        model.train(phase)
        before = _state_snapshot(model)
        with torch.no_grad(), contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            logging.disable(logging.CRITICAL)
            try:
                model(*target.args, **target.kwargs)
            except Exception:
                pass
            finally:
                logging.disable(logging.NOTSET)
        after = _state_snapshot(model)
        if before.keys() != after.keys() or any(
                not (torch.equal(before[k], after[k]) if isinstance(before[k], torch.Tensor) else before[k] == after[k])
                for k in before):
            return True
    return False


def _state_screen(build, res):
    """Predicated validation moves a raise into the graph. A compiled graph applies state
    updates (buffer writes, Python attribute changes) at other points than eager code
    does -- inductor may apply later ones before the failure surfaces, and Python-side
    updates made before the check are lost when the graph raises -- so a model whose
    forward changes any state is declined (obligation state-unchanged-on-raise)."""
    if _mutates_state(build):
        return Decline("predicated-validation", "state-unchanged-on-raise cannot be shown: the model's forward "
                       "changes module state (a buffer or a Python attribute), and a check moved into the compiled "
                       "graph could let that update happen, or not happen, differently from eager on a failing call")
    return res


UNFORCEABLE = ("the branch's predicate could not be instrumented for forcing, so both of its outcomes "
               "cannot be verified")


def _is_branch(code: str, line: int) -> bool:
    """An ``if`` starts on ``line``: its rewrite must be verified on both outcomes."""
    return instrument(code, line) is not None


def instrumented_pair(rewrite, current: str, line: int):
    """(instrumented current, instrumented candidate) with the site's predicate forceable,
    or (None, None) when the rule does not rewrite any instrumented form."""
    for last_and in (False, True):
        inst = instrument(current, line, last_and)
        if inst is None:
            continue
        res = rewrite(cst.parse_module(inst), line)
        if not isinstance(res, Decline):
            return inst, res.code
    return None, None


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fix(spec: str, *, seed: int = 0, max_examples: int = 30, max_rounds: int = 4,
        verify: str = "standard") -> FixResult:
    """Rewrite the fixable breaks of the target ``spec``.

    FILE.py, or FILE.py:FACTORY with positional inputs: sites in that file, verified in
    this process (the factory builds the original and every candidate). hf: and
    MODULE:FACTORY targets go to :func:`fix_installed` (fresh interpreters, import overlay).
    ``verify`` (fast, standard, strict) decides how each candidate's proof obligations
    weigh (:func:`verifier.obligations.verdict`). Raises MendError for a FILE:FACTORY whose
    factory returns keyword inputs.
    """
    if verify not in LEVELS:
        raise MendError(f"--verify {verify}: choose one of {', '.join(LEVELS)}")
    target = load_target(spec)
    if spec.startswith("hf:") or target.user_file is None:  # hf: and MODULE:FACTORY: through the overlay
        return fix_installed(target, seed=seed, max_examples=max_examples, max_rounds=max_rounds, verify=verify)
    max_examples = examples_for(verify, max_examples, installed=False)
    factory = factory_of(spec)
    if factory is not None and target.kwargs:
        raise MendError(f"{spec}: the factory returns keyword inputs ({', '.join(target.kwargs)}); mend fix verifies "
                        "file targets on positional inputs only: return (model, args)")
    path = target.user_file
    original = path.read_text(encoding="utf-8")
    load_file_module(path, f"_mend_orig_{abs(hash(str(path)))}")
    make = model_maker(factory)
    spec_of = (lambda p: f"{p}:{factory}") if factory else str
    before = scan(target)
    current = original
    rewrites, declined, tried = [], [], set()
    with tempfile.TemporaryDirectory(prefix="mend-") as tmp:
        cur_path = Path(tmp) / f"r0_{path.name}"
        cur_path.write_text(current)
        result = before
        for rnd in range(max_rounds):
            progressed = False
            cur_target = result if rnd == 0 else scan(load_target(spec_of(cur_path)))
            for site in cur_target.sites:
                scan_file = path if rnd == 0 else cur_path
                if Path(site.file).resolve() != scan_file.resolve():
                    if site.fixable_by:
                        declined.append({"file": site.display_file, "line": site.line, "rule": site.fixable_by,
                                         "reason": "the site is outside the target's own file"})
                    continue
                key = (site.source, site.fixable_by)
                if not site.fixable_by or key in tried:
                    continue
                tried.add(key)
                rule = RULES[site.fixable_by]
                rewrite = getattr(rule, "rewrite", None)
                where = f"{display_path(str(path))}:{_orig_line(original, site.source, site.line)}"
                if rewrite is None:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": "the rule's rewrite is not available yet"})
                    continue
                res = rewrite(cst.parse_module(current), site.line)
                if not isinstance(res, Decline) and site.fixable_by == "predicated-validation":
                    res = _state_screen(lambda: load_target(spec_of(cur_path)), res)
                if isinstance(res, Decline):
                    declined.append({"site": where, "rule": site.fixable_by, "reason": res.reason})
                    continue
                cand_path = Path(tmp) / f"r{len(rewrites) + 1}_{path.name}"
                cand_path.write_text(res.code)
                # verify on instrumented copies: the predicate at the site can be forced
                inst_cur, inst_cand = instrumented_pair(rewrite, current, site.line)
                force_lines = [site.line] if inst_cur else []
                if not inst_cur and _is_branch(current, site.line):
                    declined.append({"site": where, "rule": site.fixable_by, "reason": UNFORCEABLE})
                    continue
                proof = prove(site.fixable_by, res.obligations, level=verify, before=current, code=res.code,
                              facts_fn=lambda: facts_in_process(cand_path, "_mend_under_test", make, target.args,
                                                                target.kwargs, res.obligations, current, res.code))
                if not proof["accepted"]:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": proof["reason"],
                                     "failed_obligations": proof["failed"]})
                    continue
                ref_path, test_path = Path(tmp) / f"i{len(rewrites)}a_{path.name}", Path(tmp) / f"i{len(rewrites)}b_{path.name}"
                ref_path.write_text(inst_cur or current)
                test_path.write_text(inst_cand or res.code)
                try:
                    _, (m_cur, m_cand) = build_pair(ref_path, test_path, make)
                    _, (m_ref, m_emit) = build_pair(cur_path, cand_path, make)
                except (TargetError, RuntimeError) as exc:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": f"the rewritten file does not load: {exc}"})
                    continue
                evidence = differential_test(m_cur, m_cand, target.args, emitted=m_emit, reference=m_ref, force_lines=force_lines,
                                             extra_inputs=[target.trap_inputs] if target.trap_inputs else [],
                                             extra_edge_values=res.edge_values,  # a rule's constants
                                             seed=seed, max_examples=max_examples)
                if not evidence.passed:
                    declined.append({"site": where, "rule": site.fixable_by,
                                     "reason": f"differential test failed: {evidence.reason}",
                                     "counterexample": evidence.counterexample})
                    continue
                diff = "".join(difflib.unified_diff(current.splitlines(True), res.code.splitlines(True),
                                                    f"a/{path.name}", f"b/{path.name}"))
                rewrites.append({"rule": site.fixable_by, "file": display_path(str(path)), "site": where, "span": list(res.span),
                                 "detail": res.detail, "diff": diff, "obligations": proof["obligations"],
                                 "verification": proof["verification"], "evidence": evidence.to_json()})
                current, cur_path, progressed = res.code, cand_path, True
                break  # line numbers moved: rescan before the next site
            if not progressed:
                break
        after = scan(load_target(spec_of(cur_path)))
        after.target = spec
        for s in after.sites:  # report the user's file, not the scratch copy
            if Path(s.file) == cur_path:
                s.file = str(path)
    return FixResult(spec, path, original, current, before, after, rewrites, declined)


def _orig_line(original: str, source: str, fallback: int) -> int:
    """The site's line in the original file (rewrites above it may have moved it)."""
    for i, text in enumerate(original.splitlines(), 1):
        if text.strip() == source.strip():
            return i
    return fallback


def write_atomic(path: Path, text: str) -> None:
    """Replace ``path`` atomically (temp file in the same folder, then os.replace).
    Raises MendError when the file or its folder is not writable."""
    # the mode bits too: root passes os.access, yet a file marked read-only is the user's word
    if path.exists() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222):
        raise MendError(f"{path}: file is read-only; nothing was written (use the diff, or --out DIR)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".mend", dir=path.parent)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        os.replace(tmp, path)
    except OSError as exc:
        raise MendError(f"{path}: cannot write ({exc.strerror}); nothing was changed") from exc


def certificate(res, rw: dict, paths: dict | None = None) -> dict:
    """Certificate (schema mend/schemas/certificate.schema.json, version 0.2): the rule,
    site, diff, hashes of the original and mended file and where they are (``paths``,
    relative to the certificate's folder), each obligation with its SMT-LIB query, answer,
    solver and assumptions, the differential evidence, sealed with a digest
    (verifier/certs.py; re-checked by ``mend cert verify``)."""
    import hypothesis
    import z3

    from mend import __version__
    from verifier.certs import seal

    ver = rw.get("verification") or {"level": "fast", "use": "training and inference"}
    obligations = [{"result": "unknown", "smtlib": None, "solver": f"z3 {z3.get_full_version()}", "assumptions": [],
                    **o} for o in rw["obligations"]]
    return seal({"schema_version": "0.2", "rule": rw["rule"], "target": res.target, "file": rw["file"],
                 "site": rw["site"], "span": rw["span"], "diff": rw["diff"],
                 "sha256_original": _sha(res.originals[rw["file"]]), "sha256_mended": _sha(res.files[rw["file"]]),
                 "paths": {"mended": None, "original": None, "original_module": None, **(paths or {})},
                 "obligations": obligations, "verification": ver, "evidence": rw["evidence"],
                 "versions": {"torch": torch.__version__, "mend": __version__, "z3": z3.get_version_string(),
                              "hypothesis": hypothesis.__version__},
                 "breaks": {"before": res.before.graph_break_count, "after": res.after.graph_break_count}})


# -- targets whose source lives in installed packages (hf:, MODULE:FACTORY) -------------------


class ScanDoc:
    """A scan result read back from a worker's JSON (the mended library lives there)."""

    def __init__(self, doc: dict) -> None:
        from types import SimpleNamespace

        self.doc = doc
        self.graph_count = doc["graph_count"]
        self.graph_break_count = doc["graph_break_count"]
        self.sites = [SimpleNamespace(**s, display_file=s["file"]) for s in doc["sites"]]

    def to_json(self) -> dict:
        doc = {k: v for k, v in self.doc.items()}
        doc["sites"] = [{k: v for k, v in s.items() if k not in ("abs_file", "display", "overlay")} for s in self.doc["sites"]]
        return doc


def _worker(request: dict, tmp: Path, tag: str):
    """Run verifier.worker in a fresh interpreter; raise MendError with its stderr on failure."""
    import json
    import subprocess
    import sys

    req = tmp / f"{tag}.json"
    request["out"] = str(tmp / f"{tag}.out")
    req.write_text(json.dumps(request))
    proc = subprocess.run([sys.executable, "-m", "verifier.worker", str(req)], capture_output=True, text=True,
                          env=worker_env(), cwd=str(Path(__file__).resolve().parents[1]))
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1:] or ["(no output)"]
        raise MendError(f"verification worker failed for {request['target']}: {tail[0]}")
    if request["action"] == "scan":
        return json.loads(Path(request["out"]).read_text())
    return torch.load(request["out"], weights_only=False)


def _overlay(root: Path, files: dict[str, str]) -> Path:
    for rel, code in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(code)
    return root


def _draw_inputs(args: tuple, kwargs: dict, seed: int, n: int) -> list[tuple[tuple, dict]]:
    """The example ``(args, kwargs)`` and ``n`` more shaped like them, drawn by Hypothesis
    (edge values included)."""
    from hypothesis import HealthCheck, given, seed as hyp_seed, settings

    from verifier.differential import _inputs_strategy

    keys = list(kwargs)
    drawn: list[tuple[tuple, dict]] = [(tuple(args), dict(kwargs))]

    @hyp_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(_inputs_strategy(tuple(args) + tuple(kwargs[k] for k in keys), edge=True))
    def collect(values):
        drawn.append((tuple(values[:len(args)]), dict(zip(keys, values[len(args):]))))

    collect()
    return drawn[: n + 1]


def _compare_runs(ref: dict, got: dict, exact: bool, natural_only: bool = False, any_error: bool = False) -> float:
    from verifier.differential import compare

    worst = 0.0
    ref_obs = [o for o in ref["observations"] if not natural_only or o["setting"][0] is None]
    got_obs = got["observations"]
    if len(ref_obs) != len(got_obs):
        raise MendError("internal: observation counts differ")
    for r, g in zip(ref_obs, got_obs):
        worst = max(worst, compare(r["obs"], g["obs"], exact=exact, any_error=any_error))
    return worst


def fix_installed(target: Target, *, seed: int = 0, max_examples: int = 8, max_rounds: int = 4,
                  verify: str = "standard") -> FixResult:
    """Rewrite breaks inside installed packages: mended copies only, verified out of process.

    Each candidate is checked by fresh interpreters: the current version and the
    candidate, both instrumented so the predicate can be forced (eager, bit-exact); for a
    branch, the instrumented candidate again under ``torch.compile(backend="eager")``
    with the predicate forced both ways; and the emitted candidate under Inductor on every
    drawn input (natural predicates; against the current version under Inductor where
    Inductor itself departs from eager).
    """
    from verifier.differential import Mismatch

    max_examples = examples_for(verify, max_examples, installed=True)
    before = scan(target)
    files: dict[str, str] = {}     # package-relative path -> mended code
    originals: dict[str, str] = {}
    sources: dict[str, Path] = {}  # package-relative path -> the file it was read from
    rewrites, declined, tried = [], [], set()
    with tempfile.TemporaryDirectory(prefix="mend-") as tmpname:
        tmp = Path(tmpname)
        inputs_path = tmp / "inputs.pt"
        inputs = _draw_inputs(target.args, target.kwargs, seed, max_examples)
        torch.save(inputs, inputs_path)
        current_scan = ScanDoc(before.to_json())
        for s, raw in zip(current_scan.sites, before.sites):
            s.abs_file = raw.file
        n = 0
        for _ in range(max_rounds):
            progressed = False
            for site in current_scan.sites:
                rel = site.file
                key = (rel, site.source, site.fixable_by)
                if not site.fixable_by or key in tried:
                    continue
                tried.add(key)
                where = f"{rel}:{site.line}"
                if rel not in originals:
                    if not os.path.isabs(site.abs_file) or not Path(site.abs_file).is_file():
                        continue
                    source = Path(_installed_path(site.abs_file, rel, tmp))
                    why = _not_overlayable(source, rel)
                    if why:
                        declined.append({"site": where, "rule": site.fixable_by, "reason": why})
                        continue
                    originals[rel], sources[rel] = source.read_text(encoding="utf-8"), source
                current = files.get(rel, originals[rel])
                rewrite = getattr(RULES[site.fixable_by], "rewrite", None)
                res = rewrite(cst.parse_module(current), site.line) if rewrite else Decline(None, "no rewrite")
                if not isinstance(res, Decline) and site.fixable_by == "predicated-validation":
                    res = _state_screen(lambda: load_target(target.spec), res)
                if isinstance(res, Decline):
                    declined.append({"site": where, "rule": site.fixable_by, "reason": res.reason})
                    continue
                inst_cur, inst_cand = instrumented_pair(rewrite, current, site.line)
                force = [site.line] if inst_cur else []
                if not inst_cur and _is_branch(current, site.line):
                    declined.append({"site": where, "rule": site.fixable_by, "reason": UNFORCEABLE})
                    continue
                n += 1
                ref_dir = _overlay(tmp / f"ref{n}", {**files, rel: inst_cur or current})
                cand_dir = _overlay(tmp / f"cand{n}", {**files, rel: inst_cand or res.code})
                emit_dir = _overlay(tmp / f"emit{n}", {**files, rel: res.code})
                proof = prove(site.fixable_by, res.obligations, level=verify, before=current, code=res.code,
                              facts_fn=lambda: facts_out_of_process(target.spec, str(emit_dir), rel, res.obligations,
                                                                    current, res.code, tmp))
                if not proof["accepted"]:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": proof["reason"],
                                     "failed_obligations": proof["failed"]})
                    continue
                base = {"target": target.spec, "action": "observe", "inputs": str(inputs_path), "force": force}
                try:
                    ref = _worker({**base, "overlay": str(ref_dir)}, tmp, f"ref{n}")
                    cand = _worker({**base, "overlay": str(cand_dir)}, tmp, f"cand{n}")
                    # the default backend: a rewrite must survive Inductor's code generation too
                    # (graphs holding mend::capture have crashed it, see README)
                    emit = _worker({**base, "overlay": str(emit_dir), "force": [], "compiled": True,
                                    "backend": "inductor"}, tmp, f"emit{n}")
                    worst = _compare_runs(ref, cand, exact=True)
                    if force:  # the predicate forced both ways under torch.compile too: a rewrite
                        # may take effect only when compiling (torch.cond keeps the `if` for eager)
                        cand_c = _worker({**base, "overlay": str(cand_dir), "compiled": True, "backend": "eager"},
                                         tmp, f"candc{n}")
                        worst = max(worst, _compare_runs(ref, cand_c, exact=False))
                    try:
                        worst = max(worst, _compare_runs(ref, emit, exact=False, natural_only=True, any_error=True))
                    except Mismatch:
                        # Inductor itself departs from eager on some inputs (NaN positions
                        # where the inputs hold inf/NaN): the compiled candidate must then
                        # agree with the compiled current version instead
                        cur_dir = _overlay(tmp / f"cur{n}", {**files, rel: current})
                        ref_i = _worker({**base, "overlay": str(cur_dir), "force": [], "compiled": True,
                                         "backend": "inductor"}, tmp, f"cur{n}")
                        worst = max(worst, _compare_runs(ref_i, emit, exact=False, any_error=True))
                except Mismatch as exc:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": f"differential test failed: {exc}"})
                    continue
                except MendError as exc:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": str(exc)})
                    continue
                evidence = {"passed": True, "hypothesis_seed": seed, "examples": len(inputs),
                            "modes": ["eager", "compiled:inductor"] + (["compiled:eager-backend/forced"] if force else []),
                            "predicate_outcomes": {str(l): {"natural": ref["seen"].get(str(l), []), "forced": [False, True]}
                                                   for l in force},
                            "max_abs_error": worst, "counterexample": None, "reason": None}
                diff = "".join(difflib.unified_diff(current.splitlines(True), res.code.splitlines(True),
                                                    f"a/{rel}", f"b/{rel}"))
                rewrites.append({"rule": site.fixable_by, "file": rel, "site": where, "span": list(res.span),
                                 "detail": res.detail, "diff": diff, "obligations": proof["obligations"],
                                 "verification": proof["verification"], "evidence": evidence})
                files[rel] = res.code
                progressed = True
                break  # line numbers moved: rescan
            if not progressed:
                break
            current_scan = ScanDoc(_worker({"target": target.spec, "action": "scan",
                                            "overlay": str(_overlay(tmp / f"scan{n}", files))}, tmp, f"scan{n}"))
        after = current_scan if rewrites else ScanDoc(before.to_json())
    return InstalledFixResult(target.spec, files, originals, before, after, rewrites, declined, sources)


def _installed_path(abs_file: str, rel: str, tmp: Path) -> str:
    """The real file for ``rel`` (a later round's site may point into an overlay under ``tmp``)."""
    if Path(abs_file).as_posix().endswith(rel) and not Path(abs_file).resolve().is_relative_to(tmp.resolve()):
        return abs_file
    import importlib.util

    spec = importlib.util.find_spec(rel[:-3].replace("/", "."))
    return spec.origin


def _not_overlayable(source: Path, rel: str) -> str | None:
    """Why the import overlay could not load a mended copy of ``source`` as ``rel``, or None.

    The overlay serves module ``a.b.c`` from ``DIR/a/b/c.py``: the module that was
    imported from ``source`` must carry that name (a user module: imported from the
    working directory, as MODULE:FACTORY targets are)."""
    import sys

    name = rel[:-3].replace("/", ".") if rel.endswith(".py") else None
    mod = sys.modules.get(name) if name and not os.path.isabs(rel) else None
    if mod is None or not getattr(mod, "__file__", None) or Path(mod.__file__).resolve() != source.resolve():
        return (f"{source} is not the module `{name or rel}` the import overlay would replace (mend fix loads mended "
                "copies of modules imported from the working directory or from installed packages)")
    if source.name == "__init__.py":
        return "the site is in a package's __init__.py, which the import overlay does not replace"
    return None


@dataclass
class InstalledFixResult:
    """Like FixResult, for files inside installed packages (keyed by package path)."""

    installed = True
    target: str
    files: dict[str, str]
    originals: dict[str, str]
    before: ScanResult
    after: "ScanDoc"
    rewrites: list[dict]
    declined: list[dict]
    sources: dict[str, Path] = field(default_factory=dict)  # where each file was read from

    def in_place(self, rel: str) -> Path | None:
        """The user's own file behind ``rel`` (``--write`` may replace it); None inside
        installed packages, which are never edited."""
        from mend.detect import in_site_packages

        src = self.sources.get(rel)
        return src if src is not None and not in_site_packages(str(src)) else None

    def diff(self) -> str:
        return "".join("".join(difflib.unified_diff(self.originals[rel].splitlines(True), code.splitlines(True),
                                                    f"a/{rel}", f"b/{rel}")) for rel, code in self.files.items())
