"""The required properties of SARIF 2.1.0 (the OASIS standard's schema, ``required`` and enums only).

Written out by hand from the standard for the objects the audit emits, so the tests check the
structure a code-scanning UI relies on without fetching the full schema.
"""

from __future__ import annotations

from typing import Any

_MESSAGE = {"type": "object", "anyOf": [{"required": ["text"]}, {"required": ["id"]}]}
_LOCATION = {
    "type": "object",
    "properties": {
        "physicalLocation": {
            "type": "object",
            "anyOf": [{"required": ["artifactLocation"]}, {"required": ["address"]}],
            "properties": {
                "artifactLocation": {"type": "object", "properties": {"uri": {"type": "string", "minLength": 1}}},
                "region": {"type": "object", "properties": {"startLine": {"type": "integer", "minimum": 1}}},
            },
        },
        "logicalLocations": {"type": "array", "items": {"type": "object"}},
    },
}
SARIF_REQUIRED: dict[str, Any] = {
    "type": "object",
    "required": ["version", "runs"],
    "properties": {
        "version": {"const": "2.1.0"},
        "$schema": {"type": "string"},
        "runs": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["tool"],
                "properties": {
                    "tool": {
                        "type": "object",
                        "required": ["driver"],
                        "properties": {
                            "driver": {
                                "type": "object",
                                "required": ["name"],
                                "properties": {
                                    "name": {"type": "string"},
                                    "rules": {"type": "array", "items": {
                                        "type": "object", "required": ["id"],
                                        "properties": {"defaultConfiguration": {"type": "object", "properties": {
                                            "level": {"enum": ["none", "note", "warning", "error"]}}}},
                                    }},
                                },
                            }
                        },
                    },
                    "results": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "required": ["message"],
                            "properties": {
                                "message": _MESSAGE,
                                "ruleId": {"type": "string"},
                                "ruleIndex": {"type": "integer", "minimum": 0},
                                "level": {"enum": ["none", "note", "warning", "error"]},
                                "locations": {"type": "array", "items": _LOCATION},
                            },
                        },
                    },
                    "originalUriBaseIds": {"type": "object", "additionalProperties": {
                        "type": "object", "properties": {"uri": {"type": "string", "pattern": "/$"}}}},
                },
            },
        },
    },
}
