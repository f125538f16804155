"""Comparing produced records with a case's expected outputs (rules in shared/conformance/README.md).

Column names compare case-insensitively; numbers by value (a DECIMAL written as a string equals the
number; a DOUBLE to its last two bits: ``same_value``); timestamps as instants; a record's ``window`` (a
windowed key's) when the expected record gives one.
``ordering``: per-key (default), total, none. ``compare``: changelog (default: exactly the listed records) or
final (the last value per key and window, or the last record if keyless).
"""
from __future__ import annotations

import json
import math
import sys
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, Optional

def normalise(value: Any) -> Any:
    """A comparable form of a JSON value."""
    if isinstance(value, dict):
        return tuple(sorted((k.casefold(), normalise(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(normalise(v) for v in value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, (int, float)):
        return Decimal(str(value)).normalize()
    if isinstance(value, str):
        instant = _instant(value)
        if instant is not None:
            return ("instant", instant)
        try:
            return Decimal(value).normalize() if value.strip() and value.strip()[0] in "-+.0123456789" else value
        except InvalidOperation:
            return value
    return value


def _instant(text: str) -> Optional[float]:
    if len(text) < 16 or text[4] != "-" or text[7] != "-":
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00").replace(" ", "T", 1))
    except ValueError:
        return None
    return (dt if dt.tzinfo else dt.replace(tzinfo=timezone.utc)).timestamp()


def key_text(key: Any) -> Any:
    """An expected key in the form the embedded store holds it (KAFKA keys are text, objects JSON)."""
    if key is None or isinstance(key, (dict, list)):
        return normalise(key)
    if isinstance(key, bool):
        return "true" if key else "false"
    return normalise(str(key)) if not isinstance(key, str) else normalise(key)


def actual_record(topic: str, key: Optional[bytes], value: Optional[bytes], timestamp: int,
                  window: Optional[tuple[str, int]] = None) -> dict:
    """A produced record as a case writes one. ``window``: the topic's (window type, size ms) when its keys are
    windowed: the key's last 8 bytes are then its window's start (Kafka Streams' ``TimeWindowedSerializer``), or
    its last 16 a session's end and start (``SessionKeySchema``)."""
    span = None
    if window is not None and window[0] == "SESSION" and key is not None and len(key) >= 16:
        end, start = int.from_bytes(key[-16:-8], "big", signed=True), int.from_bytes(key[-8:], "big", signed=True)
        key, span = key[:-16], {"start": start, "end": end, "type": "session"}
    elif window is not None and key is not None and len(key) >= 8:
        start = int.from_bytes(key[-8:], "big", signed=True)
        key, span = key[:-8], {"start": start, "end": start + window[1], "type": "time"}
    record = _record(topic, key, value, timestamp)
    if span is not None:
        record["window"] = span
    return record


def _record(topic: str, key: Optional[bytes], value: Optional[bytes], timestamp: int) -> dict:
    k: Any = None
    if key is not None:
        text = key.decode("utf-8", "replace")
        try:
            parsed = json.loads(text)
            k = parsed if isinstance(parsed, (dict, list, str)) else text  # a JSON key: "a" is the text a
        except ValueError:
            k = text
    v = text = None
    if value is not None:
        text = value.decode("utf-8", "replace")
        try:
            v = json.loads(text)
        except ValueError:  # a DELIMITED (or other non-JSON) value compares as its text
            v = text
    return {"topic": topic, "key": k, "value": v, "timestamp": timestamp, "text": text}


_MISSING = object()


def _field(value: dict, name: str) -> Any:
    """``value``'s field ``name``: of that exact name, else the one field of that name in another case."""
    if name in value:
        return value[name]
    others = [k for k in value if k.casefold() == name.casefold()]
    return value[others[0]] if len(others) == 1 else _MISSING


def same_value(expected: Any, actual: Any) -> bool:
    """Whether two JSON values are equal as ``normalise`` compares them, except that a DOUBLE (a JSON number with a
    fraction or an exponent on both sides) may differ in its last two bits: what Java's ``Math.exp``, ``log`` or
    ``sinh`` return differs in the last bit between the JVM's intrinsics and ``StrictMath``, so ksqlDB's own runs do."""
    if isinstance(expected, float) and isinstance(actual, float):
        return expected == actual or math.isclose(expected, actual, rel_tol=4 * sys.float_info.epsilon, abs_tol=0.0)
    if isinstance(expected, dict) and isinstance(actual, dict):  # a name in another case is the same field,
        return len(actual) == len(expected) and all(  # unless both spellings are there (`foo` beside FOO)
            _field(actual, k) is not _MISSING and same_value(v, _field(actual, k)) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(actual, list):
        return len(expected) == len(actual) and all(map(same_value, expected, actual))
    return normalise(expected) == normalise(actual)


def _matches(expected: dict, actual: dict) -> bool:
    value = expected.get("value")
    if not (same_value(value, actual.get("value")) or isinstance(value, str) and value == actual.get("text")):
        return False  # a value given as text may also be the record's text itself (a DELIMITED '"-10"')
    if "key" in expected and key_text(expected["key"]) != key_text(actual.get("key")):
        return False
    if "timestamp" in expected and expected["timestamp"] != actual.get("timestamp"):
        return False
    if "window" in expected and _window(expected) != _window(actual):
        return False
    return True


def _window(record: dict) -> Optional[tuple]:
    """A record's window (start, end, type), as ksqlDB's test files write it; None for an unwindowed key."""
    w = record.get("window")
    return None if w is None else (int(w["start"]), int(w["end"]), str(w.get("type", "time")).casefold())


def compare(expected: list[dict], actual: list[dict], *, ordering: str, mode: str) -> Optional[str]:
    """None when ``actual`` satisfies ``expected``; otherwise a readable explanation."""
    if mode == "final":
        expected, actual = _final(expected), _final(actual)
    if ordering == "total" or mode == "final" and ordering != "none":
        ok = len(expected) == len(actual) and all(_matches(e, a) for e, a in zip(expected, actual))
        if mode == "final" and not ok:
            ok = _multiset_equal(expected, actual)
    elif ordering == "none":
        ok = _multiset_equal(expected, actual)
    else:
        ok = _per_key_equal(expected, actual)
    return None if ok else diff(expected, actual)


def _final(records: list[dict]) -> list[dict]:
    last: dict = {}
    for r in records:
        last[(r["topic"], key_text(r.get("key")) if "key" in r else None, _window(r))] = r
    return list(last.values())


def _multiset_equal(expected: list[dict], actual: list[dict]) -> bool:
    remaining = list(actual)
    for e in expected:
        hit = next((i for i, a in enumerate(remaining) if _matches(e, a)), None)
        if hit is None:
            return False
        remaining.pop(hit)
    return not remaining


def _per_key_equal(expected: list[dict], actual: list[dict]) -> bool:
    if not _multiset_equal(expected, actual):
        return False
    groups_e: dict = {}
    groups_a: dict = {}
    for r in expected:
        groups_e.setdefault((r["topic"], key_text(r.get("key"))), []).append(r)
    for r in actual:
        groups_a.setdefault((r["topic"], key_text(r.get("key"))), []).append(r)
    for k, rows in groups_e.items():
        got = groups_a.get(k, [])
        if "key" not in rows[0]:
            continue
        if len(got) != len(rows) or not all(_matches(e, a) for e, a in zip(rows, got)):
            return False
    return True


def diff(expected: list[dict], actual: list[dict]) -> str:
    def show(r: dict) -> str:
        parts = [f"key={json.dumps(r.get('key'))}"] if "key" in r else []
        parts.append(f"value={json.dumps(r.get('value'), sort_keys=True)}")
        if "timestamp" in r:
            parts.append(f"ts={r['timestamp']}")
        if r.get("window") is not None:
            parts.append("window=[{start},{end})".format(**r["window"]))
        return f"{r['topic']}: " + " ".join(parts)

    lines = ["expected:"] + [f"  {show(r)}" for r in expected] + ["actual:"] + [f"  {show(r)}" for r in actual]
    return "\n".join(lines)
