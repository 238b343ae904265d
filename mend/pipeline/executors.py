"""The two executors behind :func:`mend.pipeline.fix`: where candidates are loaded and run.

* :class:`InProcess` (FILE.py, FILE.py:FACTORY): the target's own file; the version
  before and each candidate are loaded as modules in this process, with the same weights.
* :class:`Overlay` (MODULE:FACTORY, hf:NAME): sites in modules the process has already
  imported (installed packages, the user's modules); a mended copy can only be loaded in
  a fresh interpreter with the import overlay (:mod:`mend.worker`).

Both answer the same questions for the pipeline -- which file a site is in, the facts a
candidate's obligations read, its differential evidence, the scan after a round -- and
produce the same records. The differential checks themselves are the verifier's.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from mend import files, runtime, validation_runtime  # noqa: F401 - runtime: registers mend::capture for the encoders
from mend.detect import display_path
from mend.errors import MendError, TargetError
from mend.scan import scan
from mend.targets import Target, load_file_module, load_target
from verifier.differential import GRADIENT_TOLERANCE_TEXT, Mismatch, compare, differential_test, inputs_strategy
from verifier.legs import AUTOCAST_DTYPE, torchscript_kept
from verifier.facts import fact_request, facts_in_process


def install_runtimes(model: torch.nn.Module) -> torch.nn.Module:
    """The runtimes a mended model is run with under ``torch.compile`` (README): predicated
    validation's. Deferred effects need none -- their replay runs right after each graph
    call -- so they are verified as users run them, without ``mend.runtime.install``."""
    return validation_runtime.install(model)


class Failed(Exception):
    """A candidate's differential test failed: ``reason`` and, when known, ``counterexample``."""

    def __init__(self, reason: str, counterexample: str | None = None) -> None:
        super().__init__(reason)
        self.reason, self.counterexample = reason, counterexample


class Skip(Exception):
    """The site is not one this executor rewrites; ``reason`` None: skip it silently."""

    def __init__(self, reason: str | None = None) -> None:
        super().__init__(reason or "")
        self.reason = reason


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


def build_pair(orig_path: Path, cand_path: Path, make):
    """Both models from their files (``make(module)``), the candidate loaded with the
    original's weights, predicated validation's runtime installed on both."""
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


def _orig_line(original: str, source: str, fallback: int) -> int:
    """The site's line in the original file (rewrites above it may have moved it): of the lines
    holding the same statement, the nearest to its line now (helper-70: two identical f-strings
    were both named by the first one's line)."""
    hits = [i for i, text in enumerate(original.splitlines(), 1) if text.strip() == source.strip()]
    return min(hits, key=lambda i: (abs(i - fallback), i)) if hits else fallback


class InProcess:
    """FILE.py and FILE.py:FACTORY targets, verified in this process."""

    kind = "in-process"

    def __init__(self, target: Target, spec: str, tmp: Path, seed: int, max_examples: int) -> None:
        self.target, self.spec, self.tmp = target, spec, tmp
        self.seed, self.max_examples = seed, max_examples
        self.path = target.user_file
        self.rel = display_path(str(self.path))
        self.factory = factory_of(spec)
        self.make = model_maker(self.factory)
        self.original = files.read_source(self.path)
        load_file_module(self.path, f"_mend_orig_{abs(hash(str(self.path)))}")
        self.cur_path = self._scratch("r0")
        self.cur_path.write_text(self.original)
        self.scan_file = self.path  # the file the current scan's sites point into
        self.cand_path = self.cur_path  # the staged candidate's file (its rescan points into it)
        self.n = 0

    def _spec(self, path: Path) -> str:
        return f"{path}:{self.factory}" if self.factory else str(path)

    def first_scan(self, before):
        """The scan the first round plans from."""
        return before

    def source(self, site) -> tuple[str, str, Path]:
        """(display path, original text, file it was read from) of the file ``site`` is in."""
        if Path(site.file).resolve() != self.scan_file.resolve():
            raise Skip("the site is outside the target's own file (a FILE.py target rewrites that file only; a "
                       "MODULE:FACTORY target also rewrites installed libraries, as mended copies)"
                       if site.fixable_by else None)
        return self.rel, self.original, self.path

    def file_key(self, site) -> str:
        """The site's file, the same in every round (each round scans a new scratch copy; a
        staged candidate's rescan points into its own)."""
        here = Path(site.file).resolve()
        return self.rel if here in (self.scan_file.resolve(), self.cand_path.resolve()) else site.file

    def site_label(self, site, rel: str, original: str) -> str:
        return f"{rel}:{_orig_line(original, site.source, site.line)}"

    def diff_name(self, rel: str) -> str:
        return self.path.name

    def stage(self, rel: str, current: str, code: str, inst_cur: str | None, inst_cand: str | None,
              files: dict[str, str]) -> None:
        self.n += 1
        # each copy alone in its folder, under the user's file name: a rule that screens the
        # file's siblings (scalar-tensor) must not see mend's other scratch copies
        self.cand_path, self.ref_path, self.test_path = (
            self._scratch(f"r{self.n}"), self._scratch(f"i{self.n}a"), self._scratch(f"i{self.n}b"))
        self.cand_path.write_text(code)
        self.ref_path.write_text(inst_cur or current)
        self.test_path.write_text(inst_cand or code)

    def _scratch(self, folder: str) -> Path:
        (self.tmp / folder).mkdir(parents=True, exist_ok=True)
        return self.tmp / folder / self.path.name

    def staged(self) -> dict:
        """What :meth:`stage` set, to :meth:`restore` after another candidate of the same
        site was staged (the pipeline verifies alternatives; the counter never goes back)."""
        return {k: getattr(self, k) for k in ("cand_path", "ref_path", "test_path")}

    def restore(self, staged: dict) -> None:
        for k, v in staged.items():
            setattr(self, k, v)

    def facts(self, obligations: list[dict], before: str, code: str, costs: dict | None = None) -> tuple[dict, dict]:
        """Facts of the staged candidate (:func:`verifier.facts.facts_in_process`); ``costs``:
        the branch parts whose operators to count (``RewriteResult.cost_parts``)."""
        def build():
            mod = load_file_module(self.cand_path, "_mend_under_test")
            torch.manual_seed(0)
            return self.make(mod).eval()
        return facts_in_process(build, str(self.cand_path), self.target.args, self.target.kwargs, obligations,
                                before, code, costs=costs)

    def time_candidates(self, rel: str, codes: dict[str, str], files: dict[str, str]) -> dict[str, float]:
        """Steady-state ms per call of each candidate's mended model (``codes``: name ->
        text of the target's file), compiled with Inductor, on the example inputs, with the
        current version's weights (:func:`mend.pipeline.timing.steady_ms`)."""
        from mend.pipeline.timing import steady_ms

        out = {}
        for name, code in codes.items():
            path = self._scratch(f"t{self.n}{name}")
            path.write_text(code)
            _, (_, model) = build_pair(self.cur_path, path, self.make)
            out[name] = steady_ms(install_runtimes(model), self.target.args, self.target.kwargs)
        return out

    def evidence(self, force: list[int], edge_values: list, other_dtypes=()) -> dict:
        try:
            _, (m_cur, m_cand) = build_pair(self.ref_path, self.test_path, self.make)
            _, (m_ref, m_emit) = build_pair(self.cur_path, self.cand_path, self.make)
        except (TargetError, RuntimeError) as exc:
            raise Failed(f"the rewritten file does not load: {exc}") from exc
        t = self.target
        ev = differential_test(m_cur, m_cand, t.args, example_kwargs=t.kwargs, emitted=m_emit, reference=m_ref,
                               force_lines=force, extra_inputs=[t.trap_inputs] if t.trap_inputs else [],
                               extra_edge_values=edge_values,  # a rule's constants
                               seed=self.seed, max_examples=self.max_examples, prepare=install_runtimes,
                               other_dtypes=other_dtypes)
        if not ev.passed:
            raise Failed(f"differential test failed: {ev.reason}", ev.counterexample)
        return {**ev.to_json(), "torchscript": self._torchscript()}

    def _torchscript(self) -> str | None:
        """:func:`verifier.legs.torchscript_kept` on fresh copies, each under its own module
        name (TorchScript reads a class's source through its module: build_pair's shared name
        would show it the mended file for both) and without the validation runtime's hooks."""
        models = []
        for path, name in ((self.cur_path, "_mend_ts_original"), (self.cand_path, "_mend_ts_mended")):
            torch.manual_seed(0)
            models.append(self.make(load_file_module(path, name)).eval())
        return torchscript_kept(*models)

    def unstage(self) -> None:
        """The staged candidate will not be tested (nothing runs ahead in process)."""

    def accept(self) -> None:
        self.cur_path, self.scan_file = self.cand_path, self.cand_path

    def state(self) -> tuple:
        """What :meth:`accept` changes, to :meth:`set_state` back (the pipeline undoes
        provisional rewrites that did not pay off)."""
        return self.cur_path, self.scan_file

    def set_state(self, state: tuple) -> None:
        self.cur_path, self.scan_file = state

    def reject(self) -> None:
        pass

    def rescan(self, files: dict[str, str]):
        """The scan of the staged candidate (its sites point into the candidate's file)."""
        return scan(load_target(self._spec(self.cand_path)))

    def after(self, current_scan):
        after = current_scan  # the scan of the last accepted version (or the first scan)
        after.target = self.spec
        for s in after.sites:  # report the user's file, not the scratch copy
            if Path(s.file) == self.cur_path:
                s.file = str(self.path)
        return after


class ScanDoc:
    """A scan result read back from a worker's JSON (the mended library lives there)."""

    def __init__(self, doc: dict) -> None:
        from types import SimpleNamespace

        self.doc = doc
        self.graph_count = doc["graph_count"]
        self.steady_graph_count = doc.get("steady_graph_count")
        self.graph_break_count = doc["graph_break_count"]
        self.frames_skipped = doc.get("frames_skipped", 0)
        self.sites = [SimpleNamespace(**s, display_file=s["file"]) for s in doc["sites"]]

    def to_json(self) -> dict:
        doc = dict(self.doc)
        doc["sites"] = [{k: v for k, v in s.items() if k not in ("abs_file", "display", "overlay")} for s in self.doc["sites"]]
        return doc


def draw_inputs(args: tuple, kwargs: dict, seed: int, n: int) -> list[tuple[tuple, dict]]:
    """The example ``(args, kwargs)`` and ``n`` more shaped like them, drawn by Hypothesis
    (edge values included), for the worker processes."""
    from hypothesis import HealthCheck, given, seed as hyp_seed, settings

    keys = list(kwargs)
    drawn: list[tuple[tuple, dict]] = [(tuple(args), dict(kwargs))]

    @hyp_seed(seed)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(inputs_strategy(tuple(args) + tuple(kwargs[k] for k in keys), edge=True))
    def collect(values):
        drawn.append((tuple(values[:len(args)]), dict(zip(keys, values[len(args):]))))

    collect()
    return drawn[: n + 1]


AUTOCAST_NAME = str(AUTOCAST_DTYPE).removeprefix("torch.")   # the dtype as the workers' request names it
AUTOCAST_LABEL = f"autocast(<the inputs' device>, {AUTOCAST_NAME})"


def compare_runs(ref: dict, got: dict, exact: bool, natural_only: bool = False, any_error: bool = False,
                 grad_stats: dict | None = None) -> float:
    """Compare two workers' observations pairwise (:func:`verifier.differential.compare`);
    the largest absolute error (the largest gradient difference goes to ``grad_stats``).
    Raises Mismatch on the first difference."""
    worst = 0.0
    ref_obs = [o for o in ref["observations"] if not natural_only or not o["setting"]]
    got_obs = got["observations"]
    if len(ref_obs) != len(got_obs):
        raise MendError("internal: observation counts differ")
    for r, g in zip(ref_obs, got_obs):
        worst = max(worst, compare(r["obs"], g["obs"], exact=exact, any_error=any_error, grad_stats=grad_stats))
    return worst


def write_overlay(root: Path, files: dict[str, str]) -> Path:
    """A folder the import overlay serves: ``root/<package path>`` for each file."""
    for rel, code in files.items():
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(code)
    return root


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


class Overlay:
    """hf: and MODULE:FACTORY targets: mended copies verified in fresh interpreters.

    Each candidate is checked by fresh interpreters: the current version and the
    candidate, both instrumented so the predicate can be forced (eager, bit-exact); for a
    branch, the instrumented candidate again under ``torch.compile(backend="eager")``
    with the predicate forced both ways; and the emitted candidate under Inductor on every
    drawn input (natural predicates; against the current version under Inductor where
    Inductor itself departs from eager)."""

    kind = "overlay"

    def __init__(self, target: Target, spec: str, tmp: Path, seed: int, max_examples: int) -> None:
        from mend.worker import _WarmServer, run_worker, run_workers, start_workers

        _WarmServer.start()  # no-op when start_early() started it; else its imports overlap planning
        self.run_worker, self.run_workers, self.start_workers = run_worker, run_workers, start_workers
        self.speculative = None  # (files, scan doc or MendError) of the last candidate's rescan
        self.early = None  # (n, Started): candidate n's Inductor run, started with its facts
        self.target, self.spec, self.tmp, self.seed = target, spec, tmp, seed
        self.inputs_path = tmp / "inputs.pt"
        self.inputs = draw_inputs(target.args, target.kwargs, seed, max_examples)
        torch.save(self.inputs, self.inputs_path)
        # drawn floats carry inf/NaN edge values, where Inductor itself may depart from eager
        # and evidence() needs the current version under Inductor too (see there)
        self.float_inputs = any(isinstance(v, torch.Tensor) and v.is_floating_point()
                                for args, kwargs in self.inputs for v in [*args, *kwargs.values()])
        self.read: dict[str, tuple[str, Path]] = {}
        self.n = 0

    def first_scan(self, before):
        """The scan the first round plans from (sites carry their absolute file)."""
        doc = ScanDoc(before.to_json())
        for s, raw in zip(doc.sites, before.sites):
            s.abs_file = raw.file
        return doc

    def source(self, site) -> tuple[str, str, Path]:
        rel = site.file
        if rel not in self.read:
            if not os.path.isabs(site.abs_file) or not Path(site.abs_file).is_file():
                raise Skip(None)
            source = Path(_installed_path(site.abs_file, rel, self.tmp))
            why = _not_overlayable(source, rel)
            if why:
                raise Skip(why)
            self.read[rel] = (files.read_source(source), source)
        text, source = self.read[rel]
        return rel, text, source

    def file_key(self, site) -> str:
        return site.file  # the package path: the same in every round

    def site_label(self, site, rel: str, original: str) -> str:
        # the user's line, as in process (helper-89: bart@fp16's logger site was named by its line
        # in the half-mended file, two lines above the scan's)
        return f"{rel}:{_orig_line(original, site.source, site.line)}"

    def diff_name(self, rel: str) -> str:
        return rel

    def stage(self, rel: str, current: str, code: str, inst_cur: str | None, inst_cand: str | None,
              files: dict[str, str]) -> None:
        self.n += 1
        n = self.n
        self._drop_early()
        self.ref_dir = write_overlay(self.tmp / f"ref{n}", {**files, rel: inst_cur or current})
        self.cand_dir = write_overlay(self.tmp / f"cand{n}", {**files, rel: inst_cand or code})
        self.emit_dir = write_overlay(self.tmp / f"emit{n}", {**files, rel: code})
        self.cur_files = {**files, rel: current}
        self.trial = {**files, rel: code}  # what fix() rescans if the candidate is accepted
        self.rel = rel

    def staged(self) -> dict:
        """What :meth:`stage` set (and the rescan run alongside its evidence), to
        :meth:`restore` after another candidate of the same site was staged."""
        return {k: getattr(self, k) for k in ("ref_dir", "cand_dir", "emit_dir", "cur_files", "trial", "rel",
                                               "speculative")}

    def restore(self, staged: dict) -> None:
        for k, v in staged.items():
            setattr(self, k, v)

    def time_candidates(self, rel: str, codes: dict[str, str], files: dict[str, str]) -> dict[str, float]:
        """Steady-state ms per call of each candidate (``codes``: name -> text of ``rel``),
        one fresh interpreter after another (worker action ``time``), Inductor, on the
        example inputs."""
        out = {}
        for name, code in codes.items():
            folder = write_overlay(self.tmp / f"time{self.n}{name}", {**files, rel: code})
            doc = self.run_worker({"target": self.spec, "action": "time", "overlay": str(folder)}, self.tmp,
                                  f"time{self.n}{name}")
            out[name] = float(doc["ms"])
        return out

    def facts(self, obligations: list[dict], before: str, code: str, costs: dict | None = None) -> tuple[dict, dict]:
        """Facts of the staged candidate from a worker (:func:`verifier.facts.collect_facts`);
        ``costs``: the branch parts whose operators to count."""
        request, defs = fact_request(obligations, before, code, costs)
        # the candidate's longest run (Inductor) goes along on the other core: evidence()
        # uses it if the obligations pass, and it is dropped unread if they do not
        self._drop_early()
        self.early = (self.n, self.start_workers([(self._emit_request(), f"emit{self.n}")], self.tmp))
        try:
            facts = self.run_worker({"target": self.spec, "action": "facts", "overlay": str(self.emit_dir),
                                     "module": self.rel[:-3].replace("/", "."), "file": str(self.emit_dir / self.rel),
                                     "facts": request}, self.tmp, f"facts{self.n}")
        except MendError as exc:  # no facts: the obligations needing them stay unknown
            facts = {"names": {}, "self": {}, "hits": 0, "error": str(exc)}
        return facts, defs

    def _base(self, force: list[int]) -> dict:
        return {"target": self.spec, "action": "observe", "inputs": str(self.inputs_path), "force": force}

    def _emit_request(self) -> dict:
        """The emitted candidate under Inductor on the natural predicates."""
        return {**self._base([]), "overlay": str(self.emit_dir), "compiled": True, "backend": "inductor"}

    def unstage(self) -> None:
        """The staged candidate will not be tested: drop its Inductor run started with its facts."""
        self._drop_early()

    def _drop_early(self) -> None:
        if self.early is not None:
            self.early[1].drop()
            self.early = None

    def evidence(self, force: list[int], edge_values: list, other_dtypes=()) -> dict:
        """The overlay's differential runs; ``other_dtypes`` are not run here (the evidence
        says so under ``other_dtypes_not_run``)."""
        n, tmp = self.n, self.tmp
        base = self._base(force)
        # independent runs, two at a time, the longest (Inductor) first (started with the
        # facts when they were traced); each failure counts where the one-after-another
        # order would have met it, so verdicts do not change. The candidate's rescan goes
        # along: fix() asks for it next if the candidate passes
        early, self.early = (self.early if self.early and self.early[0] == n else None), None
        jobs = {} if early else {"emit": self._emit_request()}
        jobs |= {"ref": {**base, "overlay": str(self.ref_dir)}, "cand": {**base, "overlay": str(self.cand_dir)}}
        if force:
            jobs["candc"] = {**base, "overlay": str(self.cand_dir), "compiled": True, "backend": "eager"}
        # the example once more under torch.autocast, eager (Inductor there would be one more
        # compile of the whole model per candidate), its predicates natural and forced both
        # ways (helper-38: the example took the float32 side only)
        amp = {**base, "autocast": AUTOCAST_NAME, "limit": 1}
        jobs |= {"ref_ac": {**amp, "overlay": str(self.ref_dir)}, "cand_ac": {**amp, "overlay": str(self.cand_dir)}}
        jobs["scan"] = self._scan_request(self.trial)
        started = self.start_workers([(req, f"{name}{n}") for name, req in jobs.items()], tmp)
        # the current version under Inductor, needed only where Inductor departs from eager
        # (below): with float inputs it is started now, after the runs above, so a cold
        # compile of it overlaps the candidate's on the other core instead of following it
        # (hf:whisper, cold cache: 101 s -> 68 s); dropped unread when not needed
        cur_request = {**base, "overlay": str(write_overlay(tmp / f"cur{n}", self.cur_files)), "force": [],
                       "compiled": True, "backend": "inductor"}
        cur = self.start_workers([(cur_request, f"cur{n}")], tmp) if self.float_inputs else None
        runs = dict(zip(jobs, started.results()))
        if early:
            runs["emit"] = early[1].results()[0]
        self.speculative = (self.trial, runs.pop("scan"))

        def got(name: str):
            if isinstance(runs[name], MendError):
                raise runs[name]
            return runs[name]

        grads: dict = {}
        try:
            ref, cand = got("ref"), got("cand")
            # the default backend: a rewrite must survive Inductor's code generation too
            # (graphs holding mend::capture have crashed it, see README)
            emit = got("emit")
            worst = compare_runs(ref, cand, exact=True, grad_stats=grads)
            if force:  # the predicate forced both ways under torch.compile too: a rewrite
                # may take effect only when compiling (torch.cond keeps the `if` for eager)
                worst = max(worst, compare_runs(ref, got("candc"), exact=False))
            try:
                worst = max(worst, compare_runs(got("ref_ac"), got("cand_ac"), exact=True))
            except Mismatch as exc:
                raise Mismatch(f"under {AUTOCAST_LABEL}, eager: {exc}") from exc
            try:
                worst = max(worst, compare_runs(ref, emit, exact=False, natural_only=True, any_error=True))
            except Mismatch:
                # Inductor itself departs from eager on some inputs (NaN positions where the
                # inputs hold inf/NaN): the compiled candidate must then agree with the
                # compiled current version instead
                if cur is None:
                    ref_i = self.run_worker(cur_request, tmp, f"cur{n}")
                else:
                    ref_i, cur = cur.results()[0], None
                    if isinstance(ref_i, MendError):
                        raise ref_i from None
                worst = max(worst, compare_runs(ref_i, emit, exact=False, any_error=True))
        except Mismatch as exc:
            raise Failed(f"differential test failed: {exc}") from exc
        except MendError as exc:
            raise Failed(str(exc)) from exc
        finally:
            if cur is not None:
                cur.drop()
        return {"passed": True, "hypothesis_seed": self.seed, "examples": len(self.inputs),
                "modes": ["eager", "compiled:inductor"] + (["compiled:eager-backend/forced"] if force else [])
                + [f"eager/{AUTOCAST_LABEL}/example"],
                "predicate_outcomes": {str(line): {"natural": ref["seen"].get(str(line), []), "forced": [False, True]}
                                       for line in force},
                "max_abs_error": worst, "max_gradient_error": grads.get("max", 0.0),
                "gradients_exact": grads.get("max", 0.0) == 0.0, "gradient_tolerance": GRADIENT_TOLERANCE_TEXT,
                "counterexample": None, "reason": None,
                **({"other_dtypes_not_run": [str(d).removeprefix("torch.") for d in other_dtypes]}
                   if other_dtypes else {})}

    def accept(self) -> None:
        pass

    def state(self) -> tuple:
        return ()   # nothing is kept per accepted rewrite: the files are the pipeline's

    def set_state(self, state: tuple) -> None:
        pass

    def reject(self) -> None:
        pass

    def _scan_request(self, files: dict[str, str]) -> dict:
        return {"target": self.spec, "action": "scan",
                "overlay": str(write_overlay(self.tmp / f"scan{self.n}", files))}

    def rescan(self, files: dict[str, str]):
        if self.speculative is not None and self.speculative[0] == files:
            doc = self.speculative[1]  # scanned alongside the candidate's differential test
        else:
            doc = self.run_worker(self._scan_request(files), self.tmp, f"scan{self.n}")
        self.speculative = None
        if isinstance(doc, MendError):
            raise doc
        return ScanDoc(doc)

    def after(self, current_scan):
        return current_scan
