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
    t = sub.add_parser("report-train", help="plot a marag train run (reward, F1, validity per "
                       "role, KL, workflow mix; held-out F1 per checkpoint)")
    t.add_argument("run", metavar="TRAIN_DIR", help="the --out folder of marag train")
    t.add_argument("--heldout", nargs="*", default=[], metavar="ITER=EVAL_DIR",
                   help="evaluation runs of checkpoints (0=untrained), e.g. 0=runs/eval/base "
                        "10=runs/eval/ckpt10")
    t.add_argument("--out", default=None, help="folder for the PNGs (default: TRAIN_DIR/plots)")
    t.set_defaults(func=run_train)
    st = sub.add_parser("report-stability", help="training stability across seeds (M-ASK's "
                        "collapse count): smoothed F1 and format validity per seed, collapses "
                        "marked; stability.png and stability.md")
    st.add_argument("runs", nargs="+", metavar="METHOD=TRAIN_DIR",
                    help="a marag train --out folder per seed, labelled by method, e.g. "
                         "search-r1=runs/train/sr1/seed-0 m-ask=runs/train/mask/seed-0")
    st.add_argument("--out", default="report-stability", help="folder for the figure and table")
    st.set_defaults(func=run_stability)


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


def run_train(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from marag.report.training import plot_training

    points = []
    for item in args.heldout:
        it, sep, path = item.partition("=")
        metrics = Path(path) / "metrics.json"
        if not sep or not it.isdigit() or not metrics.is_file():
            print(f"marag report-train: {item!r} is not ITER=EVAL_DIR with a metrics.json",
                  file=sys.stderr)
            return 2
        points.append((int(it), float(json.loads(metrics.read_text())["f1"])))
    try:
        files = plot_training(args.run, args.out or Path(args.run) / "plots", points)
    except ValueError as e:
        print(f"marag report-train: {e}", file=sys.stderr)
        return 2
    print("wrote " + ", ".join(str(f) for f in files))
    return 0


def run_stability(args: argparse.Namespace) -> int:
    from marag.report.stability import load_seed_run, plot_stability, stability_table

    groups: dict[str, list] = {}
    for item in args.runs:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            print(f"marag report-stability: {item!r} is not METHOD=TRAIN_DIR", file=sys.stderr)
            return 2
        try:
            groups.setdefault(label, []).append(load_seed_run(path))
        except (ValueError, FileNotFoundError) as e:
            print(f"marag report-stability: {e}", file=sys.stderr)
            return 2
    files = plot_stability(groups, args.out)
    print(stability_table(groups))
    print("wrote " + ", ".join(str(f) for f in files))
    return 0
