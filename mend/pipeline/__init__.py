"""mend fix: one pipeline, target -> detect -> plan -> verify -> emit.

For each fixable site of a scan, the rule's ``rewrite`` (LibCST) proposes a candidate;
the verifier discharges its proof obligations (:func:`verifier.obligations.prove`) and
tests it differentially against the version before it, both predicate outcomes forced;
only candidates that pass are kept. After each accepted rewrite the target is scanned
again, since breaks hide behind breaks. Where candidates are loaded and run is the
executor's business (:mod:`mend.pipeline.executors`): in this process for a file target,
in fresh interpreters with the import overlay for installed and imported modules. Both
produce the same records (:mod:`mend.pipeline.records`).
"""
from __future__ import annotations

import dataclasses
import difflib
import re
import tempfile
import time
from pathlib import Path

import libcst as cst

from mend.config import matching
from mend.cost import METHODS
from mend.errors import MendError
from mend.pipeline.choice import UNSAFE, Verified, choose_rewrite
from mend.pipeline.executors import Failed, InProcess, Overlay, Skip, build_pair, factory_of, model_maker
from mend.pipeline.records import Declined, FixResult, Rewrite, original_lines
from mend.rules import RULES, Decline
from mend.scan import scan
from mend.taxonomy import EAGER_SETUP_ADVICE
from mend.targets import load_target
from mend.worker import start_early
from verifier.forcing import forced_keys, instrument
from verifier.legs import other_dtypes
from verifier.obligations import LEVELS, examples_for, fix_safety, prove

__all__ = ["fix", "FixResult", "Rewrite", "Declined", "build_pair", "factory_of", "model_maker", "UNFORCEABLE"]

UNTESTED = ("an unsafe fix, not applied without --unsafe-fixes (its proof obligations were accepted only under "
            "the assumptions that follow, and its differential test, which runs only with --unsafe-fixes, was not run: "
            "it may yet be refuted there): ")
UNFORCEABLE = ("the branch's predicate could not be instrumented for forcing, so both of its outcomes "
               "cannot be verified")


def elif_lines(code: str, line: int) -> list[int]:
    """The lines of the ``elif`` tests of the ``if`` chain starting on ``line``, in order: the
    ``elif``s at the ``if``'s indentation that follow its blocks (blank and comment lines,
    and deeper lines, are inside them). Read from the text: a wrong line is not instrumented
    (:func:`instrument` finds no ``if`` starting there) and only loses forcing."""
    lines = code.splitlines()
    if not 0 < line <= len(lines):
        return []
    indent = len(lines[line - 1]) - len(lines[line - 1].lstrip())
    found = []
    for n in range(line, len(lines)):
        text = lines[n]
        stripped = text.lstrip()
        if not stripped or stripped.startswith("#") or len(text) - len(stripped) > indent:
            continue
        if len(text) - len(stripped) < indent or not re.match(r"elif\b", stripped):
            break
        found.append(n + 1)
    return found


def instrumented_pair(rewrite, current: str, line: int):
    """(instrumented current, instrumented candidate, forced lines) with the site's predicate
    forceable, and the ``elif`` tests of its chain too where the rule rewrites that form (a
    chain predicated whole: each outcome of each test is then verified), or (None, None, [])
    when the rule does not rewrite any instrumented form."""
    for last_and in (False, True):
        inst = instrument(current, line, last_and)
        if inst is None:
            continue
        keys = forced_keys(inst, line)   # an assert's, one per operand of `A and B`; else [line]
        chained, lines = inst, keys
        for elif_line in ([] if last_and else elif_lines(current, line)):
            more = instrument(chained, elif_line)
            if more is not None:
                chained, lines = more, [*lines, elif_line]
        for code, forced in ((chained, lines), (inst, keys)) if len(lines) > len(keys) else ((inst, keys),):
            res = rewrite(cst.parse_module(code), line)
            if not isinstance(res, Decline):
                return code, res.code, forced
    return None, None, []


def _is_branch(code: str, line: int) -> bool:
    """An ``if`` (or a conditional expression) starts on ``line``: its rewrite must be verified
    on both outcomes. An ``assert`` is forced where the rule rewrites its instrumented copy,
    and otherwise verified as before, on the outcomes its inputs reach."""
    lines = code.splitlines()
    if 0 < line <= len(lines) and lines[line - 1].lstrip().startswith("assert"):
        return False
    return instrument(code, line) is not None


def fix(spec: str, *, seed: int = 0, max_examples: int | None = None, max_rounds: int = 32,
        verify: str = "standard", unsafe_fixes: bool = False, rules: list[str] | None = None,
        exclude: list[str] = (), choose: str = "model", time_limit: float | None = None) -> FixResult:
    """Rewrite the fixable graph breaks of the target ``spec`` and verify each rewrite.

    ``spec``: FILE.py, FILE.py:FACTORY (in-process executor; the factory may return
    ``(model, args)`` or ``(model, args, kwargs)``), MODULE:FACTORY or hf:NAME (overlay
    executor). ``max_examples``: Hypothesis examples per candidate (default 30 in process,
    8 through the overlay, where each example runs in several fresh interpreters);
    ``verify`` (fast, standard, strict) decides how each candidate's obligations weigh
    (README, "Verification levels"). Each verified rewrite is labelled ``safe`` or ``unsafe``
    (:func:`verifier.levels.fix_safety`); an unsafe one is applied only with
    ``unsafe_fixes``, and is otherwise declined with what it rests on (ruff's
    ``--unsafe-fixes``). Nothing is written: the result holds the mended text.
    ``rules``: the rules that may rewrite (None: all); a site of another rule is declined as
    not enabled. ``exclude``: glob patterns of files (displayed or absolute path) whose sites
    are not rewritten ([tool.mend], :mod:`mend.config`). ``choose``: how a branch site's
    rewrite is chosen among keeping the break, ``torch.where`` and ``torch.cond``, from the
    candidates that verified (:mod:`mend.cost`: ``model``, ``roofline``, ``always`` (the
    rule's own rewrite, GraphMend's policy), ``measure``); the choice is recorded on the
    rewrite (``choice``), and a kept break is a decline that says why. ``max_rounds``: at most
    this many rewrites are accepted (one per round, each followed by a rescan); a fixable
    site left untried when the limit is reached is declined, saying so. ``time_limit`` (s,
    wall clock from the start of the call): no further candidate is tried once it has passed,
    and the fixable sites left untried are declined, saying so; what was verified by then is
    kept. It is checked between candidates, so one candidate's verification runs to its end
    (helper-77: `mend fix` gave nothing within 300 s on idefics2 and llava_next).
    Raises MendError for an unknown level or choice method and TargetError for a target
    that cannot be built.
    """
    if verify not in LEVELS:
        raise MendError(f"--verify {verify}: choose one of {', '.join(LEVELS)}")
    if choose not in METHODS:
        raise MendError(f"--choose {choose}: choose one of {', '.join(METHODS)}")
    deadline = None if time_limit is None else time.monotonic() + time_limit
    start_early([spec])  # the warm workers' imports overlap the build and the first scan
    target = load_target(spec)
    overlay = spec.startswith("hf:") or target.user_file is None
    executor_cls = Overlay if overlay else InProcess
    n_examples = examples_for(verify, max_examples if max_examples is not None else (8 if overlay else 30),
                              installed=overlay)
    before = scan(target)
    files: dict[str, str] = {}       # display path -> mended text
    originals: dict[str, str] = {}
    sources: dict[str, Path] = {}
    rewrites: list[Rewrite] = []
    declined: list[Declined] = []
    # site key -> attempts; a site whose rewrite was accepted may still break (a second value of
    # the same kind reaching it: helper-57's two IntTensors into one helper) and is tried again,
    # up to RETRIES times; a declined one is not
    tried: dict = {}
    accepted_keys: set = set()
    # (file, mended text) -> (site, reason) of candidates the rescan rejected since the last
    # accepted rewrite: another site planning the same text (a hoisted setup check reached
    # from two breaks) is declined without verifying it again
    rejected: dict[tuple[str, str], tuple[str, str]] = {}
    # sites declined by a rescan (no gain, or graphs up), whose verdict depends on the other
    # rewrites: tried once more after the next accepted one (helper-68's c29: dropping an unused
    # repr gained nothing until the break after it was fixed)
    by_rescan: dict = {}     # key -> its Declined, replaced by the retry's verdict
    retry: dict = {}
    rewrite_keys: list = []   # each accepted rewrite's site key
    provisional: set = set()  # indices into rewrites of those kept provisionally (_frees_frame)
    with tempfile.TemporaryDirectory(prefix="mend-") as tmpname:
        ex = executor_cls(target, spec, Path(tmpname), seed, n_examples)
        current_scan = ex.first_scan(before)
        best = ({}, 0, current_scan, ex.state())   # the last state whose graph count is not above the original's
        timed_out = False
        for _ in range(max_rounds):
            accepted = None
            for site in current_scan.sites:
                key = _site_key(ex, site)
                if not site.fixable_by or key in tried and (
                        key not in accepted_keys and key not in retry or tried[key] >= RETRIES):
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    timed_out = True
                    break
                tried[key] = tried.get(key, 0) + 1
                accepted_keys.discard(key)
                if key in retry:
                    declined.remove(retry.pop(key))
                skipped = _not_enabled(site, rules, exclude)
                if skipped:
                    declined.append(Declined(f"{site.display_file}:{site.line}", site.fixable_by, skipped))
                    continue
                try:
                    rel, original, source = ex.source(site)
                except Skip as skip:
                    if skip.reason:
                        declined.append(Declined(f"{site.display_file}:{site.line}", site.fixable_by, skip.reason))
                    continue
                originals.setdefault(rel, original)
                sources.setdefault(rel, source)
                outcome = _try_site(ex, site, rel, files.get(rel, original), originals[rel], files, verify,
                                    choose=choose, unsafe_fixes=unsafe_fixes, rejected=rejected)
                if isinstance(outcome, Declined):
                    declined.append(outcome)
                    if outcome.reason.startswith("differential test failed"):
                        # the difference may come from code another rewrite changes (helper-84: a
                        # check Dynamo lowers itself raised RuntimeError once this site's break was
                        # gone): tried once more after the next accepted rewrite, like a rescan's
                        by_rescan[key] = outcome
                    continue
                safety = outcome[0].safety
                if safety["label"] != "safe" and not unsafe_fixes:
                    ex.reject()
                    declined.append(Declined.withheld(outcome[0].site, site.fixable_by, UNSAFE, safety))
                    continue
                trial = {**files, rel: outcome[1]}
                rescanned = ex.rescan(trial)
                raises = _graphs(rescanned) > _graphs(current_scan)
                if raises and not _frees_frame(current_scan, rescanned):
                    # a rewrite must never split the model into more graphs (a break fixed can
                    # expose code that breaks worse: measured on switch_transformers)
                    ex.reject()
                    declined.append(Declined(outcome[0].site, site.fixable_by,
                                             f"the rewrite raises the graph count from {_graphs_text(current_scan)} "
                                             f"to {_graphs_text(rescanned)}, so it is not emitted"))
                    rejected[(rel, outcome[1])] = (outcome[0].site, declined[-1].reason)
                    by_rescan[key] = declined[-1]
                    continue
                still = _still_breaks(ex, current_scan, rescanned, rel, files.get(rel, original), outcome[1],
                                      outcome[0].span, site.category, site.gb_type, site.line)
                if still:
                    # the new code itself breaks where the old did (a guard that never holds under
                    # tracing: np.prod of a torch.Size, a generalisation probe): nothing is gained
                    ex.reject()
                    declined.append(Declined(outcome[0].site, site.fixable_by, still))
                    rejected[(rel, outcome[1])] = (outcome[0].site, still)
                    by_rescan[key] = declined[-1]
                    continue
                if raises:
                    provisional.add(len(rewrites))   # taken only because it frees an eager frame
                rewrites.append(outcome[0])
                rewrite_keys.append(key)
                accepted_keys.add(key)
                rejected.clear()   # what the model is changed: a rejected candidate may fare otherwise now
                retry.update((k, d) for k, d in by_rescan.items() if k != key)
                by_rescan.clear()
                files = trial
                ex.accept()
                accepted, current_scan = outcome, rescanned
                if _graphs(current_scan) <= _graphs(before):
                    best = (dict(files), len(rewrites), current_scan, ex.state())
                break  # line numbers moved: plan again from the new scan
            if accepted is None:
                break
        else:
            declined += _untried(ex, current_scan, tried, f"the round limit was reached ({max_rounds} rewrites, one "
                                 "per round); run `mend fix` again on the mended file, or raise --max-rounds",
                                 originals, files)
        if timed_out:   # helper-84: with nothing rewritten there is no mended file to run again on
            again = "what was verified before it is kept: run `mend fix` again on the mended file, or raise the " \
                "limit" if rewrites else "nothing was rewritten before it: run `mend fix` again with a larger limit"
            declined += _untried(ex, current_scan, tried, f"the time limit of this target was reached ({time_limit:g} "
                                 f"s, --time-limit); {again}", originals, files)
        if _graphs(current_scan) > _graphs(before):
            # a rewrite that let an eagerly run frame compile again was taken provisionally
            # (helper-70: fixing the break Dynamo could not resume after exposed the next one,
            # graphs 0 -> 2); the later rewrites did not bring the count back: back to the last
            # state that did not raise it
            raised = _graphs_text(current_scan)
            files, n, current_scan, state = best
            ex.set_state(state)
            first = next((r.site for i, r in enumerate(rewrites) if i >= n and i in provisional), "an earlier site")
            for i, (r, k) in enumerate(zip(rewrites[n:], rewrite_keys[n:]), n):
                accepted_keys.discard(k)
                why = ("the rewrite let a frame Dynamo ran eagerly compile again, and with the rewrites after it"
                       if i in provisional else f"undone with the provisional rewrite at {first} before it: with"
                       " them")
                declined.append(Declined(r.site, r.rule, f"{why} the graph count rose from {_graphs_text(before)} "
                                         f"to {raised}, so it is not emitted"))
            rewrites = rewrites[:n]
        still = _still_fixable(ex, current_scan, tried, accepted_keys, originals, files)
        after = ex.after(current_scan)
    # a site declined in one round (the graph count rose then) may be fixed in a later one:
    # the record that stands is the rewrite
    done = {(r.site, r.rule) for r in rewrites}
    declined = [d for d in declined if (d.site, d.rule) not in done] + still
    _say_declined(ex, after, declined, originals, files)
    return FixResult(spec, ex.kind, files, originals, sources, before, after, rewrites, declined,
                     main_file=None if overlay else ex.rel)


def _say_declined(ex, after, declined: list, originals: dict, files: dict) -> None:
    """A site left in ``after`` whose rule matched carries the matcher's plan as its reason; where
    that rule's rewrite was declined, the reason says so, with the decline's (helpers 59, 63: the
    plan read as the reason the break remained)."""
    by_label = {}
    for d in declined:
        by_label.setdefault(d.site, d)
    for s in after.sites:
        rel = ex.file_key(s) if s.fixable_by else None
        if rel is None:
            continue
        d = by_label.get(ex.site_label(s, rel, originals.get(rel, files.get(rel, ""))))
        if d is not None and d.rule in (None, s.fixable_by):
            s.reason = f"`{s.fixable_by}` matches ({s.reason}) but its rewrite was declined: {d.reason}"


def _graphs(scan_) -> int:
    """The graph count a rewrite must not raise: graphs, plus one for each frame Dynamo ran
    eagerly (a break it could not resume after, inside torch's own code, compiles nothing
    of the frame: 0 graphs there is worse than 1, and a rewrite that lets the frame compile
    as one graph does not raise the count)."""
    return scan_.graph_count + scan_.frames_skipped


def _frees_frame(current, rescanned) -> bool:
    """A rewrite that raises the graph count only because a frame Dynamo ran eagerly now compiles,
    with no more breaks than before (helper-70: the break it could not resume after fixed, graphs
    0 (+1 eager frame) -> 2): taken provisionally, and undone at the end unless the rewrites after
    it bring the count back to the original's."""
    return (rescanned.frames_skipped < current.frames_skipped
            and rescanned.graph_break_count <= current.graph_break_count)


def _graphs_text(scan_) -> str:
    skipped = scan_.frames_skipped
    return f"{scan_.graph_count}" + (f" (+{skipped} frame(s) run eagerly)" if skipped else "")


def _site_key(ex, site) -> tuple:
    """A site's identity across rounds: stable though lines move; the function tells apart
    one statement written in two places (xlm's `assert lengths.max().item() <= slen`)."""
    return ex.file_key(site), getattr(site, "function", None), site.source, site.fixable_by


RETRIES = 3   # rewrites accepted at one site (its key) in one run, at most


def _label(ex, site, originals: dict, files: dict) -> str:
    """``FILE:LINE`` of a site of a rescan as the user's file names it: the display path, and
    the line in the original file (a rescan's own path is a scratch copy, its lines the mended
    file's: helper-83)."""
    rel = ex.file_key(site)
    return ex.site_label(site, rel, originals.get(rel, files.get(rel, ""))) if rel in originals or rel in files \
        else f"{site.display_file}:{site.line}"


def _still_fixable(ex, scan_, tried: dict, accepted_keys: set, originals: dict, files: dict) -> list[Declined]:
    """Sites the final scan still finds fixable although their last rewrite was accepted
    (the retry limit reached): declined with that said, not silently dropped."""
    return [Declined(_label(ex, s, originals, files), s.fixable_by,
                     f"still breaks after {tried[_site_key(ex, s)]} accepted rewrite(s) here (the retry or round "
                     "limit was reached); "
                     "run `mend fix` again on the mended file")
            for s in scan_.sites if s.fixable_by and _site_key(ex, s) in accepted_keys]


def _untried(ex, scan_, tried: dict, why: str, originals: dict, files: dict) -> list[Declined]:
    """The fixable sites of ``scan_`` no round reached: declined, not silently dropped."""
    return [Declined(_label(ex, s, originals, files), s.fixable_by, f"not attempted: {why}")
            for s in scan_.sites
            if s.fixable_by and _site_key(ex, s) not in tried]


_RUNTIME_DIR = Path(__file__).resolve().parents[1]
_RUNTIME_FILES = {"runtime.py", "lazy.py", "validation_runtime.py"}


def _in_runtime(site) -> bool:
    """Whether a scan's site lies in mend's own runtime (what rewritten code calls)."""
    path = Path(site.file or "")
    return path.name in _RUNTIME_FILES and path.resolve().parent == _RUNTIME_DIR


def _still_breaks(ex, before, after, rel: str, current: str, mended: str, span, category: str,
                  gb_type: str | None = None, site_line: int | None = None) -> str | None:
    """Why a verified rewrite removes no graph break, else None: the graph counts (first and
    second call) did not fall, and the rescan still reports a break of the site's own category
    or kind (``gb_type``) on the lines that replaced ``span`` of ``current``, or on its lines
    left unchanged (a local's binding rewritten above the line that reads it). A break that
    merely moves elsewhere, or another kind of break left on the same line (a `print` beside
    the fixed numpy call), does not count. A rewrite away from the break (``span`` not
    holding ``site_line``: a one-time setup's check hoisted into its callers) must lower a
    graph count: its site's line is not the one it changes."""
    if after.graph_count == 0 < before.graph_count:
        # fewer graphs, but none: a later break Dynamo cannot resume after now comes first, and
        # the whole frame runs eagerly (helper-68: dropping `dbg = repr(h)` left `f"{h!r}"`
        # first, graphs 1 -> 0, the Linear before it no longer compiled)
        return (f"with the rewrite Dynamo compiles nothing of the function (graphs {before.graph_count} -> 0, "
                f"breaks {before.graph_break_count} -> {after.graph_break_count}): a later break it cannot resume "
                "after now comes first and the whole frame runs eagerly, which is worse, so it is not emitted")
    if after.graph_count < before.graph_count or (
            before.steady_graph_count is not None and after.steady_graph_count is not None and
            after.steady_graph_count < before.steady_graph_count):
        return None
    in_runtime, known = [x for x in after.sites if _in_runtime(x)], sum(map(_in_runtime, before.sites))
    if len(in_runtime) > known:   # the call went to mend's runtime and breaks there (an argument it cannot snapshot)
        x = in_runtime[known]
        return (f"the rewritten code breaks inside mend's runtime ({Path(x.file).name}:{x.line}, {x.category}; graphs "
                f"{before.graph_count} -> {after.graph_count}, breaks {before.graph_break_count} -> "
                f"{after.graph_break_count}): the deferred call runs eagerly there, so nothing is gained and it is "
                "not emitted")
    if site_line is not None and not span[0] <= site_line <= span[1] and \
            after.graph_break_count >= before.graph_break_count:
        return (f"the rewrite (lines {span[0]}-{span[1]}) is away from the break at line {site_line} and lowers "
                f"neither the first call's graph count ({before.graph_count} -> {after.graph_count}) nor a second "
                f"call's ({before.steady_graph_count} -> {after.steady_graph_count}): nothing is gained, so it is "
                "not emitted" + (f"; what does help: {EAGER_SETUP_ADVICE}" if category == "hook-or-lock" else ""))
    ops = difflib.SequenceMatcher(None, current.splitlines(), mended.splitlines(), autojunk=False).get_opcodes()
    lo = hi = None
    for tag, i1, i2, j1, j2 in ops:
        if tag != "equal" and i1 <= span[1] and i2 >= span[0] - 1:   # touches the replaced lines
            lo, hi = (j1 if lo is None else min(lo, j1)), (j2 if hi is None else max(hi, j2))
        elif tag == "equal" and i1 < span[1] and i2 > span[0] - 1:   # lines of the span left unchanged
            first, last = max(i1, span[0] - 1), min(i2, span[1])
            lo = j1 + (first - i1) if lo is None else min(lo, j1 + (first - i1))
            hi = j1 + (last - i1) if hi is None else max(hi, j1 + (last - i1))
    if lo is None:
        return None
    region = [s for s in after.sites if ex.file_key(s) == rel and lo < s.line <= max(hi, lo + 1)]
    # graphs up, or the frame now wholly eager (1 -> 0): a break of another kind there is no
    # gain either (helper-48: a cache write became a `narrow` with a tensor start, "Data
    # dependent operator" on the same line, graphs 1 -> 2, or 1 -> 0 in a loop); with the
    # counts level, another kind on the line is taken as a break the fixed one hid (a `print`
    # beside the fixed numpy call)
    worse = after.graph_count > before.graph_count or (after.graph_count == 0 < before.graph_count)
    for s in region:
        if getattr(s, "category", category) == category or (gb_type and getattr(s, "gb_type", None) == gb_type) \
                or worse:
            return (f"the rewritten code still breaks the graph at line {s.line} ({s.category}; graphs "
                    f"{before.graph_count} -> {after.graph_count}, breaks {before.graph_break_count} -> "
                    f"{after.graph_break_count}): the rewrite removes no graph break, so it is not emitted")
    return None


def _not_enabled(site, rules, exclude) -> str | None:
    """Why the configuration keeps ``site`` from being rewritten, else None."""
    if rules is not None and site.fixable_by not in rules:
        return f"the rule {site.fixable_by} is not enabled ([tool.mend] rules: {', '.join(rules) or 'none'})"
    pattern = matching(exclude, site.file, site.display_file)
    return f"the file is excluded ([tool.mend] exclude: {pattern})" if pattern else None


def _try_site(ex, site, rel: str, current: str, original: str, files: dict[str, str], verify: str, *,
              choose: str = "always", unsafe_fixes: bool = False, rejected: dict | None = None):
    """Plan and verify one site: ``(Rewrite, mended text)`` or a :class:`Declined` (its reason's
    line numbers the user's, :func:`~mend.pipeline.records.original_lines`). For a rule with alternative forms
    (predicated control flow), the rewrite is chosen among the verified candidates and keeping
    the break (:mod:`mend.pipeline.choice`)."""
    out = _try_site_in(ex, site, rel, current, original, files, verify, choose=choose, unsafe_fixes=unsafe_fixes,
                       rejected=rejected)
    if isinstance(out, Declined):
        out = dataclasses.replace(out, reason=original_lines(out.reason, current, original))
    return out


def _try_site_in(ex, site, rel: str, current: str, original: str, files: dict[str, str], verify: str, *,
                 choose: str = "always", unsafe_fixes: bool = False, rejected: dict | None = None):
    rule = RULES[site.fixable_by]
    where = ex.site_label(site, rel, original)
    try:
        res = rule.rewrite(cst.parse_module(current), site.line)
    except Exception as exc:   # a bug in one rule must not end the run nor emit anything: decline, named
        res = Decline(rule.name, f"the rule failed on this site, an internal error (please report it): "
                                 f"{type(exc).__name__}: {exc}")
    if isinstance(res, Decline):
        return Declined(where, site.fixable_by, res.reason)
    if rejected and (rel, res.code) in rejected:
        first_site, why = rejected[(rel, res.code)]
        return Declined(where, site.fixable_by, f"the same rewrite as for {first_site}, not emitted there: {why}")

    def verify_one(cand, form=None, rewrite_fn=None) -> Verified:
        return _verify(ex, rule, site, rel, current, files, verify, cand, where, form, unsafe_fixes=unsafe_fixes,
                       rewrite_fn=rewrite_fn)

    first = verify_one(res)
    if isinstance(first.outcome, Declined) and first.outcome.safety != "unsafe" and rule.fallback is not None \
            and (rule.fallback_when is None or rule.fallback_when(first.outcome.reason)):
        first = _fallback(rule, current, site.line, first, verify_one)
    if rule.alternatives is None or res.form is None:
        return first.outcome
    return choose_rewrite(verify_one, ex, rule, site, current, res, first, where=where, rel=rel, files=files,
                          method=choose, verify=verify, unsafe_fixes=unsafe_fixes)


def _clip(text: str, limit: int = 300) -> str:
    """``text`` cut to about ``limit`` characters at a word boundary, marked when cut (helper-67
    read a reason ending mid-word)."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " ..."


def _fallback(rule, current: str, line: int, first: Verified, verify_one) -> Verified:
    """The rule's second form (``Rule.fallback``), verified, when its own rewrite was declined
    by verification: that form's outcome when it passes (or is withheld as an unsafe fix),
    else the first decline with the second form's reason added."""
    try:
        alt = rule.fallback(cst.parse_module(current), line)
    except Exception as exc:   # noqa: BLE001 - a rule bug must not end the run: the first decline stands, named
        alt = Decline(rule.name, f"the rule failed on its second form ({type(exc).__name__}: {exc})")
    if alt is None:
        return first
    if isinstance(alt, Decline):
        second_reason, detail = alt.reason, "its second form"
    else:
        second = verify_one(alt, rewrite_fn=rule.fallback)   # its instrumented copy is of this form too
        if not isinstance(second.outcome, Declined):   # emitted: its record says why the first form was not
            rw, code = second.outcome
            second.outcome = (dataclasses.replace(rw, detail=f"{rw.detail} (the rule's second form, verified; its "
                                                             f"first form was declined: {_clip(first.outcome.reason)})"),
                              code)
            return second
        if second.outcome.safety == "unsafe":   # withheld as an unsafe fix: its own record says so, and why not the first
            second.outcome = dataclasses.replace(second.outcome, reason=f"{second.outcome.reason} (the rule's first "
                                                 f"form was declined: {_clip(first.outcome.reason)})")
            return second
        second_reason, detail = second.outcome.reason, f"its second form ({alt.detail})"
    first.outcome = dataclasses.replace(first.outcome, reason=f"{first.outcome.reason}; {detail}: {second_reason}")
    return first


def _verify(ex, rule, site, rel: str, current: str, files: dict[str, str], verify: str, res, where: str,
            form: str | None = None, *, unsafe_fixes: bool = True, rewrite_fn=None) -> Verified:
    """Stage and verify one candidate ``res`` (``form``: the alternative form it is, None for
    the rule's own rewrite; ``rewrite_fn``: the function that made it, when not the rule's
    ``rewrite``, so its instrumented copy is the same form): obligations, then the
    differential test. Without
    ``unsafe_fixes``, a candidate whose obligations already make it an unsafe fix is
    withheld before its differential test: the test could only decline it too or leave it
    withheld (evidence adds reasons to be unsafe, never removes one), and it is the most
    expensive step (Inductor compiles the model; 180 s of hf:grounding-dino's 235 s)."""
    def decline(reason: str, **extra) -> Verified:
        return Verified(Declined(where, site.fixable_by, reason, **extra))

    rewrite = rewrite_fn or (rule.rewrite if form is None else (lambda module, line: rule.rewrite(module, line, form=form)))
    # verify on instrumented copies: the predicate at the site can be forced both ways
    inst_cur, inst_cand, force = instrumented_pair(rewrite, current, site.line)
    flag_line = rule.forced_line(cst.parse_module(current), site.line) if rule.forced_line and not inst_cur else None
    if flag_line:   # an `if` after the site that the rewrite moves work under: forced both ways too
        inst = instrument(current, flag_line)
        forced = rewrite(cst.parse_module(inst), site.line) if inst is not None else None
        if forced is not None and not isinstance(forced, Decline):
            inst_cur, inst_cand, force = inst, forced.code, forced_keys(inst, flag_line)
    if not inst_cur and rule.branch_outcomes and _is_branch(current, site.line):
        return decline(UNFORCEABLE)
    ex.stage(rel, current, res.code, inst_cur, inst_cand, files)
    costs = {"costs": res.cost_parts} if res.cost_parts else {}
    proof = prove(res.obligations, level=verify, before=current, code=res.code,
                  facts_fn=lambda: ex.facts(res.obligations, current, res.code, **costs),
                  required=rule.required_kinds, needs_facts=rule.needs_facts)
    facts = proof["verification"].get("facts") or {}
    # what the cost model reads is an observation, not a fact anything is proved from
    observed = Verified(None, facts.pop("costs", None), facts.get("model_devices"))
    if not proof["accepted"]:
        cex = next((o.get("counterexample") for o in proof["obligations"]
                    if o.get("kind") in proof["failed"] and o.get("counterexample")), None)
        observed.outcome = Declined(where, site.fixable_by, proof["reason"], failed_obligations=proof["failed"],
                                    counterexample=cex)
        return observed
    use = proof["verification"].get("use", "training and inference")
    unsafe = fix_safety(proof["obligations"], None, use)
    if unsafe["label"] != "safe" and not unsafe_fixes:
        ex.unstage()  # the candidate's runs started with its facts are not needed
        observed.outcome = Declined.withheld(where, site.fixable_by, UNTESTED, unsafe)
        return observed
    try:
        evidence = ex.evidence(force, res.edge_values, other_dtypes(proof["obligations"]))
    except Failed as failed:
        # the candidate's own words say what was tried (helper-88 N1: a where form of an elif chain
        # of submodule calls was declined on a gradient, with nothing saying why it was a where)
        tried = f" (the candidate: {res.detail})" if res.caveat else ""
        observed.outcome = Declined(where, site.fixable_by, failed.reason + tried, counterexample=failed.counterexample)
        return observed
    name = ex.diff_name(rel)
    diff = "".join(difflib.unified_diff(current.splitlines(True), res.code.splitlines(True), f"a/{name}", f"b/{name}"))
    safety = fix_safety(proof["obligations"], evidence, use)
    if res.code.count("mend-trap:") > current.count("mend-trap:") and safety["label"] != "safe":
        # helper-72: said in the rule's page and the assumptions, not where the label is read
        safety["reasons"].append("under torch.compile a failing check raises the original exception only with "
                                 "mend.validation_runtime.install(model) on the module you call (RuntimeError "
                                 "'mend-trap:...' without it; eager runs the original check)")
    observed.outcome = (Rewrite(site.fixable_by, rel, where, list(res.span), res.detail, diff, proof["obligations"],
                                proof["verification"], evidence, safety), res.code)
    observed.staged = ex.staged()
    return observed
