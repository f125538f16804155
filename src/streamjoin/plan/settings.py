"""Settings a script chooses with ``SET 'name' = 'value'`` that change how its queries run, checked when the
SET statement is planned so a bad value is refused before any query starts."""
from __future__ import annotations

import re

TRIGGER_INTERVAL = "streamjoin.trigger.interval"  # how often a query starts a micro-batch (like commit.interval.ms)
COMMIT_INTERVAL = "commit.interval.ms"  # ksqlDB's and Lenses' own setting: the same cadence, in ms
REMATCH_RETENTION = "streamjoin.lenses.rematch.retention"  # how long a Lenses padded record waits for its table row

_UNITS = {"ms": 1, "millisecond": 1, "milliseconds": 1, "s": 1000, "sec": 1000, "second": 1000, "seconds": 1000,
          "min": 60_000, "minute": 60_000, "minutes": 60_000, "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
          "d": 86_400_000, "day": 86_400_000, "days": 86_400_000}
_INTERVAL = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$")


def interval_ms(text: str) -> int:
    """``'2 seconds'``, ``'500 ms'``, ``'1 minute'`` or a bare number of milliseconds, as milliseconds."""
    match = _INTERVAL.match(str(text).lower())
    if not match or match.group(2) not in ("", *_UNITS):
        raise ValueError(f"'{text}' is not an interval such as '2 seconds', '500 milliseconds' or '1 minute'")
    return round(float(match.group(1)) * _UNITS.get(match.group(2), 1))


def check_setting(name: str, value: str) -> None:
    """Raise ValueError when ``value`` is not a valid value of the setting ``name``."""
    if name.lower() in (TRIGGER_INTERVAL, COMMIT_INTERVAL, REMATCH_RETENTION):
        interval_ms(value)


def trigger_interval(properties: dict) -> "str | None":
    """The script's micro-batch cadence: ``streamjoin.trigger.interval``, else ``commit.interval.ms``."""
    return properties.get(TRIGGER_INTERVAL, properties.get(COMMIT_INTERVAL))
