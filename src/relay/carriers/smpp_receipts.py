"""SMPP delivery receipts: reading them, and holding early ones back briefly.

A receipt names its SMS by `receipted_message_id` (TLV) or by the `id:` field
of the de-facto receipt text (SMPP 3.4 Appendix B):

    id:IIIIIIIIII sub:SSS dlvrd:DDD submit date:YYMMDDhhmm done date:YYMMDDhhmm
    stat:DDDDDDD err:E text:...
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from relay.carriers import smpp_codec as codec
from relay.carriers.base import ReportStatus

__all__ = ["Receipt", "ReceiptGate", "parse_receipt"]

_log = logging.getLogger(__name__)

_MESSAGE_TYPE_MASK: Final = 0x3C
_SMSC_DELIVERY_RECEIPT: Final = 0x04

_FAILED_STATS: Final = frozenset({"UNDELIV", "REJECTD", "EXPIRED", "DELETED", "UNKNOWN"})
_PENDING_STATS: Final = frozenset({"ENROUTE", "ACCEPTD"})

# message_state TLV values (SMPP 3.4 5.2.28), for receipts that carry no text.
_STATE_NAMES: Final = {
    1: "ENROUTE",
    2: "DELIVRD",
    3: "EXPIRED",
    4: "DELETED",
    5: "UNDELIV",
    6: "ACCEPTD",
    7: "UNKNOWN",
    8: "REJECTD",
}

_FIELD = re.compile(r"\b(id|stat|err):(\S*)", re.IGNORECASE)
# Everything from `text:` on is the start of the SMS itself and may say anything.
_TEXT_FIELD = re.compile(r"\btext:", re.IGNORECASE)
_MAX_ERR = 16


@dataclass(frozen=True)
class Receipt:
    """A final delivery receipt; `error_code` is `STAT` or `STAT:err` when failed."""

    message_id: str
    status: ReportStatus
    error_code: str | None


def parse_receipt(pdu: codec.Pdu) -> Receipt | None:
    """The final receipt a deliver_sm carries, or None (MO message, ENROUTE, unreadable)."""
    if pdu.esm_class & _MESSAGE_TYPE_MASK != _SMSC_DELIVERY_RECEIPT:
        return None
    fields = _text_fields(pdu.short_message or pdu.message_payload or b"")
    message_id = pdu.receipted_message_id or fields.get("id")
    stat = fields.get("stat") or _STATE_NAMES.get(pdu.message_state or 0)
    if not message_id or not stat:
        _log.warning("delivery receipt without %s ignored", "id" if not message_id else "stat")
        return None
    return _receipt(message_id, stat.upper(), fields.get("err"))


def _receipt(message_id: str, stat: str, err: str | None) -> Receipt | None:
    if stat == "DELIVRD":
        return Receipt(message_id, "delivered", None)
    if stat in _FAILED_STATS:
        meaningful = err is not None and err.strip("0") != ""
        code = f"{stat}:{err[:_MAX_ERR]}" if meaningful and err else stat
        return Receipt(message_id, "failed", code)
    if stat not in _PENDING_STATS:
        _log.warning("delivery receipt with unknown stat %r ignored", stat[:_MAX_ERR])
    return None


def _text_fields(raw: bytes) -> dict[str, str]:
    # latin-1 never fails; the fields we read are ASCII in every SMSC we know of.
    text = raw.decode("latin-1")
    head = _TEXT_FIELD.split(text, maxsplit=1)[0]
    fields: dict[str, str] = {}
    for name, value in _FIELD.findall(head):
        fields.setdefault(name.lower(), value)
    return fields


class ReceiptGate:
    """Lets a receipt through once its submit has returned, or after `hold` seconds.

    SMSCs may send a receipt before the submit_sm_resp that names the message
    (or the two may cross on the wire). Holding such a receipt until `submit`
    has handed its id to the caller means the sink is not told about an id
    nobody has heard of yet; a receipt for an id this process never submitted
    (sent before a restart, say) passes after `hold` seconds.
    """

    def __init__(self, hold: float, *, remember: int = 8192) -> None:
        self._hold = hold
        self._remember = remember
        self._known: OrderedDict[str, None] = OrderedDict()
        self._waiting: dict[str, asyncio.Event] = {}

    def submitted(self, message_id: str) -> None:
        self._known[message_id] = None
        if len(self._known) > self._remember:
            self._known.popitem(last=False)
        waiting = self._waiting.pop(message_id, None)
        if waiting is not None:
            waiting.set()

    async def wait(self, message_id: str) -> None:
        if message_id in self._known:
            return
        event = self._waiting.setdefault(message_id, asyncio.Event())
        try:
            async with asyncio.timeout(self._hold):
                await event.wait()
        except TimeoutError:
            if self._waiting.get(message_id) is event:
                del self._waiting[message_id]
