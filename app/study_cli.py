"""``latticelab sweep study.toml`` and ``latticelab tc results.csv``: batch critical-temperature studies
(sim/studies). ``add_study_commands`` adds both to the command line (app/cli.py ``build_parser``)."""
from __future__ import annotations

import sys


def _workers(text: str):
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        import argparse
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto'; got {text!r}")
    return n


def add_study_commands(subparsers, parser_class) -> None:
    sweep = subparsers.add_parser(
        "sweep", help="run a study file's grid of points into one results table (resumes an unfinished one)")
    sweep.add_argument("study", help="study file (TOML): model, [parameters], [grid], [run]")
    sweep.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this existing Dask cluster")
    sweep.add_argument("--workers", type=_workers, metavar="N|auto",
                       help="run on a Dask cluster on this machine with N workers ('auto': one per GPU, pinned "
                            "to it, or one per CPU core); default: in this process")
    sweep.add_argument("--out", help="results table, .csv or .parquet (CSV always; Parquet too when pyarrow "
                                     "is installed); default: the study file's name with .csv")
    sweep.add_argument("--overwrite", action="store_true",
                       help="start the table afresh instead of resuming the existing one")
    sweep.add_argument("--quick", action="store_true",
                       help="the study file's quick form: its [quick] tables over its own (fewer points, shorter "
                            "runs, the same measures); default table: the study's name with -quick.csv")
    sweep.set_defaults(handler=run_sweep_command)

    tc = subparsers.add_parser("tc", help="critical temperatures from the Binder crossings of a results table")
    tc.add_argument("table", help="results table of 'latticelab sweep' (.csv or .parquet)")
    tc.add_argument("--plot", metavar="DIR", help="save PNG figures of U(T), C_v(T) and chi(T) per group here")
    tc.add_argument("--bootstrap", type=int, default=500, metavar="N", help="bootstrap samples for the errors")
    tc.set_defaults(handler=run_tc_command)


def run_sweep_command(args) -> int:
    from pathlib import Path

    from latticelab.sim.studies import load_study
    from latticelab.sim.studies.sweep import run_sweep

    study = load_study(args.study, quick=args.quick)    # StudyError (a ParameterError): one message, exit 2
    stem = Path(args.study).with_suffix("")
    out = args.out or f"{stem}{'-quick' if args.quick else ''}.csv"
    for quantity, reason in study.unavailable.items():
        print(f"latticelab: {quantity} unavailable: {reason}", file=sys.stderr)
    where = (f"on {args.scheduler}" if args.scheduler else
             f"on a local Dask cluster ({args.workers} workers)" if args.workers else "in this process")
    print(f"latticelab: {len(study.points)} points of {study.model} {where} -> {out}", file=sys.stderr)
    try:
        result = run_sweep(study, out, scheduler=args.scheduler, workers=args.workers, overwrite=args.overwrite)
    except KeyboardInterrupt:
        print(f"latticelab: interrupted; the finished points are in {out} (run the same command to resume)",
              file=sys.stderr)
        return 130
    print(f"latticelab: {result.done} points run, {result.skipped} already in the table -> {result.csv_path}"
          + (f" and {result.parquet_path}" if result.parquet_path else ""), file=sys.stderr)
    for point, error in result.failed:
        print(f"latticelab: point {point.values} failed: {error}", file=sys.stderr)
    if result.failed:
        print(f"latticelab: {len(result.failed)} points failed; run the same command again to retry them",
              file=sys.stderr)
        return 1
    return 0


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
