"""Running a list of cases and reporting: per-case lines, readable diffs, the closing count line."""
from __future__ import annotations

import json
from typing import Optional

from .cases import Case
from .runner import CaseResult, run_case


def run_cases(spark, cases: list[Case], *, records_per_batch: int = 0, bootstrap: Optional[str] = None,
              echo: bool = True) -> list[CaseResult]:
    results = []
    for case in cases:
        result = run_case(spark, case, records_per_batch=records_per_batch, bootstrap=bootstrap)
        results.append(result)
        if echo:
            print(f"{result.status.upper():4} {case.id} ({result.seconds:.1f}s)", flush=True)
            if result.status == "fail":
                print("     " + result.detail.replace("\n", "\n     "), flush=True)
    return results


def summary_line(results: list[CaseResult]) -> str:
    count = {s: sum(r.status == s for r in results) for s in ("pass", "fail", "skip")}
    return f"{count['pass']} passed, {count['fail']} failed, {count['skip']} skipped"


def run_and_report(spark, cases: list[Case], *, records_per_batch: int = 0, bootstrap: Optional[str] = None,
                   json_file: Optional[str] = None) -> int:
    results = run_cases(spark, cases, records_per_batch=records_per_batch, bootstrap=bootstrap)
    skipped_parts = sum(len(r.case.skipped_parts) for r in results)
    if skipped_parts:
        print(f"note: {skipped_parts} ksqlDB 'post' sections were not checked")
    if json_file:
        with open(json_file, "w") as out:
            json.dump([{"file": r.case.file, "name": r.case.name, "status": r.status, "detail": r.detail,
                        "seconds": round(r.seconds, 3)} for r in results], out, indent=1)
    print(summary_line(results))
    return 1 if any(r.status == "fail" for r in results) else 0
