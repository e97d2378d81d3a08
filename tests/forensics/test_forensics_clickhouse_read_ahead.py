"""The chDB read's reader thread: every batch once and in order, failures where the consumer reads,
a bounded lead, and nothing left running (or touching the engine's result) once the block ends.

The source here is a plain Python iterator standing in for chDB's streamed result: what is under
test is the thread and its queue, which behave the same whatever produces the batches. The real
engine goes through it in every chDB test (test_forensics_clickhouse*.py), including a read that
fails part-way and one stopped by --max-spans."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.forensics.clickhouse._read_ahead import READ_AHEAD_BATCHES, ReadAhead


class _Source:
    """An iterator that counts what it was asked for, optionally failing after ``fail_after``
    items or never ending; it notes every thread that pulled from it, whether a fetch is under way
    (``fetching``), and whether any fetch was under way or began once ``closed`` was set (the
    engine's result closed)."""

    def __init__(self, items: list[int] | None = None, fail_after: int | None = None, delay_s: float = 0.0):
        self.items, self.fail_after, self.delay_s = items, fail_after, delay_s
        self.pulled = 0
        self.closed = False
        self.pulled_after_close = False
        self.fetching = False
        self.threads: set[str] = set()

    def __iter__(self) -> Iterator[int]:
        return self

    def __next__(self) -> int:
        self.threads.add(threading.current_thread().name)
        self.pulled_after_close |= self.closed
        self.fetching = True
        if self.delay_s:
            time.sleep(self.delay_s)
        self.pulled_after_close |= self.closed
        self.fetching = False
        if self.fail_after is not None and self.pulled == self.fail_after:
            raise RuntimeError(f"the engine failed after {self.pulled} batches")
        if self.items is not None and self.pulled == len(self.items):
            raise StopIteration
        self.pulled += 1
        return self.items[self.pulled - 1] if self.items is not None else self.pulled


@settings(max_examples=60, deadline=None)
@given(items=st.lists(st.integers(), max_size=40), depth=st.integers(1, 6))
def test_every_batch_arrives_once_and_in_order(items: list[int], depth: int) -> None:
    source = _Source(items)
    with ReadAhead(source, depth) as ahead:
        assert list(ahead) == items
    assert source.threads == {"clickhouse-read-ahead"}  # the consumer's thread never pulled


@settings(max_examples=30, deadline=None)
@given(fail_after=st.integers(0, 12), depth=st.integers(1, 4))
def test_a_failure_is_raised_where_the_consumer_reads_after_the_batches_before_it(fail_after: int,
                                                                                  depth: int) -> None:
    got: list[int] = []
    with pytest.raises(RuntimeError, match=f"failed after {fail_after} batches"):
        with ReadAhead(_Source(fail_after=fail_after), depth) as ahead:
            for batch in ahead:
                got.append(batch)
    assert got == list(range(1, fail_after + 1))


def test_the_lead_is_bounded_while_the_consumer_is_slow() -> None:
    """The reader holds at most ``depth`` batches beyond the one it is handing over, however far
    the engine could run ahead: a read's memory stays a few batches."""
    source = _Source()  # never ends
    depth = 3
    with ReadAhead(source, depth) as ahead:
        for consumed, _ in enumerate(ahead, start=1):
            time.sleep(0.01)  # the reader fills its queue meanwhile
            assert source.pulled <= consumed + depth + 1
            if consumed == 20:
                break


@pytest.mark.parametrize(("depth", "delay_s"), [(1, 0.002), (READ_AHEAD_BATCHES, 0.002), (5, 0.002),
                                                (READ_AHEAD_BATCHES, 0.2)])
def test_a_consumer_that_stops_early_stops_the_reader_before_the_result_is_closed(depth: int,
                                                                                   delay_s: float) -> None:
    """Leaving the block (a span budget met, an error in DuckDB) returns with the reader ended,
    whether it was blocked on a full queue (fast fetches) or inside a slow fetch (0.2 s): whatever
    closes the engine's result afterwards (``_chdb_stream``'s ``finally``) closes something no
    thread still reads."""
    source = _Source(delay_s=delay_s)
    with ReadAhead(source, depth) as ahead:
        assert next(ahead) == 1
        time.sleep(0.05)  # the reader fills its queue and blocks, or is inside its next fetch
    assert not source.fetching
    source.closed = True
    pulled = source.pulled
    time.sleep(0.05)
    assert not any(t.name == "clickhouse-read-ahead" and t.is_alive() for t in threading.enumerate())
    assert source.pulled == pulled and not source.pulled_after_close


def test_an_error_in_the_consumer_stops_the_reader_and_is_raised_unchanged() -> None:
    """DuckDB failing while the reader is inside a slow fetch: the error passes through as it was,
    and only once the reader has finished that fetch and ended."""
    source = _Source(delay_s=0.1)
    with pytest.raises(KeyError, match="duckdb said no"):
        with ReadAhead(source) as ahead:
            next(ahead)
            raise KeyError("duckdb said no")
    assert not source.fetching
    source.closed = True
    time.sleep(0.15)
    assert not source.pulled_after_close


def test_a_depth_below_one_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="read-ahead depth must be at least 1, not 0"):
        ReadAhead(iter([]), 0)
