"""The one entry point for speed: ``python benchmarks/run.py NAME [--rows N] --json FILE``.

Each benchmark generates its data, runs the Spark-native baseline and streamjoin's variants on the same
data in the same run, and reports per variant: rows/s, batch latency (median/max), peak state rows, the
ratio of its throughput to the baseline's, and the CPU it used per input row (all processes: driver, JVM,
Python workers) with the same ratio on CPU. Trust ratios from one run, not absolute times across runs.
CPU per row times rows/s is the number of cores a variant kept busy: near 2 on this machine means it is
bound by CPU, not by waiting.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

BENCHMARKS = {"stream-stream": "stream_stream", "stream-table": "stream_table", "table-table": "table_table",
              "interval": "interval", "temporal": "temporal", "regular": "regular",
              "sqlstream-range": "sqlstream_range", "kafka-io": "kafka_io", "state-growth": "state_growth",
              "latency": "latency", "group-window": "group_window", "lookup": "lookup", "soak": "soak"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", choices=sorted(BENCHMARKS))
    parser.add_argument("--rows", type=int, default=None, help="records per input side (default 1M; state-growth: 2M)")
    parser.add_argument("--batches", type=int, default=None,
                        help="micro-batches to cut the input into (default 10; state-growth: 40)")
    parser.add_argument("--json", dest="json_file", help="write the results here")
    parser.add_argument("--minutes", type=int, default=None, help="soak: how long to feed (default 20)")
    parser.add_argument("--variants", default="", help="comma-separated subset of variants to run")
    parser.add_argument("--phases", action="store_true",
                        help="also report where streamjoin's Python workers spend their time, per input row "
                             "(python_us_per_row: pack, input, state_read, step, state_write, output); latency: "
                             "per micro-batch, those phases and the wall time of each of Spark's stages")
    args = parser.parse_args(argv)
    if args.phases:  # before Spark starts: its Python workers inherit it (operators.state.PROFILE_DIR)
        import os
        import tempfile

        os.environ["STREAMJOIN_PROFILE"] = tempfile.mkdtemp(prefix="sjphases-")
    module = importlib.import_module(BENCHMARKS[args.name])
    args.rows = args.rows or getattr(module, "DEFAULT_ROWS", 1_000_000)
    args.batches = args.batches or getattr(module, "DEFAULT_BATCHES", 10)
    timed = {"minutes": args.minutes} if args.minutes else {}  # soak's
    results = module.run(rows=args.rows, batches=args.batches, only=[v for v in args.variants.split(",") if v], **timed)
    if hasattr(module, "report"):  # a benchmark of its own shape (latency)
        module.report(results)
        _write(args, results)
        return 0
    first_baseline = next((r for r in results.values() if r.get("baseline")), {})
    for r in results.values():  # against the first baseline, or the one a variant names (``compared_with``)
        baseline = results.get(r.get("compared_with"), first_baseline)
        r["ratio_to_baseline"] = _ratio(r["rows_per_s"], baseline.get("rows_per_s"))
        # the baseline's CPU per row over this variant's: above 1 means cheaper than the baseline
        r["cpu_ratio_to_baseline"] = _ratio(baseline.get("cpu_us_per_row"), r.get("cpu_us_per_row"))
    print(f"{'variant':24} {'rows/s':>10} {'batch ms median':>16} {'batch ms max':>13} {'state rows max':>15} {'ratio':>6}"
          f" {'cpu us/row':>11} {'cpu ratio':>10} {'growth':>7}")
    for name, r in results.items():
        print(f"{name:24} {r['rows_per_s']:>10.0f} {r['batch_ms_median']:>16.0f} {r['batch_ms_max']:>13.0f} "
              f"{r['state_rows_max']:>15} {_shown(r['ratio_to_baseline']):>6} {_shown(r.get('cpu_us_per_row')):>11}"
              f" {_shown(r['cpu_ratio_to_baseline']):>10} {_shown(r.get('latency_growth')):>7}")
    for name, r in results.items():
        if r.get("python_us_per_row"):
            split = ", ".join(f"{phase} {us}" for phase, us in r["python_us_per_row"].items())
            print(f"{name:24} python us/row: {split}")
    _write(args, results)
    return 0


def _write(args, results: dict) -> None:
    if args.json_file:
        Path(args.json_file).write_text(json.dumps({"benchmark": args.name, "rows_per_side": args.rows,
                                                    "batches": args.batches, "variants": results}, indent=1))


def _ratio(numerator, denominator):
    return round(numerator / denominator, 2) if numerator and denominator else None


def _shown(value) -> str:
    return "-" if value is None else str(value)


if __name__ == "__main__":
    sys.exit(main())
