"""A request's access line written straight to Relay's own log stream is, byte for
byte, the line logging would have written; anything else listening gets it through
logging."""

from __future__ import annotations

import io
import logging
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from relay.log import begin_request, bind, configure, end_request
from relay.web import access_line
from relay.web.middleware import Edge

NOW = 1_700_000_000.2567
SCOPE = {"method": "POST", "path": "/v1/verifications/check", "headers": []}


@pytest.fixture
def stream(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """stderr as configured by Relay, at a fixed moment; logging's own state put back after."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    written = io.StringIO()
    # `configure` with JSON lines takes over these hooks.
    monkeypatch.setattr(sys, "excepthook", sys.excepthook)
    monkeypatch.setattr(threading, "excepthook", threading.excepthook)
    monkeypatch.setattr(time, "time", lambda: NOW)
    monkeypatch.setattr(time, "perf_counter", lambda: 12.5)
    token = begin_request("req_1")
    bind(account_id="acct_1", livemode=False, verification_id="ver_1")
    yield written
    end_request(token)
    root.handlers[:], root.level = handlers, level
    logging.captureWarnings(False)


def configured(log_format: str, stream: io.StringIO) -> None:
    """Relay's log configuration, its stderr being `stream` (pytest swaps stderr per phase)."""
    configure("info", log_format)
    handler = logging.getLogger().handlers[0]
    assert isinstance(handler, logging.StreamHandler)
    handler.setStream(stream)


def both_lines(stream: io.StringIO, log_format: str) -> list[str]:
    """The line written directly, then the same request's line through logging (taken
    because a second handler listens on `relay.http`)."""
    configured(log_format, stream)
    edge = Edge()
    assert access_line._sole_handler(logging.getLogger("relay.http")) is not None
    edge.finish(SCOPE, "req_1", 200, 12.4987)
    listener = logging.NullHandler()
    logging.getLogger("relay.http").addHandler(listener)
    try:
        assert access_line._sole_handler(logging.getLogger("relay.http")) is None
        edge.finish(SCOPE, "req_1", 200, 12.4987)
    finally:
        logging.getLogger("relay.http").removeHandler(listener)
    return stream.getvalue().splitlines(keepends=True)


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_the_direct_line_is_the_line_logging_writes(stream: io.StringIO, log_format: str) -> None:
    direct, through_logging = both_lines(stream, log_format)
    assert direct == through_logging
    assert "duration_ms" in direct
    assert "req_1" in direct
    assert direct.endswith("\n")


def test_the_json_line_keeps_the_requests_bound_fields_in_order(stream: io.StringIO) -> None:
    direct, _ = both_lines(stream, "json")
    assert direct.index('"request_id"') < direct.index('"account_id"') < direct.index('"method"')
    assert '"verification_id":"ver_1"' in direct
    assert '"duration_ms":1.3' in direct


def test_a_handler_on_the_root_logger_such_as_caplogs_still_gets_the_record(
    stream: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    configured("text", stream)
    logging.getLogger().addHandler(caplog.handler)
    Edge().finish(SCOPE, "req_1", 200, 12.4987)
    assert [record.getMessage() for record in caplog.records] == ["http.request"]
    assert stream.getvalue().count("http.request") == 1


def test_a_level_above_info_on_the_access_logger_writes_no_line(stream: io.StringIO) -> None:
    configured("text", stream)
    logging.getLogger("relay.http").setLevel(logging.WARNING)
    try:
        Edge().finish(SCOPE, "req_1", 200, 12.4987)
    finally:
        logging.getLogger("relay.http").setLevel(logging.NOTSET)
    assert stream.getvalue() == ""
