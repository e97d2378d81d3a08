"""What the span files survive: a fork mid-write, a full disk, hostile strings, a folder removed,
a hung exporter at shutdown, Ctrl-C during a flush. Each loss that cannot be avoided is counted."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from prometheus_client import CollectorRegistry

import telemetry
from telemetry import conventions as c
from telemetry.forensics import open_traces
from telemetry.runtime._batching import BatchSettings, CountingBatchProcessor
from telemetry.runtime._metrics import ToolMetrics


def lines_of(folder: Path) -> list[dict[str, object]]:
    """Every line of every trace file, parsed; a line that is not JSON fails the test, named."""
    out = []
    for path in sorted(folder.glob("*.jsonl")):
        for number, line in enumerate(path.read_bytes().split(b"\n")[:-1], 1):
            try:
                out.append(json.loads(line.decode("utf-8")))
            except ValueError as exc:
                pytest.fail(f"{path.name}: line {number} is not one JSON object ({exc}): {line[:80]!r}")
    return out


def span_count(folder: Path) -> int:
    return sum(len(ss["spans"]) for data in lines_of(folder) for rs in data["resourceSpans"]  # type: ignore[attr-defined]
               for ss in rs["scopeSpans"])


# --- a fork while the exporter writes ----------------------------------------------------------

FORKING_APP = textwrap.dedent("""
    import json, os, sys, threading, time
    import telemetry

    folder, forks, calls = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    runtime = telemetry.configure(service_name="forks", traces_dir=folder, schedule_delay_millis=1)

    @telemetry.instrument_tool(kind="read")
    def ping(i):
        return {"ok": True}

    stop = threading.Event()

    def work():
        i = 0
        while not stop.is_set():
            ping(i)
            i += 1

    threads = [threading.Thread(target=work, daemon=True) for _ in range(3)]
    for thread in threads:
        thread.start()
    children = []
    for _ in range(forks):
        time.sleep(0.003)
        pid = os.fork()
        if pid == 0:  # the child: its own calls, then a normal exit (atexit shuts the runtime down)
            for i in range(calls):
                ping(i)
            sys.exit(0)
        children.append(pid)
    stop.set()
    hung, failed = [], []
    deadline = time.monotonic() + 30
    for pid in children:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                if status != 0:
                    failed.append(pid)
                break
            if time.monotonic() > deadline:
                os.kill(pid, 9)
                os.waitpid(pid, 0)
                hung.append(pid)
                break
            time.sleep(0.01)
    for thread in threads:
        thread.join()
    runtime.shutdown()
    print(json.dumps({"children": children, "hung": hung, "failed": failed}))
""")


def test_children_forked_while_the_exporter_writes_write_their_spans_and_exit(tmp_path: Path) -> None:
    """40 forks of a process whose 3 threads call tools while its exporter writes every
    millisecond: no child hangs (on the exporter's lock, inherited held, or at exit), and each
    child's file holds exactly its own calls, in whole lines."""
    forks, calls = 40, 25
    run = subprocess.run([sys.executable, "-c", FORKING_APP, str(tmp_path), str(forks), str(calls)],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["hung"] == [], f"{len(result['hung'])} of {forks} forked children hung"
    assert result["failed"] == []
    for pid in result["children"]:
        files = list(tmp_path.glob(f"forks-{pid}-*.jsonl"))
        assert len(files) == 1, f"child {pid} wrote {len(files)} files"
        folder = tmp_path / f"child-{pid}"
        folder.mkdir()
        files[0].rename(folder / files[0].name)
        assert span_count(folder) == calls, f"child {pid}"
    assert span_count(tmp_path) > 0  # the parent's own file, in whole lines


# --- a full disk -------------------------------------------------------------------------------

@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A real 64 KB tmpfs (root only: CI runs as root; elsewhere the test is skipped, saying why)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        reason = f"cannot mount a 64 KB tmpfs ({done.stderr.strip() or 'mount refused'}); needs root"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full; the file, to free the space again."""
    filler = disk / "filler.bin"
    with open(filler, "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError:
            pass
    return filler


def test_a_full_disk_loses_whole_batches_counted_and_never_glues_lines(small_disk: Path) -> None:
    """On a real full tmpfs the write that fails part-way leaves no partial line: its spans are
    counted as export_failed, and once space is back the next batch starts a line of its own.
    Every line parses, the file loads in forensics without --skip-bad-lines, and spans in the
    file plus spans counted as lost is every call."""
    @telemetry.instrument_tool(kind="read", record_arguments=["text"])
    def note(text: str) -> dict[str, bool]:
        return {"ok": True}

    big = "x" * 900  # a batch of these spans is far larger than what is left in the file's last page
    with telemetry.configure(service_name="full", traces_dir=small_disk, schedule_delay_millis=60_000) as rt:
        before = 0
        while before == 0 or not 500 < os.path.getsize(rt.trace_file) % 4096 < 3500:  # type: ignore[arg-type]
            note("first")
            assert rt.force_flush()
            before += 1
        filler = fill(small_disk)
        for _ in range(30):
            note(big)
        rt.force_flush()
        lost = rt.dropped_spans[c.EXPORTER_FILE][c.DROP_EXPORT_FAILED]
        assert lost == 30
        filler.unlink()
        for _ in range(5):
            note("after")
        assert rt.force_flush()
    assert span_count(small_disk) == before + 5
    labels = {c.LABEL_EXPORTER: c.EXPORTER_FILE, c.LABEL_REASON: c.DROP_EXPORT_FAILED}
    assert rt.registry.get_sample_value(c.METRIC_SPANS_DROPPED_TOTAL, labels) == 30
    with open_traces([small_disk], skip_bad_lines=False) as traces:
        assert len(traces.spans().fetchall()) == before + 5


# --- hostile strings ---------------------------------------------------------------------------

def test_lone_surrogates_are_written_as_replacement_characters_forensics_reads(tmp_path: Path) -> None:
    """A lone surrogate in an argument and in the agent id (a model's tool call can produce one)
    is written as U+FFFD: the file loads in DuckDB through forensics, with the value visibly
    replaced, and a surrogate pair is still the character it spells."""
    @telemetry.instrument_tool(kind="read", record_arguments=["text"])
    def lookup(text: str) -> dict[str, bool]:
        return {"ok": True}

    with telemetry.configure(service_name="hostile", traces_dir=tmp_path):
        with telemetry.agent("agent-\udc00"):
            lookup("lone \ud800 high, pair \ud83d\ude00")
    with open_traces([tmp_path], skip_bad_lines=False) as traces:
        rows = traces.connection.sql(
            "SELECT agent_id, attr(attributes, 'tool.argument.text') FROM spans WHERE tool_name = 'lookup'").fetchall()
    assert rows == [("agent-\ufffd", "lone \ufffd high, pair \U0001f600")]


# --- import-time work --------------------------------------------------------------------------

def test_importing_telemetry_builds_no_tracer_provider_and_registers_no_exit_hook() -> None:
    """`import telemetry` only defines things: the encoder's probe runs at the first export."""
    probe = textwrap.dedent("""
        import atexit
        import opentelemetry.sdk.trace as sdk
        built = []
        original = sdk.TracerProvider.__init__
        def counting(self, *a, **k):
            built.append(1)
            original(self, *a, **k)
        sdk.TracerProvider.__init__ = counting
        hooks = atexit._ncallbacks()
        import telemetry
        from telemetry.runtime import _otlp_text as otlp_text
        print(len(built), atexit._ncallbacks() - hooks, getattr(otlp_text, "_fast", "decided"))
        print(otlp_text.FAST_PATH, len(built))
    """)
    run = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["0", "0", "None", "True", "1"]


# --- the folder removed ------------------------------------------------------------------------

def test_spans_written_after_the_traces_folder_was_removed_go_to_a_new_file(tmp_path: Path) -> None:
    """An operator removes traces_dir while the process runs: the next export makes the folder
    and a new file again instead of writing into the unlinked one, which nobody could read."""
    import shutil

    @telemetry.instrument_tool(kind="read")
    def ping() -> dict[str, bool]:
        return {"ok": True}

    folder = tmp_path / "traces"
    with telemetry.configure(service_name="gone", traces_dir=folder, schedule_delay_millis=60_000) as rt:
        ping()
        assert rt.force_flush()
        shutil.rmtree(folder)
        for _ in range(300):
            ping()
        assert rt.force_flush()
    assert span_count(folder) == 300
    assert rt.dropped_spans[c.EXPORTER_FILE] == dict.fromkeys(c.DROP_REASONS, 0)


# --- a hung exporter and Ctrl-C ----------------------------------------------------------------

class Hung(SpanExporter):
    """An exporter whose export blocks until released (a collector that stopped answering)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.entered = threading.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.entered.set()
        self.release.wait(60)
        return SpanExportResult.SUCCESS


def test_shutdown_behind_a_hung_exporter_takes_its_timeout_and_counts_every_span() -> None:
    """700 spans behind an exporter hung on its first batch: shutdown returns after its export
    timeout, not the exporter's, and all 700 are counted (512 of them were in the hung batch)."""
    hung = Hung()
    metrics = ToolMetrics(CollectorRegistry())
    settings = BatchSettings(max_queue_size=2048, schedule_delay_millis=5000, max_export_batch_size=512,
                             export_timeout_millis=1000)
    processor = CountingBatchProcessor(hung, settings, metrics, exporter_label=c.EXPORTER_OTHER)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    for _ in range(700):
        tracer.start_span("s").end()
    assert hung.entered.wait(10)
    started = time.monotonic()
    processor.shutdown()
    took = time.monotonic() - started
    hung.release.set()
    assert took < 3, f"shutdown took {took:.1f} s with export_timeout_millis=1000"
    assert processor.dropped[c.DROP_SHUTDOWN_TIMEOUT] == 700


class HungShutdown(Hung):
    """Hung in its export, and its own shutdown() waits for that export (as the SDK's exporters may)."""

    def shutdown(self) -> None:
        self.release.wait(60)


def test_configures_export_timeout_bounds_a_hung_otlp_endpoint_and_extra_exporter_together(tmp_path: Path) -> None:
    """configure(export_timeout_millis=1000) with a real OTLP/HTTP endpoint on loopback that accepts
    and never answers, and an extra exporter hung in its export and in its shutdown: shutdown()
    returns after about the one timeout (the exporters wait together, not in turn; before, 30 s
    for the extra exporter and the OTLP exporter's own request timeouts), and every span each of
    them held, its in-flight batch included, is counted as shutdown_timeout; the shutdown left
    hanging is counted as an exporter failure."""
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http.trace_exporter")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(64)  # the kernel accepts connections; nobody ever reads or answers
    hung = HungShutdown()
    try:
        rt = telemetry.configure(service_name="hung", traces_dir=tmp_path, metrics_port=None, extra_exporters=[hung],
                                 otlp_endpoint=f"http://127.0.0.1:{silent.getsockname()[1]}/v1/traces",
                                 export_timeout_millis=1000, schedule_delay_millis=50)

        @telemetry.instrument_tool(kind="read")
        def lookup(i: int) -> dict[str, bool]:
            return {"ok": True}

        for i in range(700):
            lookup(i)
        assert hung.entered.wait(10)
        time.sleep(0.3)  # the OTLP worker is inside its first request by now
        started = time.monotonic()
        rt.shutdown()
        took = time.monotonic() - started
    finally:
        hung.release.set()
        silent.close()
    assert took < 5, f"shutdown took {took:.1f} s with export_timeout_millis=1000"
    for exporter in (c.EXPORTER_OTLP, c.EXPORTER_OTHER):
        assert rt.dropped_spans[exporter][c.DROP_SHUTDOWN_TIMEOUT] == 700, (exporter, rt.dropped_spans)
        labels = {c.LABEL_EXPORTER: exporter, c.LABEL_REASON: c.DROP_SHUTDOWN_TIMEOUT}
        assert rt.registry.get_sample_value(c.METRIC_SPANS_DROPPED_TOTAL, labels) == 700
    written = [json.loads(line) for path in tmp_path.glob("*.jsonl") for line in path.read_text().splitlines()]
    assert sum(len(ss["spans"]) for d in written for rs in d["resourceSpans"] for ss in rs["scopeSpans"]) == 700
    assert rt.registry.get_sample_value(c.METRIC_INTERNAL_ERRORS_TOTAL, {c.LABEL_STAGE: c.STAGE_EXPORTER}) == 1


class Interrupting(SpanExporter):
    """An exporter that raises KeyboardInterrupt in its first export (Ctrl-C mid-flush)."""

    def __init__(self) -> None:
        self.received: list[int] = []
        self.interrupted = False

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if not self.interrupted:
            self.interrupted = True
            raise KeyboardInterrupt
        self.received += [s.context.span_id for s in spans]  # type: ignore[union-attr]
        return SpanExportResult.SUCCESS


def test_ctrl_c_during_force_flush_puts_the_batch_back() -> None:
    """Ctrl-C while force_flush() exports from the calling thread: the interrupt reaches the
    caller, and the batch it held is exported afterwards, not lost."""
    exporter = Interrupting()
    settings = BatchSettings(max_queue_size=2048, schedule_delay_millis=60_000, max_export_batch_size=512,
                             export_timeout_millis=5000)
    processor = CountingBatchProcessor(exporter, settings, None)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("t")
    ended = []
    for _ in range(100):
        span = tracer.start_span("s")
        span.end()
        ended.append(span.get_span_context().span_id)
    with pytest.raises(KeyboardInterrupt):
        processor.force_flush()
    assert processor.queued == 100
    processor.shutdown()
    assert sorted(exporter.received) == sorted(ended)
    assert sum(processor.dropped.values()) == 0
