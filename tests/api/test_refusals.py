"""Every refusal answers in the contract's error shape, over the real HTTPS server:
framing, decoding, size, media type, method and query problems alike."""

from __future__ import annotations

import asyncio
import json
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from relay.accounts.models import NewAccount
from relay.services import build_services
from relay.web import middleware
from relay.web.app import create_app
from relay.web.bodies import MAX_DEPTH
from tests.harness import RunningServer, test_settings

URL = "/v1/verifications"
GOOD = b'{"to": "+14155552671"}'


def nested(depth: int) -> bytes:
    """A create body whose metadata nests `depth` containers deep, counting the body."""
    inner = "1"
    for _ in range(depth - 1):
        inner = f'{{"k": {inner}}}'
    return f'{{"to": "+14155552671", "metadata": {inner}}}'.encode()


@dataclass(frozen=True)
class Case:
    name: str
    status: int
    code: str
    method: str = "POST"
    path: str = URL
    body: bytes | None = GOOD
    headers: dict[str, str] = field(default_factory=lambda: {"Content-Type": "application/json"})
    param: str | None = None
    allow: str | None = None


CASES = [
    Case("invalid UTF-8", 400, "invalid_json", body=b'{"to": "+1415\xff5552671"}'),
    Case("a duplicate key", 400, "invalid_json", body=b'{"to": "+14155552671", "to": "+1"}'),
    Case("a nested duplicate key", 400, "invalid_json", body=nested(2)[:-2] + b', "k": 2}}'),
    Case(f"nesting past {MAX_DEPTH}", 400, "invalid_json", body=nested(MAX_DEPTH + 1)),
    Case("nesting ten thousand deep", 400, "invalid_json", body=b"[" * 10_000 + b"]" * 10_000),
    Case(
        "a lone surrogate", 400, "invalid_json", body=b'{"to": "+1", "metadata": {"k": "\\ud800"}}'
    ),
    Case(f"nesting of exactly {MAX_DEPTH}", 400, "parameter_invalid", body=nested(MAX_DEPTH)),
    Case("a body over 64 KiB", 413, "body_too_large", body=b" " * (64 * 1024) + GOOD),
    Case("text/plain", 415, "content_type_invalid", headers={"Content-Type": "text/plain"}),
    Case("no content type", 415, "content_type_invalid", headers={}),
    Case("DELETE on a list", 405, "method_not_allowed", "DELETE", allow="GET, HEAD, POST"),
    Case("PUT on check", 405, "method_not_allowed", "PUT", f"{URL}/check", allow="POST"),
    Case(
        "POST on an object",
        405,
        "method_not_allowed",
        path=f"{URL}/ver_01J00000000000000000000000",
        allow="GET, HEAD",
    ),
    Case("limit=abc", 400, "parameter_invalid", "GET", f"{URL}?limit=abc", None, param="limit"),
    Case(
        "status=bogus", 400, "parameter_invalid", "GET", f"{URL}?status=bogus", None, param="status"
    ),
    Case(
        "created[gte]=yesterday",
        400,
        "parameter_invalid",
        "GET",
        f"{URL}?created%5Bgte%5D=yesterday",
        None,
        param="created[gte]",
    ),
    Case(
        "created[lt] as seconds since 1970",
        400,
        "parameter_invalid",
        "GET",
        f"{URL}?created%5Blt%5D=0.5",
        None,
        param="created[lt]",
    ),
    Case(
        "limit twice",
        400,
        "parameter_invalid",
        "GET",
        f"{URL}?limit=1&limit=2",
        None,
        param="limit",
    ),
    Case(
        "an unknown filter",
        400,
        "parameter_unknown",
        "GET",
        f"{URL}?colour=blue",
        None,
        param="colour",
    ),
    Case(
        "created_gte for created[gte]",
        400,
        "parameter_unknown",
        "GET",
        f"{URL}?created_gte=2024-01-01T00:00:00Z",
        None,
        param="created_gte",
    ),
    Case(
        "type=nope on events",
        400,
        "parameter_invalid",
        "GET",
        "/v1/events?type=nope",
        None,
        param="type",
    ),
    Case(
        "a query on a retrieve",
        400,
        "parameter_unknown",
        "GET",
        f"{URL}/ver_01J00000000000000000000000?expand=attempts",
        None,
        param="expand",
    ),
    Case("a query on a create", 400, "parameter_unknown", path=f"{URL}?dry_run=1", param="dry_run"),
]


def in_error_shape(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    error: dict[str, Any] = response.json()["error"]
    assert error["code"] == code, error
    assert error["type"] == ("invalid_request_error")
    assert error["message"]
    assert error["doc_url"].endswith(f"/docs/errors#{code}")
    assert set(error) <= {"type", "code", "message", "param", "doc_url"}
    return error


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_each_refusal_answers_in_the_error_shape(api: httpx.Client, case: Case) -> None:
    response = api.request(case.method, case.path, content=case.body, headers=case.headers)

    error = in_error_shape(response, case.status, case.code)
    if case.param is not None:
        assert error["param"] == case.param
    if case.allow is not None:
        assert response.headers["allow"] == case.allow
    assert response.headers["request-id"].startswith("req_")
    assert api.get(URL).json()["data"] == []


# What the server answers itself when it cannot frame a request (decision 0030):
# 400 with an empty body, and the connection closed.
PARSER_REFUSAL = (400, {"server": ""})


def exchange(server: RunningServer, head: str, body: bytes) -> list[tuple[int, dict[str, Any]]]:
    """Send raw bytes over TLS and read every answer until the server closes.

    A JSON answer is its parsed body; one from the server's parser `{"server": body}`.
    """
    port = int(server.base_url.rsplit(":", 1)[1])
    raw = socket.create_connection(("localhost", port), timeout=10)
    with server.tls_context().wrap_socket(raw, server_hostname="localhost") as tls:
        tls.sendall(head.replace("\n", "\r\n").encode() + b"\r\n" + body)
        received = b""
        while chunk := tls.recv(65536):
            received += chunk
    answers = []
    while received:
        head_bytes, _, rest = received.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        headers = dict(line.lower().split(": ", 1) for line in lines[1:])
        length = int(headers["content-length"])
        if headers.get("content-type") == "application/json":
            answer = json.loads(rest[:length])
        else:
            assert headers["connection"] == "close", lines
            answer = {"server": rest[:length].decode()}
        answers.append((int(lines[0].split()[1]), answer))
        received = rest[length:]
    return answers


def request_head(account: NewAccount, *lengths: str, close: bool = True) -> str:
    lines = [
        f"POST {URL} HTTP/1.1",
        "Host: localhost",
        f"Authorization: Bearer {account.test_key}",
        "Content-Type: application/json",
        *(f"Content-Length: {length}" for length in lengths),
    ]
    if close:
        lines.append("Connection: close")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    "lengths",
    [["abc"], ["-1"], ["1e3"], [str(len(GOOD)), "3"]],
    ids=["not a number", "negative", "an exponent", "given twice, differently"],
)
def test_a_malformed_content_length_is_refused_by_the_server_and_the_connection_closes(
    server: RunningServer, account: NewAccount, lengths: list[str]
) -> None:
    # Keep-alive asked for: the close is the server's, since the framing is lost.
    answers = exchange(server, request_head(account, *lengths, close=False), GOOD)

    assert answers == [PARSER_REFUSAL]


def test_a_malformed_chunked_body_is_refused_once_and_the_connection_closes(
    server: RunningServer, account: NewAccount, caplog: pytest.LogCaptureFixture
) -> None:
    head = request_head(account, close=False) + "Transfer-Encoding: chunked\n"

    # Keep-alive asked for, and a request after the broken body: never answered.
    answers = exchange(
        server, head, b"zz\r\n" + GOOD + b"\r\n0\r\n\r\n" + b"GET /healthz HTTP/1.1\r\n\r\n"
    )

    # The body never arrives whole: the app is handed none and says so.
    assert [status for status, _ in answers] == [400]
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []


def test_a_content_length_shorter_than_the_body_leaves_every_answer_in_the_error_shape(
    server: RunningServer, account: NewAccount
) -> None:
    head = request_head(account, str(len(GOOD) - 5), close=False)

    answers = exchange(server, head, GOOD)

    # The declared bytes are a cut-off document, and what follows them is no request:
    # the parser may refuse those before the cut-off document is answered, then closes.
    assert answers
    for status, body in answers[:-1]:
        assert (status, body["error"]["code"]) in {
            (400, "invalid_json"),
            (400, "parameter_invalid"),
        }
    assert answers[-1] == PARSER_REFUSAL or answers[-1][1]["error"]["code"] in {
        "invalid_json",
        "parameter_invalid",
    }


def test_a_content_length_longer_than_the_body_is_refused_once_the_rest_fails_to_come(
    server: RunningServer, account: NewAccount, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(middleware, "BODY_TIMEOUT", 0.3)

    answers = exchange(server, request_head(account, str(len(GOOD) + 5)), GOOD)

    assert len(answers) == 1
    status, body = answers[0]
    assert (status, body["error"]["code"], body["error"]["param"]) == (
        400,
        "parameter_invalid",
        "Content-Length",
    )


@pytest.mark.parametrize("declared", [len(GOOD) - 1, len(GOOD) + 1])
def test_a_content_length_that_does_not_match_the_body_handed_over_is_refused(
    account: NewAccount, database_url: str, tmp_path: Path, declared: int
) -> None:
    # An HTTP server frames the body by its length; an ASGI caller in the same
    # process can hand over any body with any header, and the edge still checks.
    services = build_services(test_settings(tmp_path, database_url))
    app = create_app(services, background=False)
    headers = {
        "Authorization": f"Bearer {account.test_key}",
        "Content-Type": "application/json",
        "Content-Length": str(declared),
    }

    async def exchange() -> httpx.Response:
        try:
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="https://relay.test"
            ) as client:
                return await client.post(URL, content=GOOD, headers=headers)
        finally:
            await services.close()

    response = asyncio.run(exchange())

    assert in_error_shape(response, 400, "parameter_invalid")["param"] == "Content-Length"
