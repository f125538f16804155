"""Running a list of cases and reporting: per-case lines, readable diffs, the closing count line."""
from __future__ import annotations

import json
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Optional, Union

from .cases import Case
from .runner import CaseResult, run_case


def run_cases(spark, cases: list[Case], *, records_per_batch: Union[int, Callable[[Case], int]] = 0,
              bootstrap: Optional[str] = None, echo: bool = True, workers: int = 1) -> list[CaseResult]:
    """Run ``cases`` (``records_per_batch`` may depend on the case), ``workers`` at a time on the one
    SparkSession; results in the order of ``cases``. A micro-batch spends most of its time waiting on
    the driver (planning, commits), so two cases at once keep two cores busier than one."""
    per_batch = records_per_batch if callable(records_per_batch) else (lambda case: records_per_batch)
    if bootstrap and workers > 1:  # cases name their topics, and delete them when done: on one broker they would clash
        if echo:
            print("note: on a broker the cases run one at a time (two at once would share, and delete, topics)")
        workers = 1

    def run(case: Case) -> CaseResult:
        return run_case(spark, case, records_per_batch=per_batch(case), bootstrap=bootstrap,
                        query_name_prefix=f"{uuid.uuid4().hex[:8]}-" if workers > 1 else "")

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(run, case) for case in cases]
        results = []
        for case, future in zip(cases, futures):
            result = future.result()
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
                   json_file: Optional[str] = None, workers: int = 1) -> int:
    results = run_cases(spark, cases, records_per_batch=records_per_batch, bootstrap=bootstrap, workers=workers)
    unchecked = Counter(part for r in results for part in r.unchecked)
    if unchecked:
        parts = ", ".join(f"{n} {part}" for part, n in sorted(unchecked.items()))
        print(f"note: ksqlDB 'post' checks not run (Kafka Streams' internal topics, serde features): {parts}")
    if json_file:
        with open(json_file, "w") as out:
            json.dump([{"file": r.case.file, "name": r.case.name, "status": r.status, "detail": r.detail,
                        "seconds": round(r.seconds, 3), "unchecked": list(r.unchecked)} for r in results], out, indent=1)
    print(summary_line(results))
    return 1 if any(r.status == "fail" for r in results) else 0
