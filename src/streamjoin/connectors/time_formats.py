"""ksqlDB's ``TIMESTAMP_FORMAT``: a record's time held as text, read with a ``java.time`` DateTimeFormatter pattern.

Spark's datetime patterns are DateTimeFormatter's, so decoding (``lower.decode``) and a sink's time
(``lower.sink``) hand the pattern to Spark's ``to_timestamp`` as ksqlDB wrote it. The source's clock is computed
in Python (``connectors.event_time``): there the pattern is translated for ``datetime.strptime`` (``parse_millis``).
Only pattern letters both can read alike are accepted (``check_pattern``), so the two never disagree: years
(``yyyy``, ``uuuu``, ``yy`` as 2000-2099, as Java and Spark read it), months (number or ``MMM``), days, day of
year, hours (``H``, or ``h`` with ``a``), minutes, seconds, fractions (``S``...), day names (``EEE``), zone offsets
(``X``, ``x``, ``Z``: ``Z`` or +HHMM or +HH:MM), and quoted text. A time without an offset is UTC.
"""
from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from functools import lru_cache
from typing import Optional

_LETTERS = {  # pattern letter -> strptime directive by run length (None: any length)
    "y": {4: "%Y", 2: "%y"}, "u": {4: "%Y", 2: "%y"}, "M": {1: "%m", 2: "%m", 3: "%b", 4: "%B"},
    "d": {1: "%d", 2: "%d"}, "D": {1: "%j", 2: "%j", 3: "%j"}, "H": {1: "%H", 2: "%H"}, "h": {1: "%I", 2: "%I"},
    "a": {1: "%p"}, "m": {1: "%M", 2: "%M"}, "s": {1: "%S", 2: "%S"}, "S": None, "E": {1: "%a", 2: "%a", 3: "%a", 4: "%A"},
    "X": {1: "%z", 2: "%z", 3: "%z"}, "x": {1: "%z", 2: "%z", 3: "%z"}, "Z": {1: "%z", 2: "%z", 3: "%z"},
}
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_TOKEN = re.compile(r"'(?:[^']|'')*'|([A-Za-z])\1*|.", re.S)


@lru_cache(maxsize=64)
def _translated(pattern: str) -> tuple[str, bool, bool]:
    """(strptime format, whether it reads a two-digit year, whether it reads a zone offset)."""
    out, two_digit_year, zoned = [], False, False
    for match in _TOKEN.finditer(pattern):
        token = match.group(0)
        if token.startswith("'"):
            out.append("'" if token == "''" else token[1:-1].replace("''", "'").replace("%", "%%"))
            continue
        letter = token[0]
        if not letter.isalpha():
            out.append("%%" if token == "%" else token)
            continue
        if letter not in _LETTERS:
            raise ValueError(f"the pattern letter '{letter}' is not supported in a TIMESTAMP_FORMAT here")
        lengths = _LETTERS[letter]
        if lengths is None:  # a fraction of a second: strptime reads up to 6 digits
            if len(token) > 6:
                raise ValueError("a TIMESTAMP_FORMAT fraction of more than 6 digits is not supported here")
            out.append("%f")
            continue
        if len(token) not in lengths:
            raise ValueError(f"'{token}' is not supported in a TIMESTAMP_FORMAT here")
        directive = lengths[len(token)]
        two_digit_year |= directive == "%y"
        zoned |= directive == "%z"
        out.append(directive)
    return "".join(out), two_digit_year, zoned


def check_pattern(pattern: str) -> None:
    """Raise ValueError (naming what is not supported) unless ``pattern`` can be read here."""
    _translated(pattern)


def parse_millis(text: str, pattern: str) -> Optional[int]:
    """``text`` read with the DateTimeFormatter ``pattern``, as epoch milliseconds; None when it does not match."""
    form, two_digit_year, zoned = _translated(pattern)
    try:
        parsed = datetime.strptime(text, form)
    except ValueError:
        return None
    if two_digit_year and parsed.year < 2000:  # strptime puts 69-99 in the 1900s; Java's yy is 2000-2099
        parsed = parsed.replace(year=parsed.year + 100)
    if not zoned or parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return (parsed - _EPOCH) // timedelta(milliseconds=1)
