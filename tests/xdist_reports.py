"""Test reports pytest-xdist can send: a failure holding a lone surrogate stays a failure.

pytest-xdist sends each test's report from its worker to the controller as UTF-8. A property test
that fails on a hostile value (a lone surrogate, which UTF-8 cannot encode) puts that value in its
report, and the worker then crashes while sending it: the run ends with an internal error naming
only the test it was running, and the failure itself is lost. The hook below writes such
characters as backslash escapes first. ``tests/conftest.py`` imports it, and
``tests/foundation/test_xdist_reports.py`` runs a failing test under two workers with it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

__all__ = ["encodable", "pytest_runtest_makereport"]


def encodable(text: str) -> str:
    """``text`` with what UTF-8 cannot encode (a lone surrogate) written as a backslash escape."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failure whose message holds a lone surrogate (a property test's hostile value) reaches the
    log as a failure: pytest-xdist sends each report to the controller as UTF-8, and a report it
    cannot encode crashes the worker instead, naming only the test it was running."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.longrepr is not None and not isinstance(report.longrepr, tuple):
        text = str(report.longrepr)
        if encodable(text) is not text:
            report.longrepr = encodable(text)
    report.sections = [(title, encodable(content)) for title, content in report.sections]
