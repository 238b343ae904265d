"""The ``mend`` command line (click). Exit codes follow linters: 0 nothing fixable,
1 fixable graph breaks found, 2 error."""
from __future__ import annotations

import json
import sys
import traceback
from contextlib import contextmanager

import click
from rich.console import Console

from mend import __version__
from mend.errors import MendError

# errors are one line, however narrow the terminal or pipe
err_console = Console(stderr=True, soft_wrap=True)


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
@click.option("--examples", default=30, show_default=True, help="Hypothesis examples per candidate rewrite.")
@click.option("--verify", "verify", type=click.Choice(["fast", "standard", "strict"]), default="standard",
              show_default=True, help="strict: every proof obligation proved by Z3 and the differential tests pass; "
              "standard: differential tests, and no obligation refuted; fast: static checks and a short "
              "differential run (see README).")
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def fix(target, write, out_dir, as_json, seed, examples, verify, debug):
    """Rewrite the fixable graph breaks of TARGET, verifying each rewrite differentially
    before it is emitted. Prints a unified diff unless --write or --out is given.

    TARGET is FILE.py (defines Model and get_inputs()), FILE.py:FACTORY (returns (model,
    args); sites in that file), MODULE:FACTORY (modules importable from the working
    directory: --write replaces them in place) or hf:NAME. Mended copies of
    installed files go to DIR/<package path>; load them with
    `python -m mend.run --overlay DIR script.py` or `mend.overlay.activate(DIR)`.
    """
    from pathlib import Path

    from mend.fix import certificate, fix as run_fix, write_atomic

    with _errors(debug):
        with err_console.status(f"scanning, rewriting and verifying {target}..."):
            res = run_fix(target, seed=seed, max_examples=examples, verify=verify)
        written = []
        if write or out_dir:
            dest = Path(out_dir or "mended")
            placed = {}  # file -> (mended path, original path or None, original module or None)
            if write and not res.installed:
                if res.files:
                    write_atomic(res.file, res.mended)
                    written.append(str(res.file))
                    placed = {rel: (res.file, None, None) for rel in res.files}
            else:
                for rel, code in res.files.items():
                    own = res.in_place(rel) if write and res.installed else None
                    if own is not None:  # MODULE:FACTORY: the user's module, replaced in place
                        write_atomic(own, code)
                        written.append(str(own))
                        placed[rel] = (own, None, None)
                        continue
                    path = dest / (Path(rel).name if not res.installed else rel)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(path, code)
                    written.append(str(path))
                    placed[rel] = (path, None if res.installed else res.file,
                                   rel[:-3].replace("/", ".") if res.installed else None)
            if res.rewrites:
                from verifier.certs import dumps, relpath_from

                cert_dir = dest / "certificates"
                cert_dir.mkdir(parents=True, exist_ok=True)
                for i, rw in enumerate(res.rewrites, 1):
                    cert = cert_dir / f"{Path(rw['file']).stem}.{i}.{rw['rule']}.json"
                    mended, orig, module = placed.get(rw["file"], (None, None, None))
                    paths = {"mended": relpath_from(cert, mended) if mended else None,
                             "original": relpath_from(cert, orig) if orig else None, "original_module": module}
                    write_atomic(cert, dumps(certificate(res, rw, paths)))
                    written.append(str(cert))
        if as_json:
            click.echo(json.dumps({"before": res.before.to_json(), "after": res.after.to_json(),
                                   "rewrites": res.rewrites, "declined": res.declined}, indent=2))
            return
        console = out_console()
        if not written:
            click.echo(res.diff(), nl=False)
        console.print(f"[bold]{target}[/]: graphs {res.before.graph_count} -> {res.after.graph_count}, "
                      f"breaks {res.before.graph_break_count} -> {res.after.graph_break_count}; "
                      f"{len(res.rewrites)} rewrite(s) verified, {len(res.declined)} declined", highlight=False)
        for rw in res.rewrites:
            ev = rw["evidence"]
            obs = rw.get("obligations") or []
            proved = sum(1 for o in obs if o.get("result") == "proved")
            ver = rw.get("verification") or {}
            console.print(f"  fixed     {rw['site']}  {rw['rule']}: {rw['detail']} "
                          f"({ev['examples']} examples, predicate outcomes {ev['predicate_outcomes'] or 'n/a'}; "
                          f"--verify {ver.get('level', verify)}: {proved}/{len(obs)} obligations proved"
                          f"{', ' + ver['use'] if ver.get('use') == 'inference-only' else ''})",
                          highlight=False)
        for d in res.declined:
            console.print(f"  declined  {d['site']}  {d['rule']}: {d['reason']}", highlight=False, markup=False)
        for s in res.after.sites:
            if not s.fixable_by:
                console.print(f"  unfixable {s.display_file}:{s.line}  {s.category}: {s.reason}", highlight=False)
        for w in written:
            console.print(f"  wrote {w}", highlight=False)


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

    from verifier.certs import CertError, verify_file

    failed = False
    with _errors(debug):
        if not certs:
            raise MendError("no CERT given (certificates are written under DIR/certificates/ by mend fix --out DIR)")
        console = out_console()
        for path in certs:
            try:
                rep = verify_file(path, rerun=rerun, timeout_ms=timeout_ms)
            except CertError as exc:
                raise MendError(str(exc)) from exc
            if rep.ok:
                n = rep.checked.get("queries_replayed", 0)
                extra = f"; rerun: {rep.checked['rerun']}" if "rerun" in rep.checked else ""
                console.print(f"[green]ok[/]      {escape(str(path))}: hashes match, {n} SMT quer{'y' if n == 1 else 'ies'} "
                              f"replayed to the recorded results{escape(extra)}", highlight=False)
            else:
                failed = True
                console.print(f"[red]FAILED[/]  {escape(str(path))}", highlight=False)
                for p in rep.problems:
                    console.print(f"  - {p}", highlight=False, markup=False)
            for note in rep.notes:
                console.print(f"  note: {note}", highlight=False, markup=False)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
