"""What the Python API takes as trace paths and peer options: one path or a list of them, or a
named refusal; never a string read as its characters.

A string is iterable, so ``open_traces("traces/x.jsonl")`` used to read the paths "t", "r", ...
and ``open_traces("/x")`` began with the root folder, walking the whole machine before failing on
a folder it could not list. ``ingest`` and ``watch``'s ``WatchOptions(paths=...)`` took the same
route.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import ingest, open_traces
from telemetry.forensics.watch import Watcher, WatchOptions

from forensics_incidents import planted


@pytest.fixture(scope="module")
def trace_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted().write(tmp_path_factory.mktemp("paths") / "crew.jsonl")


def _spans(paths: Any) -> int:
    with open_traces(paths) as traces:
        return traces.load_report.spans


@pytest.mark.parametrize("shape", [str, Path, lambda p: [str(p)], lambda p: (p,), lambda p: iter([p])],
                         ids=["str", "Path", "list", "tuple", "iterator"])
def test_one_path_or_a_list_of_them_reads_the_same_spans(trace_file: Path, shape: Callable[[Path], Any]) -> None:
    assert _spans(shape(trace_file)) == _spans([trace_file]) == len(planted().spans)


@pytest.mark.parametrize("paths, named", [
    (None, "not NoneType None"), (5, "not int 5"), (b"/tmp/x.jsonl", "not bytes b'/tmp/x.jsonl'"),
    (["{file}", 5], "a trace path must be text or a path, not int 5"),
    (["{file}", b"/x"], "a trace path must be text or a path, not bytes b'/x'"),
])
def test_what_is_not_a_path_or_a_list_of_paths_is_refused_by_name(trace_file: Path, paths: Any, named: str) -> None:
    if isinstance(paths, list):
        paths = [str(trace_file) if p == "{file}" else p for p in paths]
    with pytest.raises(ForensicsInputError, match=re.escape(named)):
        open_traces(paths)


def test_ingest_and_watch_take_one_path_as_that_path(trace_file: Path, tmp_path: Path) -> None:
    result = ingest(str(trace_file), tmp_path / "parts")
    assert result.spans == len(planted().spans) and len(result.ingested) == 1
    watcher = Watcher(WatchOptions(paths=str(trace_file.parent), settle=0.0))  # type: ignore[arg-type]
    try:
        assert watcher.run_pass().spans == len(planted().spans)
    finally:
        watcher.close()


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=st.one_of(st.integers(), st.floats(), st.binary(max_size=8), st.booleans(),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
                       st.lists(st.integers(), min_size=1, max_size=2)))
def test_a_peer_option_that_is_not_a_name_selector_or_function_is_refused_by_name(trace_file: Path, value: Any) -> None:
    """``tool_spans`` and ``result_shapes`` take one value or a list of them; anything else is a
    ForensicsInputError naming its type, never a TypeError from deep in the load or a silently
    different set of selectors."""
    for option in ("tool_spans", "result_shapes"):
        named = f"{option} takes " + ("" if isinstance(value, list) else "one value or a list of them, not ")
        with pytest.raises(ForensicsInputError, match=re.escape(named)) as caught:
            open_traces([trace_file], **{option: value})
        assert (type(value[0]) if isinstance(value, list) else type(value)).__name__ in str(caught.value)
