"""A narrow, typed face on smpplib's PDU codec: the only module that imports smpplib.

smpplib ships no type information, so everything it returns is converted to
plain typed values here and nothing of it leaks into the session or carrier.
"""

from __future__ import annotations

import logging
import struct
from dataclasses import dataclass
from typing import Any, Final

from smpplib import command as _command
from smpplib import command_codes as _codes
from smpplib import exceptions as _exceptions
from smpplib import pdu as _pdu
from smpplib import smpp as _smpp

__all__ = [
    "ALERT_NOTIFICATION",
    "BIND_TRANSCEIVER_RESP",
    "DELIVER_SM",
    "ENQUIRE_LINK",
    "ENQUIRE_LINK_RESP",
    "ESME_RINVCMDID",
    "ESME_RMSGQFUL",
    "ESME_ROK",
    "ESME_RSYSERR",
    "ESME_RTHROTTLED",
    "ESME_RX_T_APPN",
    "GENERIC_NACK",
    "HEADER_SIZE",
    "SUBMIT_SM_RESP",
    "UNBIND",
    "UNBIND_RESP",
    "Pdu",
    "bind_transceiver",
    "decode",
    "enquire_link",
    "response",
    "submit_sm",
    "unbind",
]

_log = logging.getLogger(__name__)

HEADER_SIZE: Final = 16
_HEADER = struct.Struct(">LLLL")
_RESPONSE_BIT: Final = 0x80000000

GENERIC_NACK: Final = 0x80000000
BIND_TRANSCEIVER_RESP: Final = 0x80000009
SUBMIT_SM_RESP: Final = 0x80000004
DELIVER_SM: Final = 0x00000005
UNBIND: Final = 0x00000006
UNBIND_RESP: Final = 0x80000006
ENQUIRE_LINK: Final = 0x00000015
ENQUIRE_LINK_RESP: Final = 0x80000015
ALERT_NOTIFICATION: Final = 0x00000102

ESME_ROK: Final = 0x00
ESME_RINVCMDID: Final = 0x03
ESME_RSYSERR: Final = 0x08
ESME_RMSGQFUL: Final = 0x14
ESME_RTHROTTLED: Final = 0x58
ESME_RX_T_APPN: Final = 0x64

# The optional parameters a delivery receipt may carry that we read.
_RECEIPT_TLVS: Final = frozenset({"receipted_message_id", "message_state", "message_payload"})


@dataclass(frozen=True)
class Pdu:
    """One inbound PDU, reduced to the fields Relay reads.

    `malformed` is set when the header was sound but the body was not: the
    session can still answer it by `command_id` and `sequence`.
    """

    command_id: int
    status: int
    sequence: int
    message_id: str | None = None
    esm_class: int = 0
    data_coding: int = 0
    short_message: bytes = b""
    message_payload: bytes | None = None
    receipted_message_id: str | None = None
    message_state: int | None = None
    malformed: bool = False

    @property
    def is_response(self) -> bool:
        return bool(self.command_id & _RESPONSE_BIT)


def bind_transceiver(sequence: int, *, system_id: str, password: str, system_type: str) -> bytes:
    return _generate(
        "bind_transceiver",
        sequence,
        system_id=system_id,
        password=password,
        system_type=system_type,
        addr_ton=0,
        addr_npi=0,
        address_range="",
    )


def submit_sm(
    sequence: int,
    *,
    source_addr: str,
    source_addr_ton: int,
    source_addr_npi: int,
    destination_addr: str,
    data_coding: int,
    message: bytes,
    as_payload: bool,
) -> bytes:
    """A submit_sm asking for a delivery receipt (`registered_delivery=1`).

    `as_payload` carries `message` in the message_payload TLV instead of
    short_message, for texts longer than one SMS that the SMSC will split.
    """
    body = {"message_payload": message} if as_payload else {"short_message": message}
    return _generate(
        "submit_sm",
        sequence,
        source_addr=source_addr,
        source_addr_ton=source_addr_ton,
        source_addr_npi=source_addr_npi,
        destination_addr=destination_addr,
        dest_addr_ton=1,  # international: `to` is always E.164
        dest_addr_npi=1,  # ISDN/E.164
        registered_delivery=1,
        data_coding=data_coding,
        **body,
    )


def enquire_link(sequence: int) -> bytes:
    return _generate("enquire_link", sequence)


def unbind(sequence: int) -> bytes:
    return _generate("unbind", sequence)


def response(command_id: int, sequence: int, status: int = ESME_ROK) -> bytes:
    """The response to a request we received; generic_nack for unsupported commands."""
    name = _response_name(command_id)
    if name is None:
        name, status = "generic_nack", status or ESME_RINVCMDID
    return _generate(name, sequence, status=status)


def decode(frame: bytes) -> Pdu:
    """Decode one complete PDU (header included). ValueError only if the header is broken."""
    if len(frame) < HEADER_SIZE:
        raise ValueError(f"PDU of {len(frame)} octets is shorter than its header")
    _length, command_id, status, sequence = _HEADER.unpack_from(frame)
    header = Pdu(command_id=command_id, status=status, sequence=sequence)
    try:
        parsed = _parse(frame)
    except _exceptions.UnknownCommandError:
        return header
    except (ValueError, KeyError, IndexError, struct.error, UnicodeError) as exc:
        _log.warning("malformed PDU command_id=0x%08x: %s", command_id, type(exc).__name__)
        return Pdu(command_id=command_id, status=status, sequence=sequence, malformed=True)
    return Pdu(
        command_id=command_id,
        status=status,
        sequence=sequence,
        message_id=_text(getattr(parsed, "message_id", None)),
        esm_class=_int(getattr(parsed, "esm_class", None)),
        data_coding=_int(getattr(parsed, "data_coding", None)),
        short_message=_octets(getattr(parsed, "short_message", None)) or b"",
        message_payload=_octets(getattr(parsed, "message_payload", None)),
        receipted_message_id=_text(getattr(parsed, "receipted_message_id", None)),
        message_state=_optional_int(getattr(parsed, "message_state", None)),
    )


def _generate(name: str, sequence: int, **fields: object) -> bytes:
    pdu = _smpp.make_pdu(name, sequence=sequence, **fields)
    pdu.sequence = sequence  # make_pdu only reads it to skip its own numbering
    return bytes(pdu.generate())


def _parse(frame: bytes) -> Any:
    name = _pdu.extract_command(frame)
    pdu = _smpp.make_pdu(name, sequence=0, allow_unknown_opt_params=True)
    # smpplib raises on an optional parameter the command does not list (an
    # SMSC may add any); losing a receipt to that would be worse than skipping it.
    pdu.parse_optional_params = lambda data: _parse_known_tlvs(pdu, data)
    pdu.parse(frame)
    return pdu


def _parse_known_tlvs(pdu: Any, data: bytes) -> None:
    position = 0
    while position + 4 <= len(data):
        tag, length = struct.unpack_from(">HH", data, position)
        value = data[position + 4 : position + 4 + length]
        position += 4 + length
        name = _tlv_name(tag)
        if name in _RECEIPT_TLVS and name in pdu.params:
            _parse_tlv(pdu, name, value)


def _parse_tlv(pdu: Any, name: str, value: bytes) -> None:
    kind = pdu.params[name].type
    if kind is int:
        setattr(pdu, name, int.from_bytes(value, "big"))
    elif kind is str:
        setattr(pdu, name, value.rstrip(b"\x00"))
    else:
        setattr(pdu, name, value)


def _tlv_name(tag: int) -> str | None:
    try:
        return str(_command.get_optional_name(tag))
    except _exceptions.UnknownCommandError:
        return None


def _response_name(command_id: int) -> str | None:
    try:
        name = str(_codes.get_command_name(command_id))
    except _exceptions.UnknownCommandError:
        return None
    if command_id & _RESPONSE_BIT:
        return None
    try:
        _codes.get_command_code(f"{name}_resp")
    except _exceptions.UnknownCommandError:
        return None
    return f"{name}_resp"


def _text(value: object) -> str | None:
    octets = _octets(value)
    # SMPP ids are C-Octet Strings of ASCII; latin-1 never fails and keeps every octet.
    return octets.decode("latin-1") if octets else None


def _octets(value: object) -> bytes | None:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("latin-1")
    return None


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


def _optional_int(value: object) -> int | None:
    return value if isinstance(value, int) else None
