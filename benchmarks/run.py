"""The one entry point for speed: ``python benchmarks/run.py NAME [--rows N] --json FILE``.

Each benchmark generates its data, runs the Spark-native baseline and streamjoin's variants on the same
data in the same run, and reports per variant: rows/s, batch latency (median/max), peak state rows and
the ratio of its throughput to the baseline's. Trust ratios from one run, not absolute times across runs.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

BENCHMARKS = {"stream-stream": "stream_stream", "stream-table": "stream_table", "table-table": "table_table",
              "interval": "interval", "temporal": "temporal",
              "sqlstream-range": "sqlstream_range", "kafka-io": "kafka_io"}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("name", choices=sorted(BENCHMARKS))
    parser.add_argument("--rows", type=int, default=1_000_000, help="records per input side")
    parser.add_argument("--batches", type=int, default=10, help="micro-batches to cut the input into")
    parser.add_argument("--json", dest="json_file", help="write the results here")
    parser.add_argument("--variants", default="", help="comma-separated subset of variants to run")
    args = parser.parse_args(argv)
    module = importlib.import_module(BENCHMARKS[args.name])
    results = module.run(rows=args.rows, batches=args.batches, only=[v for v in args.variants.split(",") if v])
    baseline = next((r for r in results.values() if r.get("baseline")), None)
    for r in results.values():
        r["ratio_to_baseline"] = round(r["rows_per_s"] / baseline["rows_per_s"], 2) if baseline else None
    print(f"{'variant':24} {'rows/s':>10} {'batch ms median':>16} {'batch ms max':>13} {'state rows max':>15} {'ratio':>6}")
    for name, r in results.items():
        print(f"{name:24} {r['rows_per_s']:>10.0f} {r['batch_ms_median']:>16.0f} {r['batch_ms_max']:>13.0f} "
              f"{r['state_rows_max']:>15} {r['ratio_to_baseline'] if r['ratio_to_baseline'] is not None else '-':>6}")
    if args.json_file:
        Path(args.json_file).write_text(json.dumps({"benchmark": args.name, "rows_per_side": args.rows,
                                                    "batches": args.batches, "variants": results}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
