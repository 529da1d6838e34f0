"""``latticelab sweep study.toml``: a study file's grid of points run into one results table (sim/studies), in
this process or on a Dask cluster; an unfinished table is resumed."""
from __future__ import annotations

import argparse
import sys


def add_command(sub, parser_class) -> None:
    sweep = sub.add_parser(
        "sweep", help="run a study file's grid of points into one results table (resumes an unfinished one)")
    sweep.add_argument("study", help="study file (TOML): model, [parameters], [grid], [run]")
    sweep.add_argument("--scheduler", metavar="tcp://HOST:PORT", help="run on this existing Dask cluster")
    sweep.add_argument("--workers", type=workers, metavar="N|auto",
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


def workers(text: str):
    """argparse type of --workers: a positive integer or 'auto'."""
    if text == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer or 'auto'; got {text!r}")
    return n


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
