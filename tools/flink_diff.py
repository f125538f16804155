"""Every Flink case run through Apache Flink itself and through streamjoin, on the same inputs; prints where
the two differ. Not part of CI.

    python tools/flink_diff.py --flink-python /path/to/flinkvenv/bin/python [--json FILE] [CASE_PATHS ...]

The Flink side needs PyFlink 2.3 in a separate environment (``python3 -m venv flinkvenv &&
flinkvenv/bin/pip install apache-flink==2.3.0``; it bundles its jars); this script runs in streamjoin's. The
cases are every case of ``CASE_PATHS`` (default: the seed suite and our own) whose tables are Flink DDL and
that expect a result, not a refusal.

How a case runs on Flink (``prepare``; the job itself is ``tools/flink_job.py``):
- each ``CREATE TABLE`` reads a JSON-lines file of its topic's inputs instead of Kafka ('filesystem'
  connector, monitored, so the source never ends and no end-of-input watermark closes what records did not);
  an 'upsert-kafka' table's records become Debezium changes (insert, update with its before image, delete),
  which Flink reads as the same changelog; key fields are merged into the value; ``METADATA`` columns become
  physical columns filled from the record (timestamp, partition 0, offset); watermarks are emitted after
  every record; malformed records are skipped ('json.ignore-parse-errors': streamjoin dead-letters them);
- ``CREATE TEMPORAL TABLE FUNCTION f ON t (time) KEY (k)`` (streamjoin's DDL for what Flink's Table API
  does) becomes ``createTemporalTableFunction``; ``SET`` goes to the table config;
- each ``INSERT INTO t SELECT ...`` runs as its ``SELECT`` at parallelism 1, collected until quiet; a
  declared target names the columns by position (Flink's INSERT), an undeclared one keeps Flink's names.

Compared per sink topic, as final results: Flink's changelog applied (+I/+U add a row, -U/-D remove one);
streamjoin's topic materialised by key (the last value per key, a tombstone removes it) when either result
updates, else every record's value. Rows compare as the conformance runner compares values (field names
case-insensitively, numbers by value, timestamps as instants). Output times are not compared (a collected
Flink row has none). Each case runs on Flink ``--flink-runs`` times: SAME when streamjoin's rows are Flink's
(every run agreeing), VARIES when Flink's runs disagree and streamjoin's are those of one of them, DIFF else.

Expect differences where the two engines' inputs differ by construction: Flink reads each file on its own
(two inputs interleave as its source threads happen to run, not in the case's ingestion order), so a record
late in one order may be on time in the other, and a processing-time join sees whatever rate arrived first.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from streamjoin.conformance.cases import Case, load_cases  # noqa: E402
from streamjoin.conformance.compare import normalise  # noqa: E402

DEFAULT_PATHS = [str(ROOT.parent / "shared" / "conformance" / "seed"), str(ROOT / "tests" / "conformance" / "cases")]
CREATE_TABLE = re.compile(r"^\s*CREATE\s+(?:TEMPORARY\s+)?TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([`\w.]+)\s*\(", re.I | re.S)
TEMPORAL_FUNCTION = re.compile(r"^\s*CREATE\s+TEMPORAL\s+TABLE\s+FUNCTION\s+(\w+)\s+ON\s+(\w+)\s*\(\s*(\w+)\s*\)\s*"
                               r"KEY\s*\(\s*(\w+)\s*\)\s*;?\s*$", re.I | re.S)
INSERT = re.compile(r"^\s*INSERT\s+INTO\s+([`\w.]+)\s*(.*?);?\s*$", re.I | re.S)
SET = re.compile(r"^\s*SET\s+'([^']+)'\s*=\s*'([^']*)'\s*;?\s*$", re.I | re.S)
OPTION = re.compile(r"'([^']+)'\s*=\s*'([^']*)'")
METADATA = re.compile(r"\s+METADATA(?:\s+FROM\s+'([^']+)')?(\s+VIRTUAL)?", re.I)


def flink_cases(paths: list[str]) -> list[Case]:
    """The cases whose inputs are all Flink tables and that expect rows."""
    def flink(case: Case) -> bool:
        creates = [s for s in case.statements if re.match(r"\s*CREATE\s+(?:TEMPORARY\s+)?(TABLE|STREAM)\b", s, re.I)]
        return bool(creates) and all("'connector'" in s for s in creates) and case.expected_error is None
    return [c for c in load_cases(paths) if flink(c)]


# ------------------------------------------------------------------ the case as a Flink job

def _closing(text: str, start: int) -> int:
    """The index of the parenthesis closing the one at ``start``."""
    depth = 0
    for i in range(start, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError(f"unbalanced parentheses: {text}")


def _split_top(text: str) -> list[str]:
    """``text`` split at commas outside parentheses and angle brackets."""
    parts, depth, current = [], 0, ""
    for ch in text:
        depth += {"(": 1, "<": 1, ")": -1, ">": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [p.strip() for p in parts + [current] if p.strip()]


class Table:
    """A case's ``CREATE TABLE``: its columns, options, and the file it reads on Flink."""

    def __init__(self, statement: str):
        head = CREATE_TABLE.match(statement)
        self.name = head.group(1).strip("`")
        open_at = head.end() - 1
        close_at = _closing(statement, open_at)
        self.items = _split_top(statement[open_at + 1:close_at])
        rest = statement[close_at + 1:]
        with_at = re.search(r"WITH\s*\(", rest, re.I)
        options = rest[with_at.end() - 1:_closing(rest, with_at.end() - 1) + 1] if with_at else ""
        self.options = dict(OPTION.findall(options))
        self.metadata: dict[str, tuple[str, str]] = {}  # column -> (metadata key, type)
        self.columns: list[str] = []  # physical and metadata columns, in order
        kept = []
        for item in self.items:
            word = item.split()[0].upper()
            if word in ("PRIMARY", "WATERMARK", "CONSTRAINT"):
                kept.append(item)
                continue
            name = item.split()[0].strip("`")
            meta = METADATA.search(item)
            if meta:
                column_type = item[len(item.split()[0]):meta.start()].strip()
                self.metadata[name] = (meta.group(1) or name, column_type)
                item = item[:meta.start()] + item[meta.end():]
            if not re.match(r"^\S+\s+AS\s", item, re.I):  # a computed column is not in the file
                self.columns.append(name)
            kept.append(item)
        self.kept = kept

    @property
    def topic(self) -> str:
        return self.options.get("topic", self.name)

    @property
    def upsert(self) -> bool:
        return self.options.get("connector") == "upsert-kafka"

    @property
    def has_watermark(self) -> bool:
        return any(i.split()[0].upper() == "WATERMARK" for i in self.kept)

    def flink_ddl(self, path: str) -> str:
        debezium = self.upsert or self.options.get("format", self.options.get("value.format")) == "debezium-json"
        fmt = "debezium-json" if debezium else "json"
        options = {"connector": "filesystem", "path": path, "format": fmt, "source.monitor-interval": "1s",
                   f"{fmt}.ignore-parse-errors": "true"}
        if self.has_watermark:  # a watermark after every record; the inputs read in step by event time
            options.update({"scan.watermark.emit.strategy": "on-event", "scan.watermark.alignment.group": "inputs",
                            "scan.watermark.alignment.max-drift": "1 ms",
                            "scan.watermark.alignment.update-interval": "100 ms"})
        written = ", ".join(f"'{k}' = '{v}'" for k, v in options.items())
        return f"CREATE TABLE `{self.name}` ({', '.join(self.kept)}) WITH ({written})"

    def lines(self, records: list[dict]) -> list[str]:
        """The case's records of this table's topic as the file's lines (Debezium changes for an upsert table)."""
        out, current = [], {}
        for offset, record in enumerate(records):
            value, key = record.get("value"), record.get("key")
            if isinstance(value, str) or (value is not None and not isinstance(value, dict)):
                out.append(value if isinstance(value, str) else json.dumps(value))  # as it is (malformed ones too)
                continue
            row = None
            if value is not None:
                row = dict(value)
                if isinstance(key, dict):
                    row.update(key)
                for column, (meta, column_type) in self.metadata.items():
                    row[column] = _metadata(meta, column_type, record, offset)
            if not self.upsert:
                if row is not None:
                    out.append(json.dumps(row))
                continue
            identity = json.dumps(key, sort_keys=True)
            before = current.get(identity)
            if row is None:
                if before is not None:
                    out.append(json.dumps({"before": before, "after": None, "op": "d"}))
                    del current[identity]
                continue
            out.append(json.dumps({"before": before, "after": row, "op": "u" if before else "c"}))
            current[identity] = row
        return out


def _metadata(key: str, column_type: str, record: dict, offset: int):
    if key == "timestamp":
        text = datetime.fromtimestamp(int(record.get("timestamp", 0)) / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return text + "Z" if "LTZ" in column_type.upper() or "LOCAL" in column_type.upper() else text
    if key == "headers":  # a map: the last value of a repeated header wins (base64 text: JSON's BYTES)
        return {h.get("KEY", h.get("key")): h.get("VALUE", h.get("value")) for h in record.get("headers") or []}
    return {"partition": 0, "offset": offset, "topic": record.get("topic")}.get(key)


def prepare(case: Case, number: int, work: Path) -> dict:
    """The Flink job of one case (see the module's docstring), its input files written under ``work``."""
    tables = {t.name.casefold(): t for t in (Table(s) for s in case.statements if CREATE_TABLE.match(s))}
    job = {"id": case.id, "settings": {}, "ddl": [], "functions": [], "queries": []}
    for statement in case.statements:
        if CREATE_TABLE.match(statement):
            table = tables[CREATE_TABLE.match(statement).group(1).strip("`").casefold()]
            folder = work / f"case{number}" / table.name
            folder.mkdir(parents=True, exist_ok=True)
            lines = table.lines([i for i in case.inputs if i["topic"].casefold() == table.topic.casefold()])
            (folder / "part-0.json").write_text("".join(line + "\n" for line in lines))
            job["ddl"].append(table.flink_ddl(str(folder)))
        elif TEMPORAL_FUNCTION.match(statement):
            name, history, time_column, key = TEMPORAL_FUNCTION.match(statement).groups()
            job["functions"].append({"name": name, "table": history, "time": time_column, "key": key})
        elif SET.match(statement):
            key, value = SET.match(statement).groups()
            job["settings"][key] = value
        elif INSERT.match(statement):
            target, query = INSERT.match(statement).groups()
            declared = tables.get(target.strip("`").casefold())
            job["queries"].append({"topic": (declared.topic if declared else target.strip("`")).casefold(),
                                   "sql": query, "columns": declared.columns if declared else None})
        else:
            job["ddl"].append(statement.rstrip().rstrip(";"))
    return job


def run_flink(jobs: list[dict], python: str, work: Path, runs: int) -> list[dict]:
    """Flink's results, ``runs`` times over (its sources' interleaving is its own, so results may vary)."""
    spec = work / "jobs.json"
    spec.write_text(json.dumps(jobs))
    results = []
    for run in range(runs):
        out = work / f"results{run}.json"
        subprocess.run([python, str(ROOT / "tools" / "flink_job.py"), str(spec), str(out)], check=True,
                       stderr=open(work / f"flink{run}.log", "w"))
        results.append(json.loads(out.read_text()))
    return results


# ------------------------------------------------------------------ streamjoin, and the comparison

def run_streamjoin(cases: list[Case]) -> dict:
    from streamjoin.conformance.runner import run_case
    from streamjoin.runtime.session import build_session

    spark = build_session(app_name="flink-diff")
    results = {}
    for case in cases:
        results[case.id] = run_case(spark, case)
        print(f"streamjoin: {case.id}: {results[case.id].status}", flush=True)
    spark.stop()
    return results


def flink_rows(changes: list) -> tuple[Counter, bool]:
    """Flink's changelog applied: the final multiset of rows, and whether the result ever updated."""
    rows: Counter = Counter()
    updates = False
    for kind, row in changes:
        rows[normalise(row)] += 1 if kind in ("+I", "+U") else -1
        updates |= kind != "+I"
    return +rows, updates


def streamjoin_rows(records: list[dict], by_key: bool) -> Counter:
    """streamjoin's sink topic as a final multiset of rows: by key (the last value per key; a tombstone removes
    it) when either engine's result updates, else every record's value."""
    if not by_key and all(r["value"] is not None for r in records):
        return Counter(normalise(r["value"]) for r in records)
    latest = {}
    for r in records:
        latest[json.dumps(r["key"], sort_keys=True)] = r["value"]
    return Counter(normalise(v) for v in latest.values() if v is not None)


def differences(job: dict, flink_runs: list[dict], ours) -> tuple[str, list[str]]:
    """The verdict (SAME, VARIES: Flink's runs disagree, DIFF) and the lines explaining it."""
    errors = {run["error"] for run in flink_runs if run["error"]}
    lines = [f"Flink fails: {e}" for e in sorted(errors)]
    if not ours.outputs and ours.status != "pass":
        lines.append(f"streamjoin gives no rows: {ours.detail.splitlines()[0][:300] if ours.detail else ours.status}")
    if errors:
        return "DIFF", lines
    verdicts = []
    for topic in sorted({q["topic"] for q in job["queries"]}):
        finals = [flink_rows(run["outputs"].get(topic, [])) for run in flink_runs]
        mine = [r for r in ours.outputs if r["topic"].casefold() == topic]
        by_key = any(updates for _, updates in finals)
        actual = streamjoin_rows(mine, by_key)
        distinct = [rows for i, (rows, _) in enumerate(finals) if all(rows != other for other, _ in finals[:i])]
        if len(distinct) > 1:
            lines.append(f"{topic}: Flink's {len(finals)} runs gave {len(distinct)} different results")
        if all(rows == actual for rows in distinct):
            verdicts.append("SAME")
            continue
        verdicts.append("VARIES" if any(rows == actual for rows in distinct) else "DIFF")
        for n, expected in enumerate(distinct):
            if expected == actual:
                lines.append(f"{topic}: streamjoin's rows are those of Flink's result {n + 1}")
                continue
            only_flink, only_ours = expected - actual, actual - expected
            lines.append(f"{topic}: against Flink's result {n + 1}: {sum(only_flink.values())} row(s) only in Flink, "
                         f"{sum(only_ours.values())} only in streamjoin")
            lines += [f"  Flink only:      {_shown(r)}" for r in only_flink.elements()][:12]
            lines += [f"  streamjoin only: {_shown(r)}" for r in only_ours.elements()][:12]
    verdict = "DIFF" if "DIFF" in verdicts else "VARIES" if "VARIES" in verdicts else "SAME"
    return verdict, lines


def _shown(row) -> str:
    """A normalised row (``compare.normalise``: sorted (name, value) pairs) as text."""
    def value(v):
        if isinstance(v, tuple) and len(v) == 2 and v[0] == "instant":
            return datetime.fromtimestamp(v[1], tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        return str(v)
    if not isinstance(row, tuple):
        return value(row)
    return "{" + ", ".join(f"{k}: {value(v)}" for k, v in row) + "}"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    parser.add_argument("--flink-python", default="python", help="the Python of an environment with apache-flink installed")
    parser.add_argument("--flink-runs", type=int, default=2, help="run every case on Flink this many times (default 2)")
    parser.add_argument("--json", dest="json_file", help="write every case's verdict and differences here")
    parser.add_argument("--only", default="", help="run only cases whose id contains this text")
    args = parser.parse_args(argv)
    cases = [c for c in flink_cases(args.paths) if args.only in c.id]
    work = Path(tempfile.mkdtemp(prefix="flinkdiff-"))
    jobs = [prepare(case, n, work) for n, case in enumerate(cases)]
    flink = run_flink(jobs, args.flink_python, work, args.flink_runs)
    ours = run_streamjoin(cases)
    report, counts = {}, Counter()
    for case, job in zip(cases, jobs):
        verdict, lines = differences(job, [run[case.id] for run in flink], ours[case.id])
        report[case.id] = {"verdict": verdict, "differences": lines}
        counts[verdict] += 1
        print(f"{verdict:6} {case.id}")
        for line in lines:
            print("       " + line)
    print(f"{len(cases)} Flink cases: {counts['SAME']} give Flink's rows, {counts['VARIES']} the rows of one of Flink's "
          f"differing runs, {counts['DIFF']} differ (work dir: {work})")
    if args.json_file:
        Path(args.json_file).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
