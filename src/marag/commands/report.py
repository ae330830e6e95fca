"""``marag report``: compare run directories in one table, with plots."""

from __future__ import annotations

import argparse
import sys
from typing import Any

HELP = "compare evaluation runs: markdown table (EM/F1/Acc per dataset + costs) and PNG plots"


def register(sub: Any) -> None:
    p = sub.add_parser("report", help=HELP, description=HELP + ". Runs of the same method on "
                       "different datasets share a row.")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories made by marag eval")
    p.add_argument("--out", default="report",
                   help="directory for report.md, summary.json and the PNG plots (default: report)")
    p.add_argument("--no-plots", action="store_true", help="write the tables only")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from marag.eval.rundir import RunDirError
    from marag.report import build_report

    try:
        report = build_report(args.runs, args.out, plots=not args.no_plots)
    except (RunDirError, ValueError) as e:
        print(f"marag report: {e}", file=sys.stderr)
        return 2
    print(report.markdown)
    print(f"wrote {', '.join(report.files)} to {report.out_dir}")
    return 0
