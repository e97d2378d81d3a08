"""`forensics report --html`: the page on-call opens, checked as text and in a real headless Chromium.

Verdicts: until the SQL gives every row its verdict, these tests plant verdicts on the rows
(:func:`with_verdicts`) and hand them to the page as ``answers``, the way ``report --html`` does.
"""

from __future__ import annotations

import html.parser
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from telemetry import conventions as c
from telemetry.exceptions import ForensicsInputError
from telemetry.forensics import Forensics, open_traces
from telemetry.forensics._cli import main
from telemetry.forensics._questions import question
from telemetry.forensics._verdicts import headline, tally
from telemetry.forensics.html import TraceLinks, render_html, validate_trace_url, write_html
from telemetry.forensics.html._cards import card_html, cards_of
from telemetry.forensics.html._data import Chain
from telemetry.forensics.html._diagrams import chain_picture, timeline_picture
from telemetry.forensics.html._layout import first_overlap

from forensics_builder import TraceBuilder, attrs
from forensics_incidents import planted
from headless_chromium import Browser, file_url, png_pixels

HOSTILE_AGENT = "</script><script>alert(1)</script>"
HOSTILE_KEY = "\"><img src=x onerror=alert(2)>'"
HOSTILE_TOOL = "javascript:alert(3)"
HOSTILE_RUN = "run\x1b[2J\x07\u202eevil"
HOSTILE_TASK = "T</title><svg onload=alert(4)>"
HOSTILE_TRACE = "javascript:alert(5)\"><script>x</script>"
_RAW_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\ud800-\udfff]")

Answers = Mapping[str, list[dict[str, Any]]]


def planted_verdict(row: Mapping[str, Any]) -> tuple[str, str]:
    """The test's stand-in for the SQL's verdict: refused or deduplicated rows were prevented,
    counted rows (no single outcome) unknown, the rest happened."""
    said = {row.get(k) for k in ("outcome", "write_outcome", "reason")}
    if said & c.REFUSAL_OUTCOMES or row.get("kind") in ("replay", "conflict_refused"):
        return c.VERDICT_PREVENTED, "a guard refused it"
    if "spans" in row or "calls" in row:
        return c.VERDICT_UNKNOWN, "counted rows: no single outcome"
    return c.VERDICT_HAPPENED, "accepted"


def with_verdicts(answers: Answers) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for name, rows in answers.items():
        out[name] = []
        for row in rows:
            verdict, basis = planted_verdict(row)
            out[name].append({**row, "verdict": verdict, "verdict_basis": basis})
    return out


def _stress(b: TraceBuilder) -> TraceBuilder:
    """Long and wide labels on one key: six agents with long names, long versions, a lost update."""
    key = "stress/key-with-a-rather-long-name-0001"
    agents = [f"agent-{i}-{'x' * (4 + 5 * i)}" for i in range(5)] + ["代理人エージェント"]
    for i, agent in enumerate(agents):
        b.add("r-stress", "read_state", c.KIND_READ, agent, 400 + i,
              attrs=attrs(STATE_KEY=key, STATE_VERSION_READ="ver_" + "0123456789abcdef" * 3))
    b.add("r-stress", "legacy_write", c.KIND_WRITE, agents[0], 410, attrs=attrs(STATE_KEY=key, STATE_VERSION_WRITTEN="v" * 60))
    b.add("r-stress", "legacy_write", c.KIND_WRITE, agents[5], 411, attrs=attrs(STATE_KEY=key, STATE_VERSION_WRITTEN="w" * 60))
    return b


@pytest.fixture(scope="module")
def planted_traces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Forensics]:
    """The planted incidents (and a stress key), opened once for the tests that only render them."""
    path = _stress(planted()).write(tmp_path_factory.mktemp("planted") / "t.jsonl")
    with open_traces([path]) as traces:
        yield traces


@pytest.fixture(scope="module")
def answers(planted_traces: Forensics) -> dict[str, list[dict[str, Any]]]:
    return with_verdicts(planted_traces.answers())


@pytest.fixture(scope="module")
def page(planted_traces: Forensics, answers: Answers, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_html(planted_traces, tmp_path_factory.mktemp("html") / "report.html", answers=answers)


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    b = Browser()
    try:
        yield b
    finally:
        b.close()


def _section(text: str, anchor: str) -> str:
    return text.split(f'id="{anchor}"', 1)[1]


# -- the top of the page --------------------------------------------------------------------------

def test_the_top_says_what_happened_what_was_prevented_and_what_to_do_first(page: Path, answers: Answers) -> None:
    """The headline counts finding rows per verdict; the three things to do first are rows that
    happened (never prevented ones), each a link to a card on the page."""
    text = page.read_text()
    findings = {q: rows for q, rows in answers.items() if question(q).is_finding}
    counts = tally(findings)
    assert counts[c.VERDICT_HAPPENED] and counts[c.VERDICT_PREVENTED] and counts[c.VERDICT_UNKNOWN]
    assert f'<p class="headline">{headline(counts)}</p>' in text
    assert text.index('class="headline"') < text.index('id="do-first"') < text.index('id="evidence"')
    first = _section(text, "do-first").split("</section>")[0]
    targets = re.findall(r'href="#(f-[a-z_]+-\d+)"', first)
    assert len(targets) == 3
    for target in targets:
        card = text.split(f'id="{target}"', 1)[1].split("</article>")[0]
        assert "Happened" in card.split("</h5>")[0]


def test_a_prevented_row_is_never_critical(page: Path, answers: Answers) -> None:
    """A refused stale send (a critical question's row, prevented) is a warning card, said prevented."""
    text = page.read_text()
    cards = re.findall(r'<article class="card (\w+)" id="f-(\w+)-\d+"><h5>.*?<span class="sev (\w+)">', text)
    assert ("prevented", "stale_sends", "warning") in cards
    assert not [card for card in cards if card[0] == "prevented" and card[2] == "critical"]
    assert ("happened", "lost_updates", "critical") in cards


def test_every_finding_is_a_card_with_what_who_when_verdict_next_step_and_command(page: Path, answers: Answers) -> None:
    """No table: each row a card with its sentence, facts, verdict, next step, rows command and the full row folded."""
    text = page.read_text()
    assert "<table" not in text.split('id="findings"')[1]
    lost = answers["lost_updates"][0]
    card = text.split('id="f-lost_updates-0"', 1)[1].split("</article>")[0]
    assert f"{lost['agent_id']} wrote {lost['state_key']} on version {lost['baseline_version']}" in card
    assert f"<dt>By</dt><dd>{lost['agent_id']}</dd>" in card and "<dt>When</dt>" in card
    assert "<dt>Verdict</dt><dd><strong>Happened</strong>: accepted</dd>" in card
    assert "Next:</strong> Re-apply the overwritten change" in card
    assert "<code>outcome-telemetry forensics run lost_updates " in card
    assert '<details class="row"><summary>Full row</summary>' in card and f"<dt>span_id</dt><dd>{lost['span_id']}</dd>" in card
    total = sum(len(rows) for rows in answers.values())
    assert text.count('<article class="card ') == total


def test_evidence_reads_as_sentences_with_caveats_highlighted_and_figures_folded(page: Path) -> None:
    text = page.read_text()
    evidence = _section(text, "evidence").split('id="findings"')[0]
    spans = len(planted().spans) + 8  # the page fixture adds 8 spans of its own to the planted ones
    assert (f'<p class="facts">{spans} spans from 1 file; no duplicates; {spans} tool calls; no clock skew; '
            "3 delegation chains, all complete.</p>") in evidence
    assert ('<ul class="caveats"><li><strong>Caveat:</strong> 1 question could not judge anything, so its silence '
            "says nothing: repeated_executions (see Not judged below)</li>") in evidence
    assert '<details class="rawfigures"><summary>Raw figures' in evidence and "<details open" not in evidence
    assert f"<dt>spans read</dt><dd>{spans}</dd>" in evidence and "{" not in evidence.split("Raw figures")[1]


def test_the_page_uses_the_answers_it_is_given_instead_of_running_the_questions_again(planted_traces: Forensics) -> None:
    """`report --html` and the demo run every question once and hand the rows to the page."""
    emptied: dict[str, list[dict[str, Any]]] = {name: [] for name in planted_traces.answers()}
    assert "0 finding(s)" in render_html(planted_traces, answers=emptied)
    assert "Nothing to do first" in render_html(planted_traces, answers=emptied)
    assert "0 finding(s)" not in render_html(planted_traces)


def test_a_row_without_a_verdict_is_unknown_and_says_why(planted_traces: Forensics) -> None:
    rows = planted_traces.run("lost_updates")
    bare = {k: v for k, v in rows[0].items() if k not in (c.COLUMN_VERDICT, c.COLUMN_VERDICT_BASIS)}
    card = cards_of(question("lost_updates"), [bare])[0]
    assert (card.verdict, card.basis) == (c.VERDICT_UNKNOWN, "the row carries no verdict")
    odd = cards_of(question("lost_updates"), [{**rows[0], "verdict": "refused"}])[0]
    assert odd.verdict == c.VERDICT_UNKNOWN and "'refused'" in odd.basis


# -- chains -----------------------------------------------------------------------------------------

def test_chain_diagram_names_the_lost_constraint(page: Path) -> None:
    text = page.read_text()
    assert "C3 last carried at hop 2, lost at hop 3 by agent writer (task T1.1.1.1)" in text
    assert "C1 last carried at hop 3, lost at hop 4 by agent reviewer" in text


def test_chains_of_runs_that_reuse_task_ids_are_drawn_apart(tmp_path: Path) -> None:
    """Issue 33 High 9: two runs with the same task ids are two chains; the lost box of one is
    drawn from its own run's span, and the other run's chain shows no loss."""
    b = TraceBuilder()
    for run, writer, carried in (("run-a", "writer-a", ["C1"]), ("run-b", "writer-b", ["C1", "C2"])):
        t0 = 0 if run == "run-a" else 100
        b.add(run, "register_task", c.KIND_DELEGATE, "planner", t0 + 1, attrs=attrs(
            DELEGATION_TASK_ID="T1", DELEGATION_ROOT_TASK_ID="T1", DELEGATION_HOP=0, DELEGATION_CONSTRAINTS_CARRIED=["C1", "C2"]))
        b.add(run, "delegate", c.KIND_DELEGATE, writer, t0 + 2, attrs=attrs(
            DELEGATION_TASK_ID="T1.1", DELEGATION_ORIGIN_TASK_ID="T1", DELEGATION_ROOT_TASK_ID="T1", DELEGATION_HOP=1,
            DELEGATION_CONSTRAINTS_CARRIED=carried))
    with open_traces([b.write(tmp_path / "t.jsonl")]) as traces:
        text = render_html(traces)
    sections = text.split('<section class="chain"')[1:]
    assert len(sections) == 2
    run_a = next(s for s in sections if "in run run-a" in s)
    run_b = next(s for s in sections if "in run run-b" in s)
    assert "C2 last carried at hop 0, lost at hop 1 by agent writer-a" in run_a
    assert 'class="task lost"' in run_a and "by writer-a" in run_a and "writer-b" not in run_a
    assert "LOST" not in run_b and 'class="task lost"' not in run_b and "by writer-b" in run_b


def test_a_chain_of_many_tasks_is_bounded_and_says_what_was_left_out(tmp_path: Path) -> None:
    """Issue 33 Low: one chain of 20,000 tasks makes a small page that draws the loss and says how
    many tasks and which hops it left out."""
    n, lost_at = 20_000, 15_000
    b = TraceBuilder()
    for hop in range(n):
        carried = ["C1"] if hop >= lost_at else ["C1", "C2"]
        extra = attrs(DELEGATION_ORIGIN_TASK_ID=f"T{hop - 1}") if hop else {}
        b.add("r-long", "delegate", c.KIND_DELEGATE, f"agent-{hop % 7}", hop * 0.001, attrs={**attrs(
            DELEGATION_TASK_ID=f"T{hop}", DELEGATION_ROOT_TASK_ID="T0", DELEGATION_HOP=hop,
            DELEGATION_CONSTRAINTS_CARRIED=carried), **extra})
    with open_traces([b.write(tmp_path / "long.jsonl")]) as traces:
        out = write_html(traces, tmp_path / "long.html")
    text = out.read_text()
    assert out.stat().st_size < 250_000, out.stat().st_size
    chain = text.split('<section class="chain"', 1)[1].split("</section>")[0]
    drawn = chain.count('<rect class="task')
    assert 0 < drawn <= 40 and f"{drawn} of {n:,} tasks drawn ({n - drawn:,} left out)" in chain
    assert f"T{lost_at}</text>" in chain and "LOST: C2" in chain and f"T{lost_at - 1}</text>" in chain
    assert ">T0</text>" in chain and "not drawn:" in chain


# -- escaping ---------------------------------------------------------------------------------------

def _hostile_traces(folder: Path) -> Path:
    b = TraceBuilder()
    run, key = HOSTILE_RUN, HOSTILE_KEY
    b.add(run, HOSTILE_TOOL, c.KIND_READ, HOSTILE_AGENT, 1, attrs=attrs(STATE_KEY=key, STATE_VERSION_READ="v1"))
    b.add(run, HOSTILE_TOOL, c.KIND_READ, "other", 2, attrs=attrs(STATE_KEY=key, STATE_VERSION_READ="v1"))
    b.add(run, HOSTILE_TOOL, c.KIND_WRITE, "other", 3, attrs=attrs(STATE_KEY=key, STATE_VERSION_WRITTEN="v2"))
    b.add(run, HOSTILE_TOOL, c.KIND_WRITE, HOSTILE_AGENT, 4, attrs=attrs(STATE_KEY=key, STATE_VERSION_WRITTEN="<v3>"))
    b.add(run, "register_task", c.KIND_DELEGATE, HOSTILE_AGENT, 5, attrs=attrs(
        DELEGATION_TASK_ID=HOSTILE_TASK, DELEGATION_ROOT_TASK_ID=HOSTILE_TASK, DELEGATION_HOP=0,
        DELEGATION_CONSTRAINTS_CARRIED=["C1", HOSTILE_KEY]))
    b.add(run, "delegate", c.KIND_DELEGATE, HOSTILE_AGENT, 6, attrs=attrs(
        DELEGATION_TASK_ID=HOSTILE_TASK + ".1", DELEGATION_ORIGIN_TASK_ID=HOSTILE_TASK, DELEGATION_ROOT_TASK_ID=HOSTILE_TASK,
        DELEGATION_HOP=1, DELEGATION_CONSTRAINTS_CARRIED=["C1"]))
    return b.write(folder / "hostile.jsonl")


def test_hostile_values_are_escaped_everywhere(tmp_path: Path, browser: Browser) -> None:
    """Agent names, keys, tool names, runs, task ids and trace ids built to break out stay text:
    no element, handler or URL comes from them, control characters and bidi overrides are written
    out, and trace links carry the id percent-encoded."""
    out = tmp_path / "hostile.html"
    with open_traces([_hostile_traces(tmp_path)]) as traces:
        given = with_verdicts(traces.answers())
        given["lost_updates"][0]["trace_id"] = HOSTILE_TRACE
        given["lost_updates"][0]["verdict_basis"] = HOSTILE_AGENT + "\x00\ud800"
        write_html(traces, out, trace_url="https://grafana.example/explore?trace={trace_id}", answers=given)
    text = out.read_text()
    parsed = _Tags()
    parsed.feed(text)
    assert not {"script", "img", "iframe", "object"} & parsed.tags
    assert not [name for name in parsed.attributes if name.startswith("on") or name in ("src", "style")]
    assert not _RAW_CONTROL.search(text)
    assert "&lt;/script&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&#x27;" in text
    assert "run\\x1b[2J\\x07\\u202eevil" in text and "T&lt;/title&gt;&lt;svg onload=alert(4)&gt;" in text
    links = [h for h in re.findall(r'href="([^"]*)"', text) if not h.startswith("#")]
    assert all(h.startswith("https://grafana.example/explore?trace=") for h in links)
    assert "https://grafana.example/explore?trace=javascript%3Aalert%285%29%22%3E%3Cscript%3Ex%3C%2Fscript%3E" in links
    assert re.search(r'href="https://grafana\.example/explore\?trace=[0-9a-f]{32}"', text)
    browser.viewport(1400)
    browser.load(file_url(out))
    assert browser.errors() == []
    assert browser.evaluate("document.querySelectorAll('script, img, iframe, svg svg, [onload]').length") == 0
    shown = browser.evaluate("document.body.innerText")
    assert HOSTILE_AGENT in shown and HOSTILE_TOOL in shown


def test_a_hostile_trace_id_is_percent_encoded_into_the_link() -> None:
    html = TraceLinks("https://jaeger.example/trace/{trace_id}").link(HOSTILE_TRACE)
    assert 'href="https://jaeger.example/trace/javascript%3Aalert%285%29%22%3E%3Cscript%3Ex%3C%2Fscript%3E"' in html
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert TraceLinks(None).link("javascript:alert(3)") == "<code>javascript:alert(3)</code>"
    assert "%5Cud800" in TraceLinks("https://j.example/{trace_id}").link("\ud800")  # never a UnicodeEncodeError


class _Tags(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: set[str] = set()
        self.attributes: set[str] = set()
        self.hrefs: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attributes: list[tuple[str, str | None]]) -> None:
        self.tags.add(tag)
        for name, value in attributes:
            self.attributes.add(name)
            if name == "href":
                self.hrefs.append(value or "")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(["state_key", "agent_id", "run_id", "trace_id", "baseline_version",
                                        "newer_version", "verdict_basis", "write_time", "kind"]),
                       st.text(max_size=40), min_size=1))
def test_any_row_values_make_a_card_of_known_elements_only(row: dict[str, str]) -> None:
    """Whatever a row holds, its card has only the page's own elements and attributes, links only
    through the template, and says every value (escaped, control characters written out)."""
    card = cards_of(question("lost_updates"), [{**row, "verdict": c.VERDICT_HAPPENED}])[0]
    out = card_html(card, TraceLinks("https://t.example/{trace_id}"), ["traces/"])
    parsed = _Tags()
    parsed.feed(out)
    assert parsed.tags <= {"article", "h5", "span", "p", "dl", "dt", "dd", "strong", "code", "details", "summary", "a"}
    assert parsed.attributes <= {"class", "id", "href", "rel"}
    assert all(h.startswith("https://t.example/") for h in parsed.hrefs)
    from telemetry.forensics.html._markup import plain
    said = "".join(parsed.text)
    assert all(plain(v) in said for v in row.values())


# -- layout: labels never overlap -------------------------------------------------------------------

_label = st.text(st.characters(codec="utf-8"), max_size=60)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(_label, st.sampled_from([c.KIND_READ, c.KIND_WRITE]), _label, _label,
                          st.sampled_from([c.OUTCOME_OK, c.OUTCOME_REJECTED_STALE_VERSION, "x" * 50])),
                min_size=1, max_size=12))
def test_timeline_labels_never_overlap_whatever_they_say(events: list[tuple[str, str, str, str, str]]) -> None:
    rows = [{"n": i + 1, "agent_id": agent, "tool_kind": kind, "version_read": v1, "version_expected": v1,
             "version_written": v2, "outcome": outcome, "span_id": f"s{i}"} for i, (agent, kind, v1, v2, outcome) in enumerate(events)]
    pic = timeline_picture(rows, len(rows) + 3, {"s0"}, {"s1"})
    assert first_overlap(pic.labels) is None
    assert all(0 <= lab.box[0] and lab.box[2] <= pic.width and 0 <= lab.box[1] and lab.box[3] <= pic.height
               for lab in pic.labels)


@settings(max_examples=120, deadline=None)
@given(st.lists(st.tuples(_label, st.integers(0, 3), st.lists(_label, max_size=4), st.lists(_label, max_size=2)),
                min_size=1, max_size=10))
def test_chain_labels_never_overlap_whatever_they_say(tasks: list[tuple[str, int, list[str], list[str]]]) -> None:
    rows = [{"task": f"{i}:{name}", "parent": None, "hop": hop, "agent_id": name, "carried": carried, "waived": waived,
             "reasons": waived} for i, (name, hop, carried, waived) in enumerate(tasks)]
    losses = [{"dropped_task_id": rows[0]["task"], "constraint_id": "C" * 80}, {"dropped_task_id": rows[-1]["task"]}]
    pic = chain_picture(Chain("r", "root", len(rows) + 5, rows, gaps=[(9, 12, 4)]), losses)
    assert first_overlap(pic.labels) is None
    assert all(0 <= lab.box[0] and lab.box[2] <= pic.width for lab in pic.labels)


# -- in Chromium: widths, colour schemes, print --------------------------------------------------

_OVERLAPS = """(() => {
  const seen = [...document.querySelectorAll('svg text')].map(t => [t.textContent, t.getBoundingClientRect()])
      .filter(([, r]) => r.width > 0 && r.height > 0);
  const bad = [];
  for (let i = 0; i < seen.length; i++) for (let j = i + 1; j < seen.length; j++) {
    const a = seen[i][1], b = seen[j][1];
    if (a.left < b.right - 0.5 && b.left < a.right - 0.5 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5)
      bad.push([seen[i][0], seen[j][0]]);
  }
  const spill = [];
  for (const svg of document.querySelectorAll('svg')) {
    const s = svg.getBoundingClientRect();
    const boxes = [...svg.querySelectorAll('rect.task')].map(r => r.getBoundingClientRect());
    for (const t of svg.querySelectorAll('text')) {
      const r = t.getBoundingClientRect();
      if (r.left < s.left - 0.5 || r.right > s.right + 0.5) spill.push(['outside its picture', t.textContent]);
      for (const b of boxes) {
        const meets = r.left < b.right && b.left < r.right && r.top < b.bottom && b.top < r.bottom;
        const inside = r.left >= b.left - 0.5 && r.right <= b.right + 0.5 && r.top >= b.top - 0.5 && r.bottom <= b.bottom + 0.5;
        if (meets && !inside) spill.push(['across a box edge', t.textContent]);
      }
    }
  }
  return {labels: seen.length, overlapping: bad.slice(0, 5), spilling: spill.slice(0, 5)};
})()"""


def test_the_overlap_check_finds_overlapping_labels(tmp_path: Path, browser: Browser) -> None:
    """The check the width tests rely on does fail: two labels drawn on top of each other, and a
    label running out of its box, are both reported."""
    page = tmp_path / "bad.html"
    page.write_text('<svg width="300" height="100"><rect class="task" x="0" y="0" width="60" height="40"/>'
                    '<text x="5" y="20">version r1ea16dd77934</text><text x="40" y="22">r758a374f8bea</text></svg>')
    browser.viewport(1400)
    browser.load(file_url(page))
    found = browser.evaluate(_OVERLAPS)
    assert found["overlapping"] and found["spilling"], found


@pytest.mark.parametrize("width", [1400, 390])
def test_at_desk_and_phone_width_nothing_overlaps_or_scrolls_sideways(page: Path, browser: Browser, width: int,
                                                                       tmp_path: Path) -> None:
    """Real headless Chromium at 1400 and 390 px: no console error, no request off the file, the
    page never wider than the window, no two label boxes intersecting, no label across a box's
    edge, and a screenshot that is not blank (kept in tmp_path to look at)."""
    browser.viewport(width)
    browser.emulate()
    browser.load(file_url(page))
    assert browser.errors() == []
    assert all(u.startswith("file:") for u in browser.requested_urls()), browser.requested_urls()
    assert browser.evaluate("document.documentElement.scrollWidth") <= width
    found = browser.evaluate(_OVERLAPS)
    assert found["labels"] > 100 and found["overlapping"] == [] and found["spilling"] == [], found
    shot = browser.full_screenshot()
    (tmp_path / f"report-{width}.png").write_bytes(shot)
    w, h, rows = png_pixels(shot)
    colours = {row[i:i + 3] for row in rows[::8] for i in range(0, len(row), 24)}
    assert width - 20 <= w <= width and h > 2000 and len(colours) > 20, "the screenshot is blank"


def test_dark_scheme_and_print_are_readable(page: Path, browser: Browser) -> None:
    """Dark preference: a dark background with light text. Print: white paper, black text, no
    navigation, nothing wider than the page, and Chromium makes a PDF of it."""
    style = "(() => { const s = getComputedStyle(document.body); return [s.backgroundColor, s.color]; })()"
    browser.viewport(1400)
    browser.emulate(dark=True)
    browser.load(file_url(page))
    background, colour = browser.evaluate(style)
    assert background == "rgb(13, 17, 23)" and colour == "rgb(230, 237, 243)"
    browser.emulate(media="print", dark=True)
    assert browser.evaluate(style) == ["rgb(255, 255, 255)", "rgb(0, 0, 0)"]
    assert browser.evaluate("getComputedStyle(document.querySelector('nav')).display") == "none"
    pdf = browser.call("Page.printToPDF", {"paperWidth": 8.27, "paperHeight": 11.7}, session=True)["data"]
    assert pdf.startswith("JVBERi")  # %PDF
    browser.emulate()


# -- the command line -------------------------------------------------------------------------------

def test_page_is_self_contained_with_no_script_and_no_external_reference(page: Path) -> None:
    text = page.read_text()
    assert not re.search(r"<script|\son\w+=|\ssrc=|url\(|@import|<link|<iframe|<object", text, re.I)
    assert all(h.startswith("#") for h in re.findall(r'href="([^"]*)"', text))
    assert "http://" not in text and "https://" not in text


@pytest.mark.parametrize("template", [
    "http://localhost:16686/trace/",                  # no placeholder
    "http://x/{trace_id}/{trace_id}",                 # twice
    "javascript:alert(1)//{trace_id}",                # not http(s)
    "http://x/{trace_id}\"><script>",                 # breaks out of the attribute
    "http://x/{span_id}/{trace_id}",                  # another brace
    "/relative/{trace_id}",                           # no host
])
def test_bad_trace_url_templates_are_refused_with_the_value(template: str) -> None:
    with pytest.raises(ForensicsInputError) as info:
        validate_trace_url(template)
    assert repr(template) in str(info.value)


def test_cli_writes_the_page_and_trace_url_needs_html(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    traces = planted().write(tmp_path / "t.jsonl")
    assert main(["report", str(traces), "-q", "--html", str(tmp_path / "ok.html")]) == 0
    assert 'id="do-first"' in (tmp_path / "ok.html").read_text()
    assert main(["report", str(traces), "-q", "--trace-url", "http://x/{trace_id}"]) == 2
    assert main(["report", str(traces), "-q", "--html", str(tmp_path / "r.html"), "--trace-url", "ftp://x/{trace_id}"]) == 2
    assert "--trace-url" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
