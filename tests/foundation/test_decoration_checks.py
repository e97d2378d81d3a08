"""Decoration-time refusals (each saying what to write instead), a BaseException from a
read-back or classifier, and redaction by normalised argument name."""

from __future__ import annotations

from typing import Any

import pytest

from telemetry import ConfigurationError, instrument_tool
from telemetry import conventions as c
from telemetry.instrument._redact import is_secret_name
from telemetry.testing import Capture

from .kinds import KINDS, drive, make


class Refunds:
    def issue(self, order_id: str) -> dict[str, Any]:
        return {"ok": True}


class CallableThing:
    def __call__(self) -> None: ...


@pytest.mark.parametrize(
    ("target", "needle"),
    [(Refunds, "Refunds is a class: decorate the method"), (CallableThing(), "got a CallableThing object"),
     (42, "decorates functions")],
)
def test_only_functions_can_be_instrumented(target: Any, needle: str) -> None:
    """A class, a callable object or a non-callable is refused, naming what to decorate instead."""
    with pytest.raises(ConfigurationError, match=needle):
        instrument_tool(target)
    with pytest.raises(ConfigurationError, match=needle):
        instrument_tool(kind="read")(target)


@pytest.mark.parametrize(("first", "suggestion"), [("write", "kind='write'"), ("read", "kind='read'"), ("refund", "name='refund'")])
def test_a_bare_string_first_argument_suggests_the_keyword(first: str, suggestion: str) -> None:
    """instrument_tool("write") says to write kind="write" (and a non-kind string name=)."""
    with pytest.raises(ConfigurationError, match=f"@instrument_tool\\({suggestion}\\)"):
        instrument_tool(first)  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("options", "needle"),
    [
        ({"kind": "write", "read_only": True}, "kind='write' contradicts read_only=True"),
        ({"kind": "send", "read_only": True}, "kind='send' contradicts read_only=True"),
        ({"kind": "delegate", "read_only": True}, "contradicts read_only=True"),
        ({"kind": "read", "read_only": False}, "kind='read' contradicts read_only=False"),
        ({"kind": "read", "destructive": True}, "destructive=True contradicts a read-only tool"),
        ({"read_only": True, "destructive": True}, "destructive=True contradicts"),
    ],
)
def test_hints_that_contradict_the_kind_are_refused(options: dict[str, Any], needle: str) -> None:
    """Hints that cannot all be true are a ConfigurationError saying which to change."""
    with pytest.raises(ConfigurationError, match=needle):

        @instrument_tool(**options)
        def tool() -> None: ...


def test_consistent_hints_are_accepted() -> None:
    """A read-only read, an idempotent write and a non-destructive send all decorate."""
    for options in ({"kind": "read", "read_only": True}, {"kind": "write", "idempotent": True, "destructive": False},
                    {"kind": "send", "destructive": False}):

        def tool() -> int:
            return 1

        assert instrument_tool(**options)(tool)() == 1


@pytest.mark.parametrize("code", ["Bad Code!", "", "UPPER", "9lives", "has-dash", "x" * 65, 3])
def test_outcome_codes_must_be_short_snake_case(code: Any) -> None:
    """Declared outcomes become metric labels: anything but short snake_case is refused with a suggestion."""
    with pytest.raises(ConfigurationError, match="snake_case"):

        @instrument_tool(outcomes=[code])
        def tool() -> None: ...


def test_a_good_outcome_code_is_accepted(telemetry_capture: Capture) -> None:
    """A short snake_case code is a valid declared outcome: it reaches the metric label as itself."""

    @instrument_tool(name="capped_refund", outcomes=["refund_capped", "over_limit_2"])
    def tool(code: str) -> dict[str, Any]:
        return {"ok": False, "error": code}

    tool("refund_capped")
    tool("over_limit_2")
    tool("never_declared")
    assert telemetry_capture.calls("capped_refund", outcome="refund_capped") == 1
    assert telemetry_capture.calls("capped_refund", outcome="over_limit_2") == 1
    assert telemetry_capture.calls("capped_refund", outcome=c.OUTCOME_OTHER) == 1


@pytest.mark.parametrize(
    ("name", "needle"),
    [("t" * 129, "129 characters"), ("refund tool", "pass name='refund_tool'"), ('a"b', "not usable as a metric label"),
     ("tool\n", "not usable"), ("é", "not usable")],
)
def test_tool_names_must_be_label_safe(name: str, needle: str) -> None:
    """A tool name over 128 characters or with characters unfit for a label is refused."""
    with pytest.raises(ConfigurationError, match=needle):

        @instrument_tool(name=name)
        def tool() -> None: ...


def test_a_lambda_needs_a_name() -> None:
    """``<lambda>`` is no tool name: the refusal says to pass name=."""
    with pytest.raises(ConfigurationError, match="pass name='lambda'"):
        instrument_tool(lambda: None)
    assert instrument_tool(name="github/create_issue.v2:x-y")(lambda: 1)() == 1


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit])
@pytest.mark.parametrize("where", ["readback", "outcome"])
@pytest.mark.parametrize("kind", KINDS)
def test_a_base_exception_in_a_callback_still_ends_the_span_and_counts(
    telemetry_capture: Capture, stop: type[BaseException], where: str, kind: str
) -> None:
    """A read-back or classifier raising KeyboardInterrupt/SystemExit: the span ends, the call is
    counted, and the very same exception reaches the caller."""
    raised = stop("from the callback")

    def callback(call: Any, result: Any) -> Any:
        raise raised

    tool = instrument_tool(name="charge", kind="write", **{where: callback})(make(kind, lambda x, y: {"ok": True}))
    with pytest.raises(stop) as info:
        drive(kind, tool, 1)
    assert info.value is raised
    span = telemetry_capture.span("charge")
    assert span.end_time is not None and span.attributes[c.TOOL_TRANSPORT] == c.TRANSPORT_OK
    if where == "readback" and kind in ("sync", "async", "generator"):
        assert span.attributes[c.TOOL_READBACK] == c.READBACK_ERROR
    assert telemetry_capture.calls("charge") == 1


def test_a_result_whose_own_code_interrupts_still_counts(telemetry_capture: Capture) -> None:
    """A result whose .get raises KeyboardInterrupt during classification: counted, then re-raised."""

    class Odd(dict):  # type: ignore[type-arg]
        def get(self, *args: Any) -> Any:
            raise KeyboardInterrupt

    @instrument_tool(name="odd", kind="read")
    def odd() -> Any:
        return Odd()

    with pytest.raises(KeyboardInterrupt):
        odd()
    assert telemetry_capture.calls("odd") == 1 and telemetry_capture.span("odd").end_time is not None


SECRET_NAMES = [
    # HTTP headers, as sent and as frameworks spell them
    "Authorization", "authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key", "x-api-key",
    "X-API-KEY", "Api-Key", "X-Auth-Token", "X-CSRF-Token", "X-Amz-Security-Token", "X-Goog-Api-Key",
    "X-Auth", "HTTP_AUTHORIZATION",
    # configuration and environment names
    "api_key", "apiKey", "ApiKey", "APIKEY", "private-key", "privateKey", "PRIVATE_KEY", "private_key_pem",
    "access_token", "accessToken", "refresh-token", "refreshToken", "id_token", "client_secret", "clientSecret",
    "CLIENT-SECRET", "password", "Password", "db_password", "PGPASSWORD", "passwd", "passphrase", "secret",
    "AWS_SECRET_ACCESS_KEY", "aws_access_key_id", "GITHUB_TOKEN", "OPENAI_API_KEY", "SLACK_BOT_TOKEN",
    "session_cookie", "sessionToken", "credentials", "bearer", "jwt", "otp", "pwd", "authHeader",
]
PLAIN_NAMES = [
    "key", "idempotency_key", "order_id", "amount_cents", "author", "authors", "keyboard", "monkey", "Content-Type",
    "User-Agent", "Accept", "X-Request-Id", "body", "ticket_id", "state_key", "primary_key", "passenger",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_real_secret_names_are_redacted(name: str) -> None:
    """Header and configuration names that carry secrets are recognised however they are spelled."""
    assert is_secret_name(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_plain_names_are_kept(name: str) -> None:
    """Names that merely look close (key, author, primary_key) are recorded in clear."""
    assert not is_secret_name(name)


def test_redaction_reaches_into_nested_headers_and_configs(telemetry_capture: Capture) -> None:
    """A headers dict and a list of configs are recorded with every secret entry redacted."""

    @instrument_tool(name="call_api", kind="read", record_arguments=["headers", "configs", "apiKey"])
    def call_api(headers: dict[str, Any], configs: list[Any], apiKey: str) -> dict[str, Any]:  # noqa: N803
        return {"ok": True}

    call_api(
        {"X-Api-Key": "k-123", "private-key": "pk", "Accept": "json", "nested": {"Set-Cookie": "sid=1"}},
        [{"clientSecret": "cs", "region": "eu"}, ["plain", {"refresh_token": "rt"}]],
        apiKey="top",
    )
    attrs = dict(telemetry_capture.span("call_api").attributes)
    recorded = " ".join(str(v) for k, v in attrs.items() if k.startswith(c.TOOL_ARGUMENT_PREFIX))
    for secret in ("k-123", "pk", "sid=1", "cs", "rt", "top"):
        assert f"'{secret}'" not in recorded and f'"{secret}"' not in recorded, secret
    assert "json" in recorded and "eu" in recorded and "plain" in recorded
    assert attrs[c.TOOL_ARGUMENT_PREFIX + "apiKey"] == c.REDACTED
