"""The ``mend`` command line (click). Exit codes follow linters: 0 nothing fixable,
1 fixable graph breaks found, 2 error."""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import traceback
from contextlib import contextmanager

import click
from rich.console import Console

from mend import __version__
from mend.errors import MendError

# errors are one line, however narrow the terminal or pipe
err_console = Console(stderr=True, soft_wrap=True)

# Hypothesis keeps a `.hypothesis/` folder in the working directory (its example database is
# off, but it still caches there): mend keeps the user's folder clean (new-user trial)
os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "mend-hypothesis"))


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
        err_console.print(f"[red]mend: error:[/] {exc}", highlight=False)
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
        err_console.print(f"[red]mend: internal error:[/] {type(exc).__name__}: {exc} (rerun with --debug for the traceback)",
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
@click.option("--list-targets", is_flag=True, help="List the built-in hf: catalogue and exit.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def scan(targets, as_json, sarif, list_targets, debug):
    """Find, count and explain every graph break of TARGET.

    TARGET is FILE.py (defines Model and get_inputs()), FILE.py:FACTORY,
    MODULE:FACTORY or hf:NAME (see --list-targets).
    """
    from mend.report import scan_json, scan_sarif, scan_table
    from mend.scan import scan as run_scan
    from mend.targets import load_target

    with _errors(debug):
        if list_targets:
            if targets or as_json or sarif:
                raise MendError("--list-targets takes no TARGET, --json or --sarif")
            _list_targets()
            return
        if not targets:
            raise MendError("no TARGET given (try `mend scan hf:t5`, or --list-targets)")
        if as_json and sarif:
            raise MendError("--json and --sarif are exclusive")
        results = []
        for spec in targets:
            with err_console.status(f"building {spec}..."):
                target = load_target(spec)
            with err_console.status(f"compiling {spec} under TorchDynamo..."):
                results.append(run_scan(target))
        if as_json:
            docs = [scan_json(r) for r in results]
            click.echo(json.dumps(docs[0] if len(docs) == 1 else docs, indent=2))
        elif sarif:
            click.echo(json.dumps(scan_sarif(results), indent=2))
        else:
            console = out_console()
            for r in results:
                scan_table(r, console)
    sys.exit(1 if any(r.fixable for r in results) else 0)


@main.command()
@click.argument("target")
@click.option("--write", is_flag=True, help="Replace the target's own file in place (atomically). Files inside "
              "installed packages are never touched: their mended copies go to --out.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False),
              help="Write mended files and certificates under DIR (default mended/ with --write).")
@click.option("--json", "as_json", is_flag=True, help='Print {"before", "after", "rewrites", "declined"}.')
@click.option("--seed", default=0, show_default=True, help="Hypothesis seed of the differential tests.")
@click.option("--examples", default=30, show_default=True, type=click.IntRange(min=1),
              help="Hypothesis examples per candidate rewrite (strict raises it to its minimum).")
@click.option("--verify", "verify", type=click.Choice(["fast", "standard", "strict"]), default="standard",
              show_default=True, help="strict: every obligation with a solver encoding proved by Z3, every other one checked, and the "
              "differential tests pass; "
              "standard: differential tests, and no obligation refuted; fast: static checks and a short "
              "differential run (see README).")
@click.option("--unsafe-fixes", is_flag=True, help="Also apply verified fixes labelled unsafe: resting on an "
              "observation of the example run, a proof under the example's sizes, an unknown obligation, or gradients "
              "equal only within tolerance (each says which). Safe fixes are applied by default.")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def fix(target, write, out_dir, as_json, seed, examples, verify, unsafe_fixes, debug):
    """Rewrite the fixable graph breaks of TARGET, verifying each rewrite differentially
    before it is emitted. Prints a unified diff unless --write or --out is given.

    TARGET is FILE.py (defines Model and get_inputs()), FILE.py:FACTORY (returns (model,
    args) or (model, args, kwargs); sites in that file), MODULE:FACTORY (modules importable from the working
    directory: --write replaces them in place) or hf:NAME. Mended copies of
    installed files go to DIR/<package path>; load them with
    `python -m mend.run --overlay DIR script.py` or `mend.overlay.activate(DIR)`.
    """
    from mend.pipeline import fix as run_fix
    from mend.pipeline.emit import emit

    with _errors(debug):
        if write:
            _refuse_read_only(target)
        # what the target's code prints while it is loaded and run goes to stderr, never
        # into the diff or the JSON
        with err_console.status(f"scanning, rewriting and verifying {target}..."), \
                contextlib.redirect_stdout(sys.stderr):
            res = run_fix(target, seed=seed, max_examples=examples, verify=verify, unsafe_fixes=unsafe_fixes)
        written = emit(res, write=write, out_dir=out_dir)
        if as_json:
            click.echo(json.dumps(res.to_json(), indent=2))
            return
        console = out_console()
        withheld = sum(1 for d in res.declined if d.safety)
        if not written:
            click.echo(res.diff(), nl=False)
        sb, sa = getattr(res.before, "steady_graph_count", None), getattr(res.after, "steady_graph_count", None)
        steady = (f" (steady state {sb} -> {sa})" if None not in (sb, sa) and (sb, sa) != (res.before.graph_count,
                                                                                  res.after.graph_count) else "")
        console.print(f"[bold]{target}[/]: graphs {res.before.graph_count} -> {res.after.graph_count}{steady}, "
                      f"breaks {res.before.graph_break_count} -> {res.after.graph_break_count}; "
                      f"{len(res.rewrites)} rewrite(s) verified and applied, "
                      + (f"{withheld} unsafe fix(es) withheld (apply with --unsafe-fixes), " if withheld else "")
                      + f"{len(res.declined) - withheld} declined", highlight=False)
        for rw in res.rewrites:
            ev, obs, ver = rw.evidence, rw.obligations, rw.verification or {}
            proved = sum(1 for o in obs if o.get("result") == "proved")
            checked = sum(1 for o in obs if o.get("result") == "checked")
            console.print(f"  fixed     {rw.site}  {rw.rule} [{rw.safety['label']}]: {rw.detail} "
                          f"({ev['examples']} examples, predicate outcomes {ev['predicate_outcomes'] or 'n/a'}; "
                          f"--verify {ver.get('level', verify)}: {proved}/{len(obs)} obligations proved"
                          f"{f', {checked} checked' if checked else ''}"
                          f"{', ' + ver['use'] if ver.get('use') == 'inference-only' else ''})",
                          highlight=False, markup=False)
        for d in res.declined:
            what = "withheld " if d.safety else "declined "
            console.print(f"  {what} {d.site}  {d.rule}: {d.reason}", highlight=False, markup=False)
        for s in res.after.sites:
            if not s.fixable_by:
                console.print(f"  unfixable {s.display_file}:{res.original_line(s)}  {s.category}: {s.reason}",
                              highlight=False)
        for w in written:
            console.print(f"  wrote {w}", highlight=False)


def _refuse_read_only(target: str) -> None:
    """``--write`` on a FILE target that is read-only: the error before any verification
    (emit refuses it again, atomically, for every file it writes)."""
    import os
    from pathlib import Path

    path = Path(target.rsplit(":", 1)[0] if not target.startswith("hf:") and ".py:" in target else target)
    if path.suffix == ".py" and path.is_file() and (not os.access(path, os.W_OK) or not path.stat().st_mode & 0o222):
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
    from rich.markup import escape

    import mend.runtime  # noqa: F401 - registers mend::capture: the capture checks re-read its registration
    from verifier.certs import CertError, verify_file

    rerun_fn = None
    if rerun:  # the verifier builds no target: mend's executors replay the test
        from mend.pipeline.rerun import rerun as rerun_fn
    import os

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
        console.print(Markdown(rule_page(rule)))


if __name__ == "__main__":
    main()
