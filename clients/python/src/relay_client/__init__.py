"""Python client for the Relay OTP API (SMS, WhatsApp, email).

from relay_client import Relay

relay = Relay(api_key="sk_test_...", base_url="https://relay.example.com")
verification = relay.verifications.create("+14155552671")
relay.verifications.check("123456", id=verification["id"])
"""

from relay_client import webhooks
from relay_client.async_client import AsyncPaginator, AsyncRelay
from relay_client.errors import (
    APIConnectionError,
    APIError,
    AuthenticationError,
    ConflictError,
    InvalidRequestError,
    NotFoundError,
    RateLimitError,
    RelayError,
    SignatureVerificationError,
)
from relay_client.objects import (
    Attempt,
    Channel,
    Erasure,
    Event,
    Message,
    Verification,
    VerificationStatus,
    WebhookEvent,
)
from relay_client.sync_client import Paginator, Relay
from relay_client.version import VERSION

__version__ = VERSION
__all__ = [
    "APIConnectionError",
    "APIError",
    "AsyncPaginator",
    "AsyncRelay",
    "Attempt",
    "AuthenticationError",
    "Channel",
    "ConflictError",
    "Erasure",
    "Event",
    "InvalidRequestError",
    "Message",
    "NotFoundError",
    "Paginator",
    "RateLimitError",
    "Relay",
    "RelayError",
    "SignatureVerificationError",
    "Verification",
    "VerificationStatus",
    "WebhookEvent",
    "webhooks",
]
