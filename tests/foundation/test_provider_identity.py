"""configure() tells its own tracer providers from the application's by reference, never by id()."""

from __future__ import annotations

import gc

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import telemetry


def test_application_provider_at_a_reused_address_is_added_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """An application provider created where a collected runtime provider lived is still the application's."""
    mistaken = 0
    for _ in range(100):
        own = telemetry.configure(traces_dir=None, install_global=False)
        own.shutdown()
        del own
        gc.collect()  # its provider is gone; CPython often reuses the address for the next one
        application = TracerProvider()
        monkeypatch.setattr(trace, "_TRACER_PROVIDER", application)
        rt = telemetry.configure(traces_dir=None)
        mistaken += rt.provider is not application
        rt.shutdown()
        del rt, application
        monkeypatch.undo()
        gc.collect()
    assert mistaken == 0, f"{mistaken} of 100 application providers were mistaken for ours"
