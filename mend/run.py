"""``python -m mend.run --overlay DIR script.py [args...]``: run a program with the mended
copies under DIR loaded in place of the installed modules (see :mod:`mend.overlay`)."""
from __future__ import annotations

import argparse
import runpy
import sys

from mend.overlay import activate


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m mend.run", description=__doc__)
    parser.add_argument("--overlay", required=True, help="folder of mended modules (mend fix --out)")
    parser.add_argument("script", help="the Python program to run")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    ns = parser.parse_args(argv)
    activate(ns.overlay)
    sys.argv = [ns.script, *ns.args]
    runpy.run_path(ns.script, run_name="__main__")


if __name__ == "__main__":
    main()
