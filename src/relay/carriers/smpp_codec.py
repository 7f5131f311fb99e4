"""A narrow, typed face on smpplib's PDU codec: the only module that imports smpplib.

smpplib ships no type information, so everything it returns is converted to
plain typed values here and nothing of it leaks into the session or carrier.

The four PDUs every SMS crosses (submit_sm out, submit_sm_resp in, deliver_sm
in, deliver_sm_resp out) are packed and read here with `struct` instead:
smpplib builds a command object with every field of the command set one by one
for each PDU, and that was most of the SMPP carrier's CPU per message. What
they produce is checked against smpplib's, byte for byte and field for field,
in tests/carriers/test_smpp_codec.py. The rare PDUs (bind, enquire_link,
unbind, the answers to commands we do not support) still go through smpplib.
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
SUBMIT_SM: Final = 0x00000004
DELIVER_SM_RESP: Final = 0x80000005

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
_TLV_RECEIPTED_MESSAGE_ID: Final = 0x001E
_TLV_MESSAGE_PAYLOAD: Final = 0x0424
_TLV_MESSAGE_STATE: Final = 0x0427
_TLV_HEADER = struct.Struct(">HH")
# Of submit_sm: esm_class, protocol_id, priority_flag; then after the two empty
# times registered_delivery (1: a receipt, please) and replace_if_present_flag.
_SUBMIT_FLAGS: Final = b"\x00\x00\x00"
_SUBMIT_TIMES_AND_RECEIPT: Final = b"\x00\x00\x01\x00"


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
    Addresses are the caller's to keep within SMPP's 20 characters.
    """
    if as_payload:
        short, tlv = b"", _TLV_HEADER.pack(_TLV_MESSAGE_PAYLOAD, len(message)) + message
    else:
        short, tlv = message, b""
    body = b"".join(
        (
            b"\x00",  # service_type: the SMSC's default
            bytes((source_addr_ton, source_addr_npi)),
            source_addr.encode("latin-1"),
            b"\x00\x01\x01",  # dest_addr_ton and _npi: `to` is always E.164
            destination_addr.encode("latin-1"),
            b"\x00",
            _SUBMIT_FLAGS,
            _SUBMIT_TIMES_AND_RECEIPT,
            bytes((data_coding, 0, len(short))),  # sm_default_msg_id 0, sm_length
            short,
            tlv,
        )
    )
    return _HEADER.pack(HEADER_SIZE + len(body), SUBMIT_SM, 0, sequence) + body


def enquire_link(sequence: int) -> bytes:
    return _generate("enquire_link", sequence)


def unbind(sequence: int) -> bytes:
    return _generate("unbind", sequence)


def response(command_id: int, sequence: int, status: int = ESME_ROK) -> bytes:
    """The response to a request we received; generic_nack for unsupported commands."""
    if command_id == DELIVER_SM:
        # An empty message_id, as SMPP 3.4 defines deliver_sm_resp.
        return _HEADER.pack(HEADER_SIZE + 1, DELIVER_SM_RESP, status, sequence) + b"\x00"
    name = _response_name(command_id)
    if name is None:
        name, status = "generic_nack", status or ESME_RINVCMDID
    return _generate(name, sequence, status=status)


def decode(frame: bytes) -> Pdu:
    """Decode one complete PDU (header included). ValueError only if the header is broken."""
    if len(frame) < HEADER_SIZE:
        raise ValueError(f"PDU of {len(frame)} octets is shorter than its header")
    _length, command_id, status, sequence = _HEADER.unpack_from(frame)
    try:
        if command_id == SUBMIT_SM_RESP:
            return _submit_sm_resp(frame, status, sequence)
        if command_id == DELIVER_SM:
            return _deliver_sm(frame, status, sequence)
    except (ValueError, IndexError, struct.error) as exc:
        _log.warning("malformed PDU command_id=0x%08x: %s", command_id, type(exc).__name__)
        return Pdu(command_id=command_id, status=status, sequence=sequence, malformed=True)
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


def _submit_sm_resp(frame: bytes, status: int, sequence: int) -> Pdu:
    # An error answer may carry no body at all.
    end = frame.index(b"\x00", HEADER_SIZE) if len(frame) > HEADER_SIZE else HEADER_SIZE
    return Pdu(
        command_id=SUBMIT_SM_RESP,
        status=status,
        sequence=sequence,
        message_id=frame[HEADER_SIZE:end].decode("latin-1") or None,
    )


def _deliver_sm(frame: bytes, status: int, sequence: int) -> Pdu:
    if len(frame) == HEADER_SIZE:
        # A body-less deliver_sm reads as one with every field empty, as smpplib reads it.
        return Pdu(command_id=DELIVER_SM, status=status, sequence=sequence)
    position = _skip_c_string(frame, HEADER_SIZE) + 2  # service_type, source TON and NPI
    position = _skip_c_string(frame, position) + 2  # source_addr, destination TON and NPI
    position = _skip_c_string(frame, position)  # destination_addr
    esm_class = frame[position]
    position = _skip_c_string(frame, position + 3)  # protocol_id, priority_flag, schedule time
    position = _skip_c_string(frame, position)  # validity_period
    # registered_delivery, replace_if_present_flag, data_coding, sm_default_msg_id, sm_length
    data_coding, length = frame[position + 2], frame[position + 4]
    position += 5
    short_message = frame[position : position + length]
    if len(short_message) != length:
        raise ValueError("short_message runs past the PDU")
    receipted_message_id = message_state = message_payload = None
    position += length
    while position + 4 <= len(frame):
        tag, size = _TLV_HEADER.unpack_from(frame, position)
        value = frame[position + 4 : position + 4 + size]
        position += 4 + size
        if tag == _TLV_RECEIPTED_MESSAGE_ID:
            receipted_message_id = value.rstrip(b"\x00").decode("latin-1") or None
        elif tag == _TLV_MESSAGE_STATE:
            message_state = int.from_bytes(value, "big")
        elif tag == _TLV_MESSAGE_PAYLOAD:
            message_payload = value
    return Pdu(
        command_id=DELIVER_SM,
        status=status,
        sequence=sequence,
        esm_class=esm_class,
        data_coding=data_coding,
        short_message=short_message,
        message_payload=message_payload,
        receipted_message_id=receipted_message_id,
        message_state=message_state,
    )


def _skip_c_string(frame: bytes, position: int) -> int:
    """Where the field after the C-Octet String at `position` starts."""
    return frame.index(b"\x00", position) + 1


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
