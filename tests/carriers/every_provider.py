"""One Relay with a carrier of every provider kind that takes callbacks, for the tests
that throw hostile input at the callback routes.

No provider fake runs: nothing is sent, only `POST /v1/carriers/{name}/status`
(and Meta's `GET` handshake) are under test. Each carrier is set up the way a
real account would be, signed or with a URL secret, so every verification
scheme meets the input.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from relay.carriers.callbacks import SECRET_PARAM
from tests.harness import RunningServer, ServerThread, count_rows, free_port, test_settings

# Nothing listens here: no test sends an SMS through these carriers.
NOWHERE = "https://127.0.0.1:9"
TELNYX_KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(32)))
TELNYX_PUBLIC = base64.b64encode(
    TELNYX_KEY.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
).decode()
URL_SECRET = "every-provider-url-secret-0123"


def _http(provider: str, **options: Any) -> dict[str, Any]:
    return {"kind": "http", "provider": provider, "base_url": NOWHERE, **options}


# carrier name → its table; the name says the scheme its callbacks are verified by.
CARRIERS: dict[str, dict[str, Any]] = {
    "twilio-signed": _http(
        "twilio",
        account_sid="AC" + "0" * 32,
        auth_token="twilio-every-token",
        from_number="+15005550006",
    ),
    "telnyx-signed": _http("telnyx", api_key="KEY-every", public_key=TELNYX_PUBLIC, sender="+1555"),
    "vonage-signed": _http(
        "vonage", api_key="every123", api_secret="s", sender="Relay", signature_secret="sig-every"
    ),
    "vonage-url": _http(
        "vonage", api_key="every456", api_secret="s", sender="Relay", callback_secret=URL_SECRET
    ),
    "plivo-signed": _http(
        "plivo", auth_id="MAEVERY0000000000000", auth_token="plivo-every", sender="33700000000"
    ),
    "sinch-signed": _http(
        "sinch", service_plan_id="everyplan", api_token="t", sender="Relay", signature_secret="h"
    ),
    "sinch-url": _http(
        "sinch", service_plan_id="everyplan2", api_token="t", sender="R", callback_secret=URL_SECRET
    ),
    "infobip-url": _http("infobip", api_key="k", sender="Relay", callback_secret=URL_SECRET),
    "whatsapp-signed": {
        "kind": "whatsapp",
        "base_url": NOWHERE,
        "phone_number_id": "106540352242922",
        "access_token": "EAA-every",
        "app_secret": "meta-every-secret",
        "verify_token": "meta-every-verify",
        "template": "verification_code",
        "template_language": "en_US",
    },
}


def status_path(carrier: str) -> str:
    return f"/v1/carriers/{carrier}/status"


@contextmanager
def every_provider_server(data_dir: Path, database_url: str) -> Iterator[RunningServer]:
    port = free_port()
    settings = test_settings(
        data_dir,
        database_url,
        public_url=f"https://localhost:{port}",
        carriers=CARRIERS,
        # Hundreds of refusals from one address: what each one is answered is under
        # test here, not the budgets that slow a flood of them down.
        auth_failure_burst=100_000,
    )
    with ServerThread(settings, port=port) as running:
        yield running


def callback_state(server: RunningServer) -> dict[str, int]:
    """What a believed callback leaves behind: receipts parked for unknown ids, nonces."""
    return {
        table: count_rows(server.settings, f"SELECT count(*) AS n FROM {table}")  # noqa: S608
        for table in ("early_reports", "callback_nonces")
    }


def signed(carrier: str, body: bytes) -> tuple[dict[str, str], str] | None:
    """The headers and query with which `carrier`'s provider would have sent `body`, for
    the carriers whose scheme signs the raw body or the URL alone; None for the rest."""
    table = CARRIERS[carrier]
    now = str(int(time.time()))
    if carrier == "whatsapp-signed":
        digest = hmac.new(table["app_secret"].encode(), body, hashlib.sha256).hexdigest()
        return {"X-Hub-Signature-256": f"sha256={digest}"}, ""
    if carrier == "telnyx-signed":
        signature = base64.b64encode(TELNYX_KEY.sign(f"{now}|".encode() + body)).decode()
        return {"telnyx-signature-ed25519": signature, "telnyx-timestamp": now}, ""
    if carrier == "sinch-signed":
        nonce = secrets.token_hex(8)
        mac = hmac.new(
            table["signature_secret"].encode(), body + f".{nonce}.{now}".encode(), "sha256"
        )
        return {
            "x-sinch-webhook-signature": base64.b64encode(mac.digest()).decode(),
            "x-sinch-webhook-signature-nonce": nonce,
            "x-sinch-webhook-signature-timestamp": now,
        }, ""
    if table.get("callback_secret"):
        return {}, urlencode({SECRET_PARAM: table["callback_secret"]})
    return None


# Every header a provider signs its callbacks with (and Vonage's JWT bearer): what the
# hostile-input catalogue and the fuzzing throw odd values into.
SIGNATURE_HEADERS = (
    "X-Twilio-Signature",
    "telnyx-signature-ed25519",
    "telnyx-timestamp",
    "X-Plivo-Signature-V3",
    "X-Plivo-Signature-V3-Nonce",
    "X-Plivo-Signature-V2",
    "X-Plivo-Signature-V2-Nonce",
    "x-sinch-webhook-signature",
    "x-sinch-webhook-signature-nonce",
    "x-sinch-webhook-signature-timestamp",
    "X-Hub-Signature-256",
)
