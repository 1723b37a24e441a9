"""The ``minitf`` command (also ``python -m minitf``).

    minitf gradcheck [--backend numpy|cupy] [--only TEXT]
        Check every hand-written backward pass against central differences and print the table.
        Exit status 1 if any tensor fails.
"""
from __future__ import annotations

import argparse
import sys

from minitf import backend


def _gradcheck(args) -> int:
    from minitf import gradcheck_cases
    from minitf.gradcheck import format_table

    names = [n for n in gradcheck_cases.CASES if args.only is None or args.only.lower() in n.lower()]
    if not names:
        print(f"minitf gradcheck: no check matches --only {args.only!r}", file=sys.stderr)
        return 2
    print(f"gradient checks on {backend.backend_name()}, float64, central differences\n")
    rows = []
    for name in names:
        rows += gradcheck_cases.run(name)
    print(format_table(rows))
    return 0 if all(r.passed for r in rows) else 1


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minitf", description="minitf: a Transformer written from scratch in NumPy, "
                                   "with every backward pass written by hand.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    check = commands.add_parser(
        "gradcheck", help="check every backward pass against finite differences",
        description="Check the gradients of every op and module (inputs and parameters) against "
                    "central differences in float64, and print a table of max relative errors. "
                    "Exit status 1 if any tensor fails.")
    check.add_argument("--backend", choices=backend.BACKENDS, default=None,
                       help="array backend to run on (default: numpy, or $MINITF_BACKEND)")
    check.add_argument("--only", metavar="TEXT", default=None,
                       help="run only the checks whose name contains TEXT (e.g. 'attention')")
    check.set_defaults(run=_gradcheck)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "backend", None):
            backend.use(args.backend)
        return args.run(args)
    except backend.BackendUnavailable as err:
        print(f"minitf {args.command}: {err}", file=sys.stderr)
        return 2
