"""The hand-packed PDUs of every SMS against smpplib's own, the codec they replaced.

submit_sm and deliver_sm_resp must be the bytes smpplib generates, and
submit_sm_resp and deliver_sm must read as smpplib's parse read them (through
the codec's fallback, which still uses smpplib for the rare PDUs).
"""

from __future__ import annotations

import struct
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from smpplib import smpp

from relay.carriers import smpp_codec as codec

addresses = st.text(alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefgh +-", max_size=20)
octets = st.binary(max_size=254)


def smpplib_pdu(name: str, sequence: int, **fields: Any) -> bytes:
    pdu = smpp.make_pdu(name, sequence=sequence, **fields)
    pdu.sequence = sequence
    return bytes(pdu.generate())


@given(
    sequence=st.integers(1, 0x7FFFFFFF),
    source=addresses.filter(bool),
    ton=st.integers(0, 255),
    npi=st.integers(0, 255),
    destination=st.text(alphabet="0123456789", min_size=1, max_size=15),
    data_coding=st.sampled_from([0x00, 0x08]),
    message=octets.filter(bool),
    as_payload=st.booleans(),
)
def test_submit_sm_is_the_pdu_smpplib_generates(
    sequence: int,
    source: str,
    ton: int,
    npi: int,
    destination: str,
    data_coding: int,
    message: bytes,
    as_payload: bool,
) -> None:
    ours = codec.submit_sm(
        sequence,
        source_addr=source,
        source_addr_ton=ton,
        source_addr_npi=npi,
        destination_addr=destination,
        data_coding=data_coding,
        message=message,
        as_payload=as_payload,
    )
    body = {"message_payload": message} if as_payload else {"short_message": message}
    theirs = smpplib_pdu(
        "submit_sm",
        sequence,
        source_addr=source,
        source_addr_ton=ton,
        source_addr_npi=npi,
        destination_addr=destination,
        dest_addr_ton=1,
        dest_addr_npi=1,
        registered_delivery=1,
        data_coding=data_coding,
        **body,
    )
    assert ours == theirs


@given(sequence=st.integers(1, 0x7FFFFFFF), status=st.sampled_from([0, 0x08, 0x64]))
def test_deliver_sm_resp_is_the_pdu_smpplib_generates(sequence: int, status: int) -> None:
    theirs = smpplib_pdu("deliver_sm_resp", sequence, status=status)
    assert codec.response(codec.DELIVER_SM, sequence, status) == theirs


@given(sequence=st.integers(1, 0x7FFFFFFF), message_id=addresses, status=st.integers(0, 0x64))
def test_submit_sm_resp_reads_as_smpplib_reads_it(
    sequence: int, message_id: str, status: int
) -> None:
    body = message_id.encode() + b"\x00"
    frame = struct.pack(">LLLL", 16 + len(body), codec.SUBMIT_SM_RESP, status, sequence) + body
    pdu = codec.decode(frame)
    assert (pdu.command_id, pdu.status, pdu.sequence) == (codec.SUBMIT_SM_RESP, status, sequence)
    assert pdu.message_id == (message_id or None)
    assert pdu == codec.Pdu(codec.SUBMIT_SM_RESP, status, sequence, message_id=message_id or None)
    # An error answer without a body.
    bare = codec.decode(struct.pack(">L", 16) + frame[4:16])
    assert bare.message_id is None
    assert bare.status == status


receipt_tlvs = st.fixed_dictionaries(
    {},
    optional={
        "receipted_message_id": addresses.filter(bool),
        "message_state": st.integers(0, 8),
        "message_payload": octets.filter(bool),
    },
)


@given(
    sequence=st.integers(1, 0x7FFFFFFF),
    source=addresses,
    destination=addresses,
    esm_class=st.integers(0, 255),
    data_coding=st.integers(0, 255),
    text=octets,
    tlvs=receipt_tlvs,
    # The fields Relay skips, not left at zero: a zero octet reads like an empty string.
    skipped=st.fixed_dictionaries(
        {
            "service_type": st.sampled_from(["", "CMT"]),
            "source_addr_ton": st.integers(0, 255),
            "dest_addr_npi": st.integers(0, 255),
            "protocol_id": st.integers(0, 255),
            "priority_flag": st.integers(0, 255),
            "schedule_delivery_time": st.sampled_from(["", "251124120000000+"]),
            "registered_delivery": st.integers(0, 255),
            "sm_default_msg_id": st.integers(0, 255),
        }
    ),
)
def test_deliver_sm_reads_as_smpplib_reads_it(
    sequence: int,
    source: str,
    destination: str,
    esm_class: int,
    data_coding: int,
    text: bytes,
    tlvs: dict[str, Any],
    skipped: dict[str, Any],
) -> None:
    if "message_payload" in tlvs:
        text = b""  # smpplib refuses both in one PDU
    frame = smpplib_pdu(
        "deliver_sm",
        sequence,
        source_addr=source,
        destination_addr=destination,
        esm_class=esm_class,
        data_coding=data_coding,
        short_message=text,
        **tlvs,
        **skipped,
    )
    ours = codec.decode(frame)
    # The fallback parses any PDU as smpplib does: the reference for the fast path.
    assert ours == _smpplib_decoded(frame)
    assert ours.short_message == text
    assert ours.esm_class == esm_class
    assert ours.receipted_message_id == tlvs.get("receipted_message_id")


def test_a_deliver_sm_cut_short_is_malformed_not_an_error() -> None:
    frame = smpplib_pdu("deliver_sm", 7, source_addr="1", destination_addr="2", short_message=b"x")
    cut = frame[:-1]
    pdu = codec.decode(struct.pack(">L", len(cut)) + cut[4:])
    assert pdu.malformed
    assert (pdu.command_id, pdu.sequence) == (codec.DELIVER_SM, 7)


def _smpplib_decoded(frame: bytes) -> codec.Pdu:
    parsed = codec._parse(frame)
    _length, command_id, status, sequence = struct.unpack_from(">LLLL", frame)
    return codec.Pdu(
        command_id=command_id,
        status=status,
        sequence=sequence,
        message_id=codec._text(getattr(parsed, "message_id", None)),
        esm_class=codec._int(getattr(parsed, "esm_class", None)),
        data_coding=codec._int(getattr(parsed, "data_coding", None)),
        short_message=codec._octets(getattr(parsed, "short_message", None)) or b"",
        message_payload=codec._octets(getattr(parsed, "message_payload", None)),
        receipted_message_id=codec._text(getattr(parsed, "receipted_message_id", None)),
        message_state=codec._optional_int(getattr(parsed, "message_state", None)),
    )
