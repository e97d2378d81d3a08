"""The follower hands out each complete line once: growth, partial lines, rotation, truncation, new files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from telemetry.exceptions import ForensicsInputError
from telemetry.forensics.watch._follow import Follower

BUDGET = 1 << 20


def read_all(follower: Follower) -> bytes:
    """One pass that stores what it read: scan, read, commit."""
    follower.scan()
    data = b"".join(chunk.data for chunk in follower.read(BUDGET))
    follower.commit()
    return data


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    """Only bytes up to the last newline are read; the rest comes once its newline arrives."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b'{"one":1}\n{"tw')
    follower = Follower([str(tmp_path)])
    assert read_all(follower) == b'{"one":1}\n'
    assert read_all(follower) == b""
    with path.open("ab") as handle:
        handle.write(b'o":2}\n')
    assert read_all(follower) == b'{"two":2}\n'


def test_line_numbers_follow_the_file(tmp_path: Path) -> None:
    """A chunk says which line of its file it starts at, so a bad line can be named."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"a\nb\n")
    follower = Follower([str(path)])
    follower.scan()
    assert [c.first_line for c in follower.read(BUDGET)] == [1]
    follower.commit()
    path.open("ab").write(b"c\n")
    follower.scan()
    chunk = follower.read(BUDGET)[0]
    assert (chunk.first_line, chunk.lines, chunk.path) == (3, 1, str(path))


def test_rotation_by_rename_finishes_the_old_file_and_reads_the_new(tmp_path: Path) -> None:
    """Renamed away (to a name that is not a trace file) the old file is read to its end, then
    the new file at the old name from its start."""
    path = tmp_path / "traces.jsonl"
    path.write_bytes(b"1\n")
    follower = Follower([str(tmp_path)])
    assert read_all(follower) == b"1\n"
    with path.open("ab") as handle:
        handle.write(b"2\n")
    os.rename(path, tmp_path / "traces.jsonl.1")
    path.write_bytes(b"3\n")
    assert sorted(read_all(follower).splitlines()) == [b"2", b"3"]
    assert read_all(follower) == b""
    assert len(follower.files) == 1


def test_a_truncated_or_replaced_file_is_read_again_from_the_start(tmp_path: Path) -> None:
    """Copy-truncate rotation: a file shorter than the offset starts over."""
    path = tmp_path / "a.jsonl"
    path.write_bytes(b"first line\nsecond line\n")
    follower = Follower([str(tmp_path)])
    read_all(follower)
    path.write_bytes(b"new\n")
    assert read_all(follower) == b"new\n"


def test_new_files_in_a_directory_are_picked_up(tmp_path: Path) -> None:
    """One file per process: a file that appears later is followed too; compressed ones are not."""
    follower = Follower([str(tmp_path)])
    assert read_all(follower) == b""
    (tmp_path / "p1.jsonl").write_bytes(b"x\n")
    (tmp_path / "old.jsonl.gz").write_bytes(b"not read")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "p2.jsonl").write_bytes(b"y\n")
    assert sorted(read_all(follower).splitlines()) == [b"x", b"y"]


def test_a_missing_path_is_a_named_error(tmp_path: Path) -> None:
    """A path that does not exist (and is not a glob) is refused by name."""
    with pytest.raises(ForensicsInputError, match="nope"):
        Follower([str(tmp_path / "nope")])


def test_the_budget_leaves_the_rest_for_the_next_read(tmp_path: Path) -> None:
    """A backlog bigger than one read's budget is read over several, each line once."""
    (tmp_path / "a.jsonl").write_bytes(b"".join(b"line %d\n" % i for i in range(100)))
    follower = Follower([str(tmp_path)])
    follower.scan()
    parts = []
    while chunks := follower.read(64):
        follower.commit()
        parts += [c.data for c in chunks]
        if follower.backlog:
            assert len(b"".join(parts)) < 100 * 8
    assert not follower.backlog
    assert b"".join(parts) == b"".join(b"line %d\n" % i for i in range(100))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.binary(min_size=1, max_size=30).filter(lambda b: b"\n" not in b), min_size=1, max_size=20),
       st.lists(st.integers(min_value=0, max_value=400), max_size=8))
def test_any_write_pattern_yields_exactly_the_complete_lines(lines: list[bytes], cuts: list[int]) -> None:
    """However the writer splits its bytes, the reads concatenate to exactly the complete lines
    written so far, in order, each once."""
    import tempfile

    data = b"".join(line + b"\n" for line in lines)
    points = sorted({min(c, len(data)) for c in cuts} | {len(data)})
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "t.jsonl"
        path.write_bytes(b"")
        follower = Follower([folder])
        got = b""
        written = 0
        for point in points:
            with path.open("ab") as handle:
                handle.write(data[written:point])
            written = point
            got += read_all(follower)
            assert got == data[: data[:written].rfind(b"\n") + 1]
        follower.close()
    assert got == data
