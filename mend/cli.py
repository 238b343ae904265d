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
@click.option("--debug", is_flag=True, help="Show tracebacks.")
def fix(target, write, out_dir, as_json, seed, examples, debug):
    """Rewrite the fixable graph breaks of TARGET, verifying each rewrite differentially
    before it is emitted. Prints a unified diff unless --write or --out is given.

    TARGET is FILE.py (defines Model and get_inputs()) or hf:NAME. Mended copies of
    installed files go to DIR/<package path>; load them with
    `python -m mend.run --overlay DIR script.py` or `mend.overlay.activate(DIR)`.
    """
    from pathlib import Path

    from mend.fix import certificate, fix as run_fix, write_atomic

    with _errors(debug):
        with err_console.status(f"scanning, rewriting and verifying {target}..."):
            res = run_fix(target, seed=seed, max_examples=examples)
        written = []
        if write or out_dir:
            dest = Path(out_dir or "mended")
            if write and not res.installed:
                if res.files:
                    write_atomic(res.file, res.mended)
                    written.append(str(res.file))
            else:
                for rel, code in res.files.items():
                    path = dest / (Path(rel).name if not res.installed else rel)
                    path.parent.mkdir(parents=True, exist_ok=True)
                    write_atomic(path, code)
                    written.append(str(path))
            if res.rewrites:
                cert_dir = dest / "certificates"
                cert_dir.mkdir(parents=True, exist_ok=True)
                for i, rw in enumerate(res.rewrites, 1):
                    cert = cert_dir / f"{Path(rw['file']).stem}.{i}.{rw['rule']}.json"
                    write_atomic(cert, json.dumps(certificate(res, rw), indent=2))
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
            console.print(f"  fixed     {rw['site']}  {rw['rule']}: {rw['detail']} "
                          f"({ev['examples']} examples, predicate outcomes {ev['predicate_outcomes'] or 'n/a'})",
                          highlight=False)
        for d in res.declined:
            console.print(f"  declined  {d['site']}  {d['rule']}: {d['reason']}", highlight=False)
        for s in res.after.sites:
            if not s.fixable_by:
                console.print(f"  unfixable {s.display_file}:{s.line}  {s.category}: {s.reason}", highlight=False)
        for w in written:
            console.print(f"  wrote {w}", highlight=False)


if __name__ == "__main__":
    main()
