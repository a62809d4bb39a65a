"""`workbench report`: bench result files of one or more devices as one HTML file a stakeholder reads, and a PDF."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from workbench.core.bench.report import read_results
from workbench.core.bench.report_pdf import print_pdf


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="bench files (one per device) as one self-contained HTML report, optionally a PDF",
        description="Writes one HTML file with the answer in words, measured beside predicted speed, speed against "
        "perplexity with the Pareto front, memory against each device's budget, energy and heat, and an appendix "
        "to reproduce it (machine, llama.cpp build, presets). It opens offline. --pdf prints it with Chromium.",
    )
    parser.add_argument("files", nargs="+", help="json or jsonl files written by `workbench bench --output json`")
    parser.add_argument("--out", default="report.html", help="the HTML file to write (default report.html)")
    parser.add_argument("--pdf", action="store_true", help="also print it to a PDF beside the HTML (headless Chromium)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from workbench.core.bench.report_export import export_report  # deferred: matplotlib, only for a report

    out = export_report([(name, read_results(name)) for name in args.files], Path(args.out))
    print(f"wrote {out}", file=sys.stderr)
    if args.pdf:
        pdf = print_pdf(out, out.with_suffix(".pdf"))
        print(f"wrote {pdf}", file=sys.stderr)
    return 0
