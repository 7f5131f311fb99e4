"""A webhook_url whose host is not a DNS name, or folds into a private address, is
refused at create on the Verify and Send APIs, before anything is stored or sent."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

NUMBER = "+14155552671"
ENDPOINTS = [
    pytest.param("/v1/verifications", {"to": NUMBER}, id="verify"),
    pytest.param("/v1/messages", {"to": NUMBER, "code": "1234"}, id="send"),
]
HOSTS = [
    pytest.param("a" * 64 + ".example", id="label over 63"),
    pytest.param(".".join(["a" * 63] * 4), id="name over 253"),
    pytest.param("hooks..example", id="empty label"),
    pytest.param("hooks_1.example", id="underscore"),
    pytest.param("-hooks.example", id="leading hyphen"),
    pytest.param("hooks-.example", id="trailing hyphen"),
    pytest.param("127\uff0e0\uff0e0\uff0e1", id="full-width dots to loopback"),
    pytest.param("\uff11\uff10.0.0.1", id="full-width digits to a private address"),
]


@pytest.mark.parametrize(("path", "body"), ENDPOINTS)
@pytest.mark.parametrize("host", HOSTS)
def test_a_webhook_url_whose_host_is_not_a_public_dns_name_is_refused_at_create(
    api: httpx.Client, path: str, body: dict[str, Any], host: str
) -> None:
    response = api.post(path, json={**body, "webhook_url": f"https://{host}/relay"})

    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert (error["code"], error["param"]) == ("parameter_invalid", "webhook_url")
