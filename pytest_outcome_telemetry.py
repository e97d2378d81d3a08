"""The pytest plugin outcome-telemetry registers: the ``telemetry_capture`` fixture.

pytest imports every installed plugin at start-up, in every project that has us installed, so
this module stays outside the ``telemetry`` package (importing anything under ``telemetry``
first imports the package, and with it the OpenTelemetry SDK). The toolkit is imported only
when a test asks for the fixture.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from telemetry.testing import Capture

__all__ = ["telemetry_capture"]


@pytest.fixture
def telemetry_capture() -> Iterator[Capture]:
    """A fresh in-memory span exporter and registry, active for one test (see ``telemetry.testing``)."""
    from telemetry.testing import capture

    with capture() as cap:
        yield cap
