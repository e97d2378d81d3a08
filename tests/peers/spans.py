"""Read a Collector-format OTLP JSON lines file into plain span records, for the peer-story tests."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Span", "check_collector_json", "decode_value", "read_spans"]

_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX16 = re.compile(r"[0-9a-f]{16}")
_DIGITS = re.compile(r"[0-9]+")


def decode_value(value: dict[str, Any]) -> Any:
    """An OTLP ``AnyValue`` as a Python value (``intValue`` strings as ints)."""
    if not value:
        return None
    (kind, inner), = value.items()
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [decode_value(v) for v in inner.get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: decode_value(kv["value"]) for kv in inner.get("values", [])}
    return inner


@dataclass
class Span:
    name: str
    trace_id: str
    span_id: str
    parent_id: str | None
    kind: int
    status: int  # 0 UNSET (omitted), 1 OK, 2 ERROR
    attributes: dict[str, Any]
    scope: str
    scope_version: str | None
    scope_attributes: dict[str, Any]
    resource: dict[str, Any]
    start: int
    end: int
    events: list[dict[str, Any]] = field(default_factory=list)

    def json(self, key: str) -> Any:
        """The attribute ``key`` parsed as JSON."""
        return json.loads(self.attributes[key])


def read_spans(path: Path) -> list[Span]:
    """Every span in ``path``, in start order."""
    spans = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for rs in json.loads(line)["resourceSpans"]:
            resource = {a["key"]: decode_value(a["value"]) for a in rs.get("resource", {}).get("attributes", [])}
            for ss in rs.get("scopeSpans", []):
                scope = ss.get("scope", {})
                for s in ss.get("spans", []):
                    spans.append(Span(
                        name=s["name"], trace_id=s["traceId"], span_id=s["spanId"], parent_id=s.get("parentSpanId"),
                        kind=s.get("kind", 0), status=s.get("status", {}).get("code", 0),
                        attributes={a["key"]: decode_value(a["value"]) for a in s.get("attributes", [])},
                        scope=scope.get("name", ""), scope_version=scope.get("version"),
                        scope_attributes={a["key"]: decode_value(a["value"]) for a in scope.get("attributes", [])},
                        resource=resource, start=int(s["startTimeUnixNano"]), end=int(s["endTimeUnixNano"]),
                        events=s.get("events", []),
                    ))
    return sorted(spans, key=lambda s: (s.start, s.end))


def check_collector_json(path: Path) -> int:
    """Assert every line of ``path`` is a ``TracesData`` object as the Collector's file exporter writes it; count spans."""
    count = 0
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        data = json.loads(line)
        assert set(data) == {"resourceSpans"}, f"line {number}: {sorted(data)}"
        for rs in data["resourceSpans"]:
            assert set(rs) <= {"resource", "scopeSpans", "schemaUrl"}, sorted(rs)
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    count += 1
                    assert _HEX32.fullmatch(s["traceId"]) and _HEX16.fullmatch(s["spanId"]), (s["traceId"], s["spanId"])
                    assert "parentSpanId" not in s or _HEX16.fullmatch(s["parentSpanId"])
                    assert _DIGITS.fullmatch(s["startTimeUnixNano"]) and _DIGITS.fullmatch(s["endTimeUnixNano"])
                    assert isinstance(s["kind"], int) and 1 <= s["kind"] <= 5
                    assert set(s.get("status", {})) <= {"code", "message"} and s.get("status", {}).get("code", 1) in (1, 2)
                    for a in s.get("attributes", []):
                        assert set(a) == {"key", "value"} and len(a["value"]) <= 1, a
                        if "intValue" in a["value"]:
                            assert isinstance(a["value"]["intValue"], str)
    return count
