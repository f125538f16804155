"""Loading test cases in ksqlDB's query-validation-test layout (``{"tests": [...]}``)."""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from ..errors import StreamjoinError


class CaseFileError(StreamjoinError):
    """A case file that is not JSON (comments aside): named with the line and column where reading stopped."""


@dataclass(frozen=True)
class Case:
    file: str
    name: str
    statements: tuple[str, ...]
    inputs: tuple[dict, ...]
    outputs: tuple[dict, ...]
    expected_error: Optional[str] = None
    ordering: str = "per-key"
    compare: str = "changelog"
    properties: dict = field(default_factory=dict)
    post: dict = field(default_factory=dict)  # ksqlDB's checks of the metastore and topics after the run

    @property
    def id(self) -> str:
        return f"{self.file} :: {self.name}"


def load_cases(paths: list[str]) -> list[Case]:
    """Every case in the given files and directories (``*.json``, recursively), in a stable order."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.rglob("*.json")) if p.is_dir() else [p])
    cases = []
    for f in files:
        for raw in read_case_file(f).get("tests", []):
            if raw.get("enabled", True) is not False:  # ksqlDB's runner leaves out a case marked disabled
                cases.extend(_expand(f.name, raw))
    return cases


def read_case_file(path: Path) -> dict:
    """A case file's JSON. ksqlDB's test loader reads its files with comments allowed (Jackson's
    ``ALLOW_COMMENTS``: ``// ...`` to the end of the line and ``/* ... */``), so they are taken out first; their
    characters become spaces, so an error's line and column are those of the file."""
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(without_comments(text))
    except json.JSONDecodeError as err:
        raise CaseFileError(f"{path}: not a case file: {err.msg} at line {err.lineno}, column {err.colno}") from None


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)


def without_comments(text: str) -> str:
    """JSON ``text`` with its comments blanked (strings kept whole: a ``//`` inside one is text)."""
    def blank(m: re.Match) -> str:
        token = m.group(0)
        return token if token.startswith('"') else re.sub(r"[^\n]", " ", token)

    return _TOKENS.sub(blank, text)


def _expand(file: str, raw: dict[str, Any]) -> list[Case]:
    """One case, or one per entry of a ksqlDB ``format`` list (the format substituted into the statements for
    ``{FORMAT}``) and of its ``config`` list (substituted into the properties for ``{CONFIG}``)."""
    formats, configs = raw.get("format") or [None], raw.get("config") or [None]
    out = []
    for fmt in formats:
        for config in configs:
            statements = [s.replace("{FORMAT}", fmt) if fmt else s for s in raw.get("statements", [])]
            properties = {k: v.replace("{CONFIG}", str(config)) if config is not None and isinstance(v, str) else v
                          for k, v in (raw.get("properties") or {}).items()}
            name = (raw.get("name", "unnamed") + (f" - {fmt}" if fmt and len(formats) > 1 else "")
                    + (f" - {config}" if config is not None and len(configs) > 1 else ""))
            error = raw.get("expectedException")
            out.append(Case(
                file=file, name=name, statements=tuple(statements),
                inputs=tuple(raw.get("inputs", [])), outputs=tuple(raw.get("outputs", [])),
                expected_error=(error.get("message", "") if isinstance(error, dict) else None),
                ordering=raw.get("ordering", "per-key"), compare=raw.get("compare", "changelog"),
                properties=properties, post=raw.get("post") or {},
            ))
    return out
