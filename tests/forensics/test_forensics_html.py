"""`forensics report --html`: one self-contained page, checked in a real headless Chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from telemetry import conventions as c
from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import Forensics, open_traces
from telemetry.forensics._cli import main
from telemetry.forensics.html import render_html, validate_trace_url, write_html

from forensics_builder import TraceBuilder, attrs
from forensics_incidents import planted
from headless_chromium import Browser, file_url, png_pixels

HOSTILE_AGENT = "<script>alert(1)</script>"
HOSTILE_KEY = '"><img src=x onerror=alert(2)>'
HOSTILE_TRACE = "javascript:alert(3)"


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("html")
    traces = planted().write(folder / "crew.jsonl")
    out = folder / "report.html"
    assert main(["report", str(traces), "-q", "--html", str(out)]) == 0
    return out


@pytest.fixture(scope="module")
def planted_traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forensics]:
    """The planted incidents, opened once for the tests that only render and read them."""
    path = planted().write(tmp_path_factory.mktemp("planted") / "t.jsonl")
    with open_traces([path]) as traces:
        yield traces


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def _hostile_traces(folder: Path) -> Path:
    b = TraceBuilder()
    b.add("r-x", "read_state", c.KIND_READ, HOSTILE_AGENT, 1, attrs=attrs(STATE_KEY=HOSTILE_KEY, STATE_VERSION_READ="v1"))
    b.add("r-x", "read_state", c.KIND_READ, "other", 2, attrs=attrs(STATE_KEY=HOSTILE_KEY, STATE_VERSION_READ="v1"))
    b.add("r-x", "legacy_write", c.KIND_WRITE, "other", 3, attrs=attrs(STATE_KEY=HOSTILE_KEY, STATE_VERSION_WRITTEN="v2"))
    b.add("r-x", "legacy_write", c.KIND_WRITE, HOSTILE_AGENT, 4, attrs=attrs(STATE_KEY=HOSTILE_KEY, STATE_VERSION_WRITTEN="v3"))
    return b.write(folder / "hostile.jsonl")


def test_page_is_self_contained_with_no_script_and_no_external_reference(page: Path) -> None:
    """The file has no script, no event handler, no src/url()/@import, and links only to itself."""
    text = page.read_text()
    assert not re.search(r"<script|\son\w+=|\ssrc=|url\(|@import|<link|<iframe|<object", text, re.I)
    assert set(re.findall(r'href="([^"]*)"', text)) <= {"#evidence", "#findings", "#chains", "#keys", "#tools"}
    assert "http://" not in text and "https://" not in text


def test_chain_diagram_names_the_lost_constraint(page: Path) -> None:
    """The delegation section says, in words, which constraint was lost at which hop by whom."""
    text = page.read_text()
    assert "C3 last carried at hop 2, lost at hop 3 by agent writer (task T1.1.1.1)" in text
    assert "C1 last carried at hop 3, lost at hop 4 by agent reviewer" in text


def test_page_loads_in_chromium_without_errors_and_draws_the_loss(page: Path, browser: Browser) -> None:
    """Real headless Chromium: no console error, no request off the file, lost constraint drawn, screenshot not blank."""
    browser.load(file_url(page))
    assert browser.errors() == []
    assert all(u.startswith("file:") for u in browser.requested_urls()), browser.requested_urls()
    drawn = browser.evaluate(
        "[...document.querySelectorAll('svg.chain .lostlabel')].map(e => [e.textContent, e.getBBox().width])")
    assert any(label.startswith("LOST: C3") and width > 0 for label, width in drawn), drawn
    lost_box = browser.evaluate("document.querySelectorAll('svg.chain g.task.lost rect').length")
    assert lost_box >= 2
    width, height, rows = png_pixels(browser.screenshot())
    colours = {row[i:i + 3] for row in rows[::8] for i in range(0, len(row), 24)}
    assert width > 0 and height > 0 and len(colours) > 20, "the screenshot is blank"


def test_hostile_values_are_escaped_and_trace_links_encoded(tmp_path: Path, browser: Browser) -> None:
    """Agent names, keys and trace ids built to break out stay text; the link's id is percent-encoded."""
    out = tmp_path / "hostile.html"
    with open_traces([_hostile_traces(tmp_path)]) as traces:
        write_html(traces, out, trace_url="https://grafana.example/explore?trace={trace_id}")
    text = out.read_text()
    assert "<script" not in text and "<img" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;" in text
    assert re.search(r'href="https://grafana\.example/explore\?trace=[0-9a-f]{32}"', text)
    assert 'href="javascript' not in text
    browser.load(file_url(out))
    assert browser.errors() == []
    assert browser.evaluate("document.querySelectorAll('script, img, iframe').length") == 0
    assert HOSTILE_AGENT in browser.evaluate("document.body.innerText")


def test_a_hostile_trace_id_is_percent_encoded_into_the_link() -> None:
    """The loader refuses non-hex ids, and the link maker does not rely on it: the id is encoded and escaped."""
    from telemetry.forensics.html import TraceLinks

    html = TraceLinks("https://jaeger.example/trace/{trace_id}").link(HOSTILE_TRACE + '"><script>x</script>')
    assert 'href="https://jaeger.example/trace/javascript%3Aalert%283%29%22%3E%3Cscript%3Ex%3C%2Fscript%3E"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert TraceLinks(None).link(HOSTILE_TRACE) == "<code>javascript:alert(3)</code>"


@pytest.mark.parametrize("template", [
    "http://localhost:16686/trace/",                  # no placeholder
    "http://x/{trace_id}/{trace_id}",                 # twice
    "javascript:alert(1)//{trace_id}",                # not http(s)
    "http://x/{trace_id}\"><script>",                 # breaks out of the attribute
    "http://x/{span_id}/{trace_id}",                  # another brace
    "/relative/{trace_id}",                           # no host
])
def test_bad_trace_url_templates_are_refused_with_the_value(template: str) -> None:
    """--trace-url refuses anything but an absolute http(s) URL with {trace_id} once, naming it."""
    with pytest.raises(ForensicsInputError) as info:
        validate_trace_url(template)
    assert repr(template) in str(info.value)


def test_cli_trace_url_needs_html_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """--trace-url without --html, or a bad template, exits 2 with the reason."""
    traces = planted().write(tmp_path / "t.jsonl")
    assert main(["report", str(traces), "-q", "--trace-url", "http://x/{trace_id}"]) == 2
    assert main(["report", str(traces), "-q", "--html", str(tmp_path / "r.html"), "--trace-url", "ftp://x/{trace_id}"]) == 2
    assert "--trace-url" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_evidence_summary_renders_the_evidence_object(page: Path) -> None:
    """The evidence section shows what the answers rest on (files, spans read and kept) and its warnings or their absence."""
    text = page.read_text()
    evidence = text.split('id="evidence"')[1].split('id="findings"')[0]
    assert "<dt>files</dt><dd>1</dd>" in evidence and f"<dt>spans read</dt><dd>{len(planted().spans)}</dd>" in evidence
    assert "No loading warnings." in evidence


def test_findings_are_grouped_by_severity_with_their_rows(planted_traces: Forensics) -> None:
    """Critical before warning before record; every row of a question is in the page."""
    text = render_html(planted_traces)
    refusals = len(planted_traces.run("guard_refusals"))
    crit, warn, rec = (text.index(f'<span class="sev {s}">') for s in ("critical", "warning", "record"))
    assert crit < warn < rec
    section = text.split('id="q-guard_refusals"')[1].split("</section>")[0]
    assert section.count("<tr>") == refusals + 1


def test_the_page_uses_the_answers_it_is_given_instead_of_running_the_questions_again(planted_traces: Forensics) -> None:
    """`report --html` and the demo run every question once and hand the rows to the page: given
    answers with every finding removed, the page counts none, though the traces hold some."""
    traces = planted_traces
    answers = traces.answers()
    assert sum(len(answers[q.name]) for q in traces.questions if q.is_finding) > 0
    emptied = {name: [] for name in answers}
    assert "<strong>0 finding(s)</strong>" in render_html(traces, answers=emptied)
    assert "<strong>0 finding(s)</strong>" not in render_html(traces)
    report = traces.report(answers=emptied)
    assert report.findings == 0
