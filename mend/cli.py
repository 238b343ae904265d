"""The ``mend`` command line (click). Exit codes follow linters: 0 nothing fixable,
1 fixable graph breaks found, 2 error."""
from __future__ import annotations

import contextlib
import json
import io
import os
import sys
import tempfile
import time
import traceback
from contextlib import contextmanager
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from mend import __version__
from mend.distributed import ray_option
from mend.errors import MendError, target_failure
from mend.files import read_only, write_atomic

# errors are one line, however narrow the terminal or pipe
err_console = Console(stderr=True, soft_wrap=True)

# Hypothesis keeps a `.hypothesis/` folder in the working directory (its example database is
# off, but it still caches there): mend keeps the user's folder clean (new-user trial)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "mend-hypothesis"))
# Dynamo's and Inductor's own warnings ("Graph break from `Tensor.item()`, consider setting ...")
# come from mend's analysis and verification compiles, whose breaks mend reports itself: ERROR
# and above only, unless the user sets TORCH_LOGS (read once, when torch is imported; the
# worker and sandbox processes inherit it; helper-67 saw them on stderr)
os.environ.setdefault("TORCH_LOGS", "-dynamo,-inductor")


def out_console() -> Console:
    """stdout console; a pipe or file gets wide lines instead of a wrapped table."""
    return Console() if sys.stdout.isatty() else Console(width=200)


@contextmanager
def _errors(debug: bool):
    """Turn a MendError (or any crash) into one message on stderr and exit 2."""
    try:
        yield
    except MendError as exc:
        if debug:
            traceback.print_exc()
        err_console.print(f"[red]mend: error:[/] {escape(str(exc))}", highlight=False)  # `[tool.mend]` is text
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("mend: interrupted")
        sys.exit(2)
    except BrokenPipeError:  # `mend scan ... | head`: the reader left, nothing to report
        sys.stderr.close()
        sys.exit(2)
    except Exception as exc:  # a bug in mend itself: still one line unless --debug
        if debug:
            traceback.print_exc()
        err_console.print(f"[red]mend: internal error:[/] {type(exc).__name__}: {escape(str(exc))} "
                          "(rerun with --debug for the traceback)",
                          highlight=False)
        sys.exit(2)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="mend")
def main() -> None:
    """Find, rewrite and prove fixes for TorchDynamo graph breaks."""


def _list_targets() -> None:
    from rich.table import Table

    from mend.targets.hf import CATALOGUE

    table = Table(title="built-in catalogue (transformers, small configs, random weights)")
    for col in ("target", "model class", "breaks (torch 2.13, tf 4.52.4)", "paper", "description"):
        table.add_column(col, overflow="fold")
    for name, entry in CATALOGUE.items():
        table.add_row(f"hf:{name}", entry.model_class, str(entry.expected_breaks),
                      "-" if entry.paper_breaks is None else str(entry.paper_breaks), entry.description)
    out_console().print(table)
    from mend.targets.hf_newest import NEWEST

    newest = Table(title="newest-transformers rows (build in the environment benchmarks/run_newest.py creates)")
    for col in ("target", "model class", "description"):
        newest.add_column(col, overflow="fold")
    for name, entry in NEWEST.items():
        newest.add_row(f"hf:newest/{name}", entry.model_class, entry.description)
    out_console().print(newest)


@main.command()
@click.argument("targets", nargs=-1)
@click.option("--json", "as_json", is_flag=True, help="Print the versioned JSON result (schema mend/schemas/scan.schema.json).")
@click.option("--sarif", is_flag=True, help="Print SARIF 2.1.0 for GitHub code scanning.")
@click.option("--baseline", "baseline_path", type=click.Path(dir_okay=False),
              help="Fail (exit 1) only on break sites that are not in this baseline file ([tool.mend] baseline).")
@click.option("--update-baseline", is_flag=True, help="Write every current break site to the baseline file and exit 0.")
@click.option("--only-user/--no-only-user", default=None,
              help="Scope the exit code (and the baseline) to sites in your own tree, not installed packages.")
@click.option("--list-targets", is_flag=True, help="List the built-in hf: catalogue and exit.")
@ray_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def scan(targets, as_json, sarif, baseline_path, update_baseline, only_user, list_targets, ray, debug):
    """Find, count and explain every graph break of TARGET.

    TARGET is FILE.py (defines Model and get_inputs()), FILE.py:FACTORY,
    MODULE:FACTORY or hf:NAME (see --list-targets); without TARGET, the `targets` of
    [tool.mend] in pyproject.toml. Batches: globs ('models/*.py'), every factory of a
    module ('pkg.models:*'), catalogue patterns ('hf:*'); one combined report, a target
    that fails is recorded and the batch goes on (exit 2 at the end).

    Exit 0: nothing counts; 1: fixable graph breaks (with --baseline: break sites not in
    the baseline); 2: error. Excluded files ([tool.mend] exclude) and, with --only-user,
    installed packages do not count.
    """
    from mend import baseline as bl
    from mend import config as cfg
    from mend.report import failed_json, scan_json, scan_sarif, scan_table
    from mend.scan import scan as run_scan
    from mend.targets import file_of, load_target
    from mend.targets.batch import expand

    with _errors(debug):
        conf = cfg.load()
        if list_targets:
            if targets or as_json or sarif:
                raise MendError("--list-targets takes no TARGET, --json or --sarif")
            _list_targets()
            return
        if baseline_path:
            baseline_path = os.path.abspath(baseline_path)
        if not targets and conf.targets:
            _enter_project(conf)
        targets = targets or tuple(conf.targets)
        if not targets:
            raise MendError("no TARGET given (try `mend scan hf:t5`, or --list-targets; or set `targets` "
                            "under [tool.mend] in pyproject.toml)")
        if as_json and sarif:
            raise MendError("--json and --sarif are exclusive")
        path = baseline_path or conf.baseline
        if update_baseline and path is None:
            raise MendError("--update-baseline needs --baseline FILE (or `baseline` under [tool.mend])")
        if update_baseline:
            bl.check_writable(path)  # before the scan, not after it
        only_user = conf.only_user if only_user is None else only_user
        known = None if update_baseline or path is None else bl.read(path)  # a bad baseline fails before compiling
        specs = expand(targets)
        results, failures = _scan_all(specs, load_target, run_scan, ray)
        counted = []
        for s in bl.unique_sites(results):
            s.excluded = conf.excluded(s.file, s.display_file) is not None
            if not s.excluded and not (only_user and s.origin == "library"):
                counted.append(s)
        comparison = None
        root = Path(path).resolve().parent if path else None
        if path is not None:
            seen_files = {bl.key_file(s, root) for s in bl.unique_sites(results)}
            seen_files |= {bl.path_key(os.path.abspath(f), root) for f in map(file_of, specs) if f is not None}

            def in_scope(entry: dict) -> bool:
                """Whether this scan could have seen the entry's break: its file was scanned,
                is not excluded, and is not a library file under --only-user."""
                return (entry["file"] in seen_files and not (only_user and entry.get("origin") == "library")
                        and conf.excluded(str(root / entry["file"]), entry["file"]) is None)
        if update_baseline:
            if failures:
                raise MendError(f"{len(failures)} target(s) failed: the baseline {path} was not updated "
                                "(it would lose their entries)")
            old = bl.read(path) if Path(path).exists() else []
            bl.write(path, counted, keep=[e for e in old if not in_scope(e)])
        elif known is not None:
            comparison = bl.compare(counted, known, root=root, scope=in_scope)
        bl.share_marks(results)
        if as_json:
            by_spec = {r.target: scan_json(r) | ({"seconds": r.seconds} if r.seconds is not None else {})
                       for r in results} | {f[0]: failed_json(*f) for f in failures}
            docs = [by_spec[spec] for spec in specs]
            click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        elif sarif:
            click.echo(json.dumps(scan_sarif(results, failures), indent=2))
        else:
            console = out_console()
            for r in results:
                scan_table(r, console)
        _scan_summary(counted, comparison, path if update_baseline else None)
        for _, error in failures:
            err_console.print(f"mend: error: {error}", highlight=False, markup=False)
    if failures:
        sys.exit(2)  # the worst result of the batch: a target could not be scanned
    if update_baseline:
        sys.exit(0)
    if comparison is not None:
        sys.exit(1 if comparison.new else 0)
    sys.exit(1 if any(s.fixable_by for s in counted) else 0)


def _enter_project(conf) -> None:
    """Configured targets are the project's: run from the folder of its pyproject.toml, so
    that MODULE:FACTORY targets import as from there (file targets are absolute already)."""
    if conf.path is not None:
        os.chdir(conf.path.parent)


def _batch_progress():
    """The progress bar of a batch on stderr: target, done of total, failed, time."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("{task.fields[failed]} failed"), TimeElapsedColumn(), console=err_console, transient=True)


def _each_target(specs: list[str], verb: str, run_one, ray=None, finish=None):
    """``run_one(spec)`` for each target of a batch, with progress (done, left, failed) on
    stderr. A target that fails (a MendError, or a crash in mend) is yielded as
    ``(spec, None, message)`` and the batch goes on; a success as ``(spec, result, None)``.
    With ``ray`` (an address, "" for a local cluster) each target is a Ray task and ``finish``
    runs on the driver (mend/distributed.py)."""
    if ray is not None:
        from mend.distributed import each_target

        yield from each_target(specs, verb, run_one, ray, finish=finish, progress=_batch_progress)
        return
    failed = 0
    with _batch_progress() as progress:
        task = progress.add_task(verb, total=len(specs), failed=0)
        for spec in specs:
            progress.update(task, description=f"{verb} {spec}")
            try:
                with contextlib.redirect_stdout(sys.stderr):
                    outcome = (spec, run_one(spec), None)
            except Exception as exc:  # noqa: BLE001 - recorded; the batch goes on
                outcome = (spec, None, target_failure(spec, exc))
            failed += outcome[2] is not None
            progress.update(task, advance=1, failed=failed)
            yield outcome


def _scan_all(specs: list[str], load_target, run_scan, ray=None):
    """Scan each target; in a batch (more than one) a target that fails is recorded as
    (spec, error) and the batch goes on."""
    if len(specs) == 1 and ray is None:
        with err_console.status(f"building and compiling {specs[0]} under TorchDynamo..."):
            return [run_scan(load_target(specs[0]))], []

    def run_one(spec):
        start = time.perf_counter()
        result = run_scan(load_target(spec))
        result.seconds = round(time.perf_counter() - start, 2)  # build and scan: the batch report's per-target time
        return result

    results, failures = [], []
    for spec, result, error in _each_target(specs, "scanning", run_one, ray):
        if error is None:
            results.append(result)
        else:
            failures.append((spec, error))
    err_console.print(f"mend: {len(specs)} targets: {len(results)} scanned, {len(failures)} failed", highlight=False)
    return results, failures


def _scan_summary(counted, comparison, written) -> None:
    """The baseline's verdict on stderr (stdout holds the table, JSON or SARIF)."""
    if written is not None:
        err_console.print(f"mend: wrote {len(counted)} site(s) to the baseline {written}", highlight=False)
    if comparison is None:
        return
    for s in comparison.new:
        err_console.print(f"mend: new graph break {s.display_file}:{s.line} in {s.qualname} ({s.category}): {s.reason}",
                          highlight=False, markup=False)
    for e in comparison.removable:
        err_console.print(f"mend: fixed, removable from the baseline: {e['file']} in {e['function']} "
                          f"(was line {e.get('line')}: {e.get('source', '')})", highlight=False, markup=False)
    err_console.print(f"mend: {len(comparison.new)} new break site(s), {len(comparison.known)} in the baseline, "
                      f"{len(comparison.removable)} baseline entr{'y' if len(comparison.removable) == 1 else 'ies'} "
                      "removable", highlight=False)


@main.command()
@click.argument("targets", nargs=-1)
@click.option("--write", is_flag=True, help="Replace the target's own file in place (atomically). Files inside "
              "installed packages are never touched: their mended copies go to --out.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Write mended files and certificates under DIR (default mended/ with --write).")
@click.option("--json", "as_json", is_flag=True,
              help='Print {"before", "after", "rewrites", "declined", "unfixable"}.')
@click.option("--seed", default=0, show_default=True, help="Hypothesis seed of the differential tests.")
@click.option("--examples", default=30, show_default=True, type=click.IntRange(min=1),
              help="Hypothesis examples per candidate rewrite (strict raises it to its minimum).")
@click.option("--verify", "verify", type=click.Choice(["fast", "standard", "strict"]), default=None,
              help="[default: standard, or [tool.mend] verify] ""strict: every obligation with a solver encoding proved by Z3, every other one checked, and the "
              "differential tests pass; "
              "standard: differential tests, and no obligation refuted; fast: static checks and a short "
              "differential run (see README).")
@click.option("--unsafe-fixes/--no-unsafe-fixes", default=None, help="Also apply verified fixes labelled unsafe: resting on an "
              "observation of the example run, a proof under the example's sizes, an unknown obligation, or gradients "
              "equal only within tolerance (each says which). Safe fixes are applied by default.")
@click.option("--choose", "choose", type=click.Choice(["model", "roofline", "always", "measure"]), default=None,
              help="[default: model, or [tool.mend] choose] How a data-dependent branch's rewrite is chosen among "
              "keeping the graph break, torch.where and torch.cond, from the candidates that verified: model (the "
              "cost model, falling back to the roofline), roofline (this machine's measured peaks), always (the "
              "rule's own rewrite, GraphMend's policy), measure (time the two best-ranked on the target's inputs).")
@click.option("--max-rounds", default=32, show_default=True, type=click.IntRange(min=1),
              help="Accept at most this many rewrites per target (one per round, each followed by a rescan); "
              "fixable sites left untried are declined, saying so.")
@click.option("--time-limit", type=click.FloatRange(min=1), default=None, metavar="SECONDS",
              help="Per target: try no further candidate rewrite once SECONDS have passed (checked between "
              "candidates): what was verified is kept, and the fixable sites left untried are declined, saying so.")
@click.option("--html", "html_file", type=click.Path(dir_okay=False), help="Also write a self-contained HTML review "
              "page (diffs, obligations, evidence, certificates, declines) to FILE.")
@ray_option
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def fix(targets, write, out_dir, as_json, seed, examples, verify, unsafe_fixes, choose, max_rounds, time_limit,
        html_file, ray, debug):
    """Rewrite the fixable graph breaks of TARGET, verifying each rewrite differentially
    before it is emitted. Prints a unified diff unless --write or --out is given.

    TARGET is FILE.py (defines Model and get_inputs()), FILE.py:FACTORY (returns (model,
    args) or (model, args, kwargs); sites in that file), MODULE:FACTORY (modules importable from the working
    directory: --write replaces them in place) or hf:NAME; without TARGET, the one target
    of [tool.mend] (whose verify, rules, exclude, unsafe_fixes and choose apply). Several targets
    (or patterns: 'models/*.py', 'pkg:*', 'hf:*') are a batch: --out DIR gets each one's
    files under DIR/<target>/ and one combined DIR/report.json. A FILE.py target rewrites that
    file only (a break inside an installed library is declined there: "outside the target's own
    file"); MODULE:FACTORY and hf:NAME targets also rewrite installed files, whose mended
    copies go to DIR/<package path>; load them with
    `python -m mend.run --overlay DIR script.py` or `mend.overlay.activate(DIR)`.
    """
    from mend.worker import start_early

    if targets and ray is None:  # before the imports below (torch, LibCST): they overlap
        start_early(targets)
    from mend import config as cfg
    from mend.pipeline import fix as run_fix
    from mend.pipeline.emit import emit
    from mend.review import check_destination, write_html
    from mend.targets.batch import expand

    with _errors(debug):
        conf = cfg.load()
        out_dir = out_dir and os.path.abspath(out_dir)
        html_file = html_file and os.path.abspath(html_file)
        if not targets:
            _enter_project(conf)
            if len(conf.targets) != 1:
                raise MendError("no TARGET given" + (f" and [tool.mend] names {len(conf.targets)} targets: name one, "
                                                     "or give them as a batch with --out DIR"
                                                     if conf.targets else " (try `mend fix hf:t5`)"))
            targets = tuple(conf.targets)
        specs = expand(targets)
        verify = verify or conf.verify or "standard"
        unsafe_fixes = conf.unsafe_fixes if unsafe_fixes is None else unsafe_fixes
        choose = choose or conf.choose or "model"

        def one(spec, out, html):
            # what the target's code prints while it is loaded and run goes to stderr, never
            # into the diff or the JSON
            start = time.perf_counter()
            with contextlib.redirect_stdout(sys.stderr):
                res = run_fix(spec, seed=seed, max_examples=examples, verify=verify, unsafe_fixes=unsafe_fixes,
                              rules=conf.rules, exclude=cfg.rooted(conf.exclude, conf.path and conf.path.parent),
                              choose=choose, max_rounds=max_rounds, time_limit=time_limit)
            res.seconds = round(time.perf_counter() - start, 2)  # a batch report's per-target time
            written = emit(res, write=write, out_dir=out)
            if html:
                write_html(res, html, written)
            return res, written

        if html_file:
            check_destination(html_file)  # a bad --html fails before the run, not after it
        if len(specs) > 1 or ray is not None:  # on Ray, one target is a batch of one
            _fix_batch(specs, one, out_dir, as_json, html_file, write, verify, ray)
            return
        target = specs[0]
        if write:
            _refuse_read_only(target)
        with err_console.status(f"scanning, rewriting and verifying {target}..."):
            res, written = one(target, out_dir, html_file)
        if as_json:
            click.echo(json.dumps(res.to_json(), indent=2))
            return
        console = out_console()
        if not written:
            click.echo(res.diff(), nl=False)
        _print_fix(res, target, verify, written, console)
        if not written and (out_dir or write):   # helper-84: an --out that wrote nothing was silent
            console.print("  wrote     nothing: no rewrite was applied, so "
                          + (f"nothing was written to {out_dir}" if out_dir else "no file was changed"),
                          highlight=False, markup=False)
        if html_file:
            console.print(f"  wrote {html_file}", highlight=False, markup=False)


def _outcomes_phrase(outcomes: dict) -> str:
    """The predicate outcomes the differential test covered, in words (helper-84: the raw dict,
    keyed by lines of a scratch copy, read as noise)."""
    if not outcomes:
        return ""
    natural = sorted({v for o in outcomes.values() if isinstance(o, dict) for v in o.get("natural", [])}, key=str)
    seen = "natural runs: " + (" and ".join(map(str, natural)) if natural else "none") if len(outcomes) == 1 else ""
    what = "the predicate" if len(outcomes) == 1 else f"each of {len(outcomes)} predicates"
    return f", {what} forced True and False" + (f" ({seen})" if seen else "")


def _evidence_line(rw, verify: str) -> str:
    """One rewrite's evidence, by kind: the differential test's inputs and forced outcomes, then
    the obligations proved by Z3, checked statically (a screen of the code, a cited lemma) and
    checked by an observation, and the unknown ones (an unsafe fix's)."""
    from verifier.encoders import OBSERVED

    ev, obs, ver = rw.evidence, rw.obligations, rw.verification or {}
    count = {k: sum(1 for o in obs if o.get("result") == k) for k in ("proved", "checked", "unknown")}
    observed = sum(1 for o in obs if o.get("result") == "checked" and o.get("kind") in OBSERVED)
    parts = [f"{count['proved']} proved by Z3"]
    if count["checked"] - observed:
        parts.append(f"{count['checked'] - observed} checked statically")
    if observed:
        parts.append(f"{observed} observed (on the example run or the installed torch)")
    if count["unknown"]:
        parts.append(f"{count['unknown']} unknown")
    return (f"differential test: {ev['examples']} inputs, the example's and drawn ones"
            f"{_outcomes_phrase(ev.get('predicate_outcomes') or {})}; "
            f"--verify {ver.get('level', verify)}: {len(obs)} obligations, {', '.join(parts)}"
            f"{', ' + ver['use'] if ver.get('use') == 'inference-only' else ''}")


def _withheld_brief(d) -> str:
    """A withheld unsafe fix (a Declined with ``reasons``) in one line for the console
    (helper-89: the full text, repeated per site, buried the report): what it rests on, each
    reason up to its parenthesis; --json and --html keep the whole reason."""
    from mend.pipeline import UNTESTED

    if not d.reasons:
        return d.reason
    brief = "; ".join(r.split(" (", 1)[0] for r in d.reasons)
    tested = ", its differential test not run" if d.reason.startswith(UNTESTED) else ""
    return f"unsafe fix, not applied without --unsafe-fixes{tested}: {brief} (the full reasons: --json, --html)"


def _print_fix(res, target: str, verify: str, written, console) -> None:
    """The fix report of one target: counts, then each rewrite, decline and unfixable site."""
    withheld = sum(1 for d in res.declined if d.safety)
    sb, sa = getattr(res.before, "steady_graph_count", None), getattr(res.after, "steady_graph_count", None)
    steady = (f" (steady state {sb} -> {sa})" if None not in (sb, sa) and (sb, sa) != (res.before.graph_count,
                                                                              res.after.graph_count) else "")
    fb, fa = getattr(res.before, "frames_skipped", 0), getattr(res.after, "frames_skipped", 0)
    # helper-92: a frame Dynamo skipped compiles again after the fix, and the graph count alone hid it
    steady += f", frames skipped {fb} -> {fa}" if fb != fa else ""
    console.print(f"[bold]{target}[/]: graphs {res.before.graph_count} -> {res.after.graph_count}{steady}, "
                  f"breaks {res.before.graph_break_count} -> {res.after.graph_break_count}; "
                  f"{len(res.rewrites)} rewrite(s) verified and applied, "
                  + (f"{withheld} unsafe fix(es) withheld (apply with --unsafe-fixes), " if withheld else "")
                  + f"{len(res.declined) - withheld} declined", highlight=False)
    for rw in res.rewrites:
        ev = rw.evidence
        console.print(f"  fixed     {rw.site}  {rw.rule} [{rw.safety['label']}]: {rw.detail} "
                      f"({_evidence_line(rw, verify)})", highlight=False, markup=False)
        if "without autograd" in rw.detail:   # helper-73: the count is the no_grad one (eval + no_grad, as the paper)
            console.print(f"  note      {rw.site}  the graph counts are taken in eval mode under torch.no_grad (the "
                          "paper's setting); this rewrite takes effect only there: with autograd on, the `if` runs "
                          "as before and its graph break stays", highlight=False, markup=False)
        if str(ev.get("torchscript") or "").startswith("lost"):
            console.print(f"  note      {rw.site}  torch.jit.script compiled the original module, not the mended one "
                          f"({ev['torchscript'][6:]}); TorchScript is deprecated, torch.compile runs it",
                          highlight=False, markup=False)
    for d in res.declined:
        what = "withheld " if d.safety else "declined "
        console.print(f"  {what} {d.site}  {d.rule}: {_withheld_brief(d) if d.safety else d.reason}",
                      highlight=False, markup=False)
    for s in res.after.sites:
        if not s.fixable_by:
            console.print(f"  unfixable {s.display_file}:{res.original_line(s)}  {s.category}: {res.original_reason(s)}",
                          highlight=False, markup=False)
    for w in written:
        console.print(f"  wrote {w}", highlight=False, markup=False)
    if any("mend-trap:" in code for code in res.files.values()) and res.rewrites:
        # helper-84: said in each rewrite's detail, where a new user read past it
        console.print("  next      call mend.validation_runtime.install(model) on the module you call: a rewritten "
                      "check that fails under torch.compile raises RuntimeError('mend-trap:...') until it restores "
                      "the original exception (eager runs the original check)", highlight=False, markup=False)


def _slug(spec: str) -> str:
    """A folder name for a target in a batch's --out DIR (``hf:bart@fp16`` -> ``hf_bart_fp16``)."""
    import re

    return re.sub(r"[^A-Za-z0-9._-]+", "_", spec).strip("_") or "target"


def _fix_batch(specs, one, out_dir, as_json, html_file, write, verify, ray=None) -> None:
    """``mend fix`` over several targets: each one's mended files, certificates (and review
    page) under DIR/<target>/, one combined report DIR/report.json (and on stdout with
    --json); a target that fails is recorded and the batch goes on; exit 2 if one failed."""
    if not out_dir or write:
        what = f"{len(specs)} targets: a batch" if len(specs) > 1 else "--ray (a batch of one target)"
        raise MendError(f"{what} needs --out DIR (each target's files go to DIR/<target>/) and no --write")
    if html_file:
        raise MendError("--html FILE is one page: in a batch each target's page is written as DIR/<target>/review.html")
    root = Path(out_dir)
    docs, failed = [], 0
    console = err_console if as_json else out_console()

    def run_one(spec):
        folder = root / _slug(spec)
        return folder, *one(spec, str(folder), str(folder / "review.html"))

    finish = None
    if ray is not None:  # each task emits on its node; finish writes the files under DIR/<target>/ here
        from mend.distributed import fix_parts

        run_one, finish = fix_parts(one, root, _slug)
    for spec, result, error in _each_target(specs, "fixing", run_one, ray, finish):
        if error is not None:
            failed += 1
            docs.append({"target": spec, "error": error})
            console.print(f"[red]{escape(spec)}[/]: error: {escape(error)}", highlight=False)
            continue
        folder, res, written = result
        docs.append({"target": spec, **res.to_json(), "out_dir": str(folder), "seconds": res.seconds})
        if not as_json:
            _print_fix(res, spec, verify, written, console)
    report = root / "report.json"
    root.mkdir(parents=True, exist_ok=True)
    write_atomic(report, json.dumps(docs, indent=2) + "\n")  # a reader never sees half a report
    if as_json:
        click.echo(json.dumps(docs, indent=2))
    err_console.print(f"mend: {len(specs)} targets: {len(specs) - failed} fixed, {failed} failed; report {report}",
                      highlight=False)
    if failed:
        sys.exit(2)


def _refuse_read_only(target: str) -> None:
    """``--write`` on a FILE target that is read-only: the error before any verification
    (emit refuses it again, atomically, for every file it writes)."""
    from mend.targets import file_of

    path = file_of(target)
    if path is not None and path.is_file() and read_only(path):
        raise MendError(f"{path}: file is read-only; nothing was written (use the diff, or --out DIR)")


@main.group()
def cert() -> None:
    """Certificates written by `mend fix --out DIR` / `--write` (DIR/certificates/*.json)."""


@cert.command("verify")
@click.argument("certs", nargs=-1, type=click.Path())
@click.option("--rerun", is_flag=True, help="Also replay the differential test from the recorded seed.")
@click.option("--timeout-ms", type=int, default=None, help="z3 timeout per replayed query (default: the recorded "
              "timeout, at least 10 s).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def cert_verify(certs, rerun, timeout_ms, debug):
    """Re-check certificates without trusting the run that wrote them: the files still hash
    to the recorded values, every SMT query replays with z3 to its recorded result and is the
    encoding of its obligation, and (--rerun) the differential test passes again.

    Exit 0: every certificate holds; 1: some check failed; 2: a certificate cannot be read.
    """
    import mend.runtime  # noqa: F401 - registers mend::capture: the capture checks re-read its registration
    from mend.pipeline.obligations_check import rule_obligations
    from verifier.certs import CertError, load, verify_file

    rerun_fn = None
    if rerun:  # the verifier builds no target: mend's executors replay the test
        from mend.pipeline.rerun import rerun as rerun_fn

    # MODULE:FACTORY certificates name modules imported from the working directory, as
    # `mend fix` imported them (`python -m` puts it first on sys.path)
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    failed = False
    with _errors(debug):
        if not certs:
            raise MendError("no CERT given (certificates are written under DIR/certificates/ by mend fix --out DIR)")
        console = out_console()
        for path in certs:
            try:
                rep = verify_file(path, rerun=rerun_fn, timeout_ms=timeout_ms)
            except CertError as exc:
                raise MendError(str(exc)) from exc
            if not rep.problems:   # its obligations are all the rule states (mend knows its rules)
                problem, note = rule_obligations(Path(path), load(Path(path))[1])
                rep.problems += [problem] if problem else []
                rep.notes += [note] if note else []
            if rep.ok:
                n = rep.checked.get("queries_replayed", 0)
                extra = f"; rerun: {rep.checked['rerun']}" if "rerun" in rep.checked else ""
                c, lem = rep.checked.get("checks_rerun", 0), rep.checked.get("lemmas_replayed", 0)
                console.print(f"[green]ok[/]      {escape(str(path))}: hashes match, {n} SMT quer{'y' if n == 1 else 'ies'} "
                              f"replayed to the recorded results, {c} check{'' if c == 1 else 's'} re-run, "
                              f"{lem} cited lemma{'' if lem == 1 else 's'} replayed{escape(extra)}", highlight=False)
            else:
                failed = True
                console.print(f"[red]FAILED[/]  {escape(str(path))}", highlight=False)
                for p in rep.problems:
                    console.print(f"  - {p}", highlight=False, markup=False)
            for note in rep.notes:
                console.print(f"  note: {note}", highlight=False, markup=False)
    sys.exit(1 if failed else 0)


@main.command("rules")
@click.argument("name", required=False)
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def rules_command(name, debug):
    """List the rewrite rules with their fix safety, or print the documentation of rule NAME
    (generated from the rule: doc, categories, obligations, fix safety, examples).

    Exit 2: no rule is called NAME.
    """
    from rich.markdown import Markdown

    from mend.rules import RULES
    from mend.rules._doc import rule_page, rules_table

    with _errors(debug):
        console = out_console()
        if name is None:
            console.print(rules_table(RULES.values()))
            return
        rule = RULES.get(name) or next((r for r in RULES.values() if r.module_name == name), None)
        if rule is None:
            raise MendError(f"unknown rule {name!r} (the rules: {', '.join(sorted(RULES))})")
        if sys.stdout.isatty():
            console.print(Markdown(rule_page(rule)))
            return
        # a pipe or file: 100 columns, no trailing padding (helper-67 saw 200-column lines)
        page = Console(file=io.StringIO(), width=100, color_system=None)
        page.print(Markdown(rule_page(rule)))
        print("\n".join(line.rstrip() for line in page.file.getvalue().splitlines()))


def run() -> None:
    """The ``mend`` command: :func:`main`, then a quick exit. Exit handlers run (the warm
    worker stopped, temporary folders removed, logs flushed) and the streams are flushed;
    the interpreter's own teardown of torch, transformers and Z3 is skipped (1.4 s on 2
    cores, measured, with nothing left to save). Every file mend writes is complete before
    this point (written atomically)."""
    import atexit

    try:
        main()
        code = 0
    except SystemExit as exc:
        code = exc.code
    if not isinstance(code, int):  # sys.exit("message") or sys.exit(None)
        if code is not None:
            print(code, file=sys.stderr)
        code = 0 if code is None else 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed pipe (`mend scan | head`)
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
