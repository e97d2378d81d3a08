"""configure() tells its own tracer providers from the application's by reference, never by id().

An id() is an address, and CPython reuses the address of a collected object: a provider the
application creates later can sit where one of ours was. Waiting for the allocator to do that
is slow and proves nothing when it does not happen, so these tests make the collision certain:
``id()`` is patched to give every TracerProvider the same value, the worst case of reuse.
"""

from __future__ import annotations

import builtins
import gc
import weakref

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider

import telemetry

_real_id = builtins.id


def _one_address_for_every_provider(obj: object) -> int:
    return 1 if isinstance(obj, TracerProvider) else _real_id(obj)


@pytest.fixture
def colliding_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(builtins, "id", _one_address_for_every_provider)
    assert id(TracerProvider()) == id(TracerProvider())  # the collision is in force


def _configure_over(application: TracerProvider, monkeypatch: pytest.MonkeyPatch) -> telemetry.Runtime:
    """configure() with ``application`` installed as the global provider."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", application)
    return telemetry.configure(traces_dir=None)


def test_application_provider_sharing_a_live_providers_id_is_added_to(
    colliding_ids: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With one of ours still alive "at the same address", the application's provider is still the application's."""
    own = telemetry.configure(traces_dir=None, install_global=False)
    ours = own.provider  # kept alive: its id stays taken
    own.shutdown()  # one runtime at a time
    application = TracerProvider()
    rt = _configure_over(application, monkeypatch)
    try:
        assert rt.provider is application and ours is not application
    finally:
        rt.shutdown()


def test_application_provider_at_a_collected_providers_address_is_added_to(
    colliding_ids: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After one of ours is collected, an application provider "at its address" is the application's."""
    own = telemetry.configure(traces_dir=None, install_global=False)
    gone = weakref.ref(own.provider)
    own.shutdown()
    del own
    gc.collect()
    assert gone() is None  # ours really was collected: only a remembered id could match now
    application = TracerProvider()
    rt = _configure_over(application, monkeypatch)
    try:
        assert rt.provider is application
    finally:
        rt.shutdown()
