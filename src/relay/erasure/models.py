"""What an erasure answers, and which destination it is about."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from relay.email_address import parse_mailbox
from relay.phone import parse_destination

# The kinds an erasure counts, in the order its answer lists them.
KINDS = (
    "verifications",
    "messages",
    "attempts",
    "events",
    "webhook_attempts",
    "idempotency_keys",
    "counters",
)


def destination_key(to: str) -> str:
    """The form rows name a destination in: an E.164 number, or an email address's
    mailbox (`email_address.mailbox_of`), so every spelling of an address that reached
    one mailbox is erased. 400 (`phone_number_invalid`, `parameter_invalid`) otherwise."""
    if "@" in to:
        return parse_mailbox(to)
    # Any number Relay may have sent to: the sandbox's numbers too.
    return parse_destination(to, livemode=False).e164


@dataclass(frozen=True)
class Erasure:
    """One erasure: the destination masked (`relay.masking`), the rows deleted per kind."""

    to: str
    livemode: bool | None
    deleted: Mapping[str, int]

    def to_api(self) -> dict[str, Any]:
        return {
            "object": "erasure",
            "livemode": self.livemode,
            "to": self.to,
            "deleted": {kind: self.deleted.get(kind, 0) for kind in KINDS},
        }
