"""``latticelab tc results.csv``: critical temperatures from the Binder crossings of a results table of
``latticelab sweep`` (sim/studies/tc.py), with bootstrap errors and, with --plot, figures."""
from __future__ import annotations

import sys


def add_command(sub, parser_class) -> None:
    tc = sub.add_parser("tc", help="critical temperatures from the Binder crossings of a results table")
    tc.add_argument("table", help="results table of 'latticelab sweep' (.csv or .parquet)")
    tc.add_argument("--plot", metavar="DIR", help="save PNG figures of U(T), C_v(T) and chi(T) per group here")
    tc.add_argument("--bootstrap", type=int, default=500, metavar="N", help="bootstrap samples for the errors")
    tc.set_defaults(handler=run_tc_command)


def run_tc_command(args) -> int:
    import os

    from latticelab.sim.params import ParameterError
    from latticelab.sim.studies.tc import analyse, describe, load_rows, plot, validate_rows, varying_keys

    if args.bootstrap < 2:
        raise ParameterError("bootstrap", f"must be a whole number >= 2 (samples for the errors); got {args.bootstrap}")
    if args.plot:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ParameterError("plot", "the figures need matplotlib: pip install 'latticelab[study]' "
                                         "(or run .ci/setup, which installs it)") from None
    if not os.path.isfile(args.table):
        raise ParameterError("table", f"{args.table} is not a file")
    rows = load_rows(args.table)
    if not rows:
        print(f"latticelab: {args.table} has no rows", file=sys.stderr)
        return 1
    rows, notes = validate_rows(rows, args.table)
    for note in notes:
        print(f"latticelab: {args.table}: {note}", file=sys.stderr)
    if not rows:
        raise ParameterError("table", f"{args.table}: no row is fit for the analysis")
    results = analyse(rows, n_boot=args.bootstrap)
    varying = varying_keys(results)
    for result in results:
        print(describe(result, varying))
    if args.plot:
        for path in plot(rows, results, args.plot):
            print(f"latticelab: wrote {path}", file=sys.stderr)
    return 0
