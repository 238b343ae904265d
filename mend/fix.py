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

    def diff(self) -> str:
        name = display_path(str(self.file))
        return "".join(difflib.unified_diff(self.original.splitlines(True), self.mended.splitlines(True),
                                            f"a/{name}", f"b/{name}"))


def _build_pair(orig_path: Path, cand_path: Path, init: tuple):
    """Both models from their files, the candidate loaded with the original's weights."""
    mods = [load_file_module(p, f"_mend_{tag}_{abs(hash(str(p)))}") for tag, p in (("a", orig_path), ("b", cand_path))]
    models = []
    for mod in mods:
        torch.manual_seed(0)
        models.append(mod.Model(*init).eval())
    models[1].load_state_dict(models[0].state_dict(), strict=True)
    for model in models:  # restores exceptions that predicated validation turned into _assert_async
        validation_runtime.install(model)
    return mods, models


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def fix(spec: str, *, seed: int = 0, max_examples: int = 30, max_rounds: int = 4) -> FixResult:
    """Rewrite the fixable breaks of the single-file target ``spec`` (FILE.py).

    Raises MendError for targets that are not a single user file (hf: targets need the
    import overlay, not yet available).
    """
    target = load_target(spec)
    if target.user_file is None or ":" in spec:
        raise MendError(f"{spec}: mend fix currently rewrites single-file targets (FILE.py defining Model "
                        "and get_inputs()); installed-package targets need the import overlay (not yet available)")
    path = target.user_file
    original = path.read_text(encoding="utf-8")
    module = load_file_module(path, f"_mend_orig_{abs(hash(str(path)))}")
    init = tuple(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else ()
    before = scan(target)
    current = original
    rewrites, declined, tried = [], [], set()
    with tempfile.TemporaryDirectory(prefix="mend-") as tmp:
        cur_path = Path(tmp) / f"r0_{path.name}"
        cur_path.write_text(current)
        result = before
        for rnd in range(max_rounds):
            progressed = False
            cur_target = result if rnd == 0 else scan(load_target(str(cur_path)))
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
                where = f"{path}:{_orig_line(original, site.source, site.line)}"
                if rewrite is None:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": "the rule's rewrite is not available yet"})
                    continue
                res = rewrite(cst.parse_module(current), site.line)
                if isinstance(res, Decline):
                    declined.append({"site": where, "rule": site.fixable_by, "reason": res.reason})
                    continue
                cand_path = Path(tmp) / f"r{len(rewrites) + 1}_{path.name}"
                cand_path.write_text(res.code)
                # verify on instrumented copies: the predicate at the site can be forced
                inst_cur = instrument(current, site.line)
                inst_res = rewrite(cst.parse_module(inst_cur), site.line) if inst_cur else None
                force_lines = [site.line] if inst_cur and not isinstance(inst_res, Decline) else []
                ref_path, test_path = Path(tmp) / f"i{len(rewrites)}a_{path.name}", Path(tmp) / f"i{len(rewrites)}b_{path.name}"
                ref_path.write_text(inst_cur if force_lines else current)
                test_path.write_text(inst_res.code if force_lines else res.code)
                try:
                    _, (m_cur, m_cand) = _build_pair(ref_path, test_path, init)
                    _, (_, m_emit) = _build_pair(ref_path, cand_path, init)
                except (TargetError, RuntimeError) as exc:
                    declined.append({"site": where, "rule": site.fixable_by, "reason": f"the rewritten file does not load: {exc}"})
                    continue
                evidence = differential_test(m_cur, m_cand, target.args, emitted=m_emit, force_lines=force_lines,
                                             extra_inputs=[target.trap_inputs] if target.trap_inputs else [],
                                             seed=seed, max_examples=max_examples)
                if not evidence.passed:
                    declined.append({"site": where, "rule": site.fixable_by,
                                     "reason": f"differential test failed: {evidence.reason}",
                                     "counterexample": evidence.counterexample})
                    continue
                diff = "".join(difflib.unified_diff(current.splitlines(True), res.code.splitlines(True),
                                                    f"a/{path.name}", f"b/{path.name}"))
                rewrites.append({"rule": site.fixable_by, "file": str(path), "site": where, "span": list(res.span),
                                 "detail": res.detail, "diff": diff, "obligations": res.obligations,
                                 "evidence": evidence.to_json()})
                current, cur_path, progressed = res.code, cand_path, True
                break  # line numbers moved: rescan before the next site
            if not progressed:
                break
        after = scan(load_target(str(cur_path)))
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
    if path.exists() and not os.access(path, os.W_OK):
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


def certificate(res: FixResult, rw: dict) -> dict:
    """Certificate v0.1 (differential evidence only; Z3 obligations come with --verify strict)."""
    import hypothesis
    import z3

    from mend import __version__

    return {"schema_version": "0.1", "rule": rw["rule"], "file": str(res.file), "site": rw["site"], "span": rw["span"],
            "diff": rw["diff"], "sha256_original": _sha(res.original), "sha256_mended": _sha(res.mended),
            "obligations": rw["obligations"], "evidence": rw["evidence"],
            "versions": {"torch": torch.__version__, "mend": __version__, "z3": z3.get_version_string(),
                         "hypothesis": hypothesis.__version__},
            "breaks": {"before": res.before.graph_break_count, "after": res.after.graph_break_count}}
