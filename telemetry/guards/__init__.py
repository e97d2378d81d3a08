"""Guarded tool primitives: refuse the coordination failure at call time, on the record.

Each guard is a tool instrumented with ``@instrument_tool``; a refusal is a recoverable
envelope (see :mod:`telemetry.guards.envelope`), never an exception, and is counted.
"""
