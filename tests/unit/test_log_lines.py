"""A text log line: logging's own time stamp, then the line's fields in the order given."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from relay.log import KeyValueFormatter


def record(created: float, **fields: object) -> logging.LogRecord:
    line = logging.LogRecord("relay.http", logging.INFO, __file__, 1, "http.request", (), None)
    line.created = created
    line.msecs = int((created - int(created)) * 1000) + 0.0
    line.__dict__.update(fields)
    return line


@given(st.lists(st.floats(1e9, 4e9), min_size=1, max_size=20))
def test_the_time_stamp_is_loggings_own_however_many_lines_share_a_second(
    moments: list[float],
) -> None:
    ours, standard = KeyValueFormatter(), logging.Formatter()
    for created in sorted(moments) + moments:
        assert ours.formatTime(record(created)) == standard.formatTime(record(created))


def test_a_line_is_its_time_level_logger_action_and_fields() -> None:
    line = KeyValueFormatter().format(record(1_700_000_000.25, request_id="req_1", status=200))
    stamp = logging.Formatter().formatTime(record(1_700_000_000.25))
    assert line == f"{stamp} info relay.http http.request request_id=req_1 status=200"


def test_lines_of_different_fields_through_one_formatter_each_show_their_own() -> None:
    formatter = KeyValueFormatter()
    lines = [
        formatter.format(record(1_700_000_000.25, **fields))
        for fields in (
            {"request_id": "req_1", "status": 200},
            {"status": 404, "request_id": "req_2"},
            {"request_id": "req_3", "status": 200},
            {},
            {"request_id": "req_4", "status": 201, "account_id": "acct_1"},
        )
    ]
    assert [line.split(" http.request", 1)[1] for line in lines] == [
        " request_id=req_1 status=200",
        " status=404 request_id=req_2",
        " request_id=req_3 status=200",
        "",
        " request_id=req_4 status=201 account_id=acct_1",
    ]


def test_a_field_set_after_a_formatters_message_still_shows() -> None:
    line = record(1_700_000_000.25, request_id="req_1")
    line.message = line.getMessage()  # as logging.Formatter.format leaves it
    line.__dict__["status"] = 200
    assert KeyValueFormatter().format(line).endswith(" request_id=req_1 status=200")
