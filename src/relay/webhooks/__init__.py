"""Outbound webhooks: signing, the destination guard and the HTTP transport.

Receivers verify deliveries with `from relay.webhooks import verify`.
"""

from relay.webhooks.signature import WebhookVerificationError, sign, verify

__all__ = ["WebhookVerificationError", "sign", "verify"]
