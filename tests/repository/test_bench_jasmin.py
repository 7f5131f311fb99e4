"""Jasmin beside Relay in `make bench`: measured where it can run, a stated skip where not."""

from __future__ import annotations

import asyncio
import configparser
import os
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from bench import jasmin_reference, jasmin_stack, run_all
from bench.kannel_reference import KeepAliveClient

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_without_rabbitmq_jasmin_is_unavailable_with_the_reason_and_nothing_is_installed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = closed_port()
    monkeypatch.setattr(jasmin_stack, "AMQP_PORT", port)

    def no_install() -> Path:
        raise AssertionError("Jasmin was installed although RabbitMQ is missing")

    monkeypatch.setattr(jasmin_reference, "ensure_jasmin", no_install)

    reason = jasmin_reference.unavailable()

    assert reason is not None
    assert f"RabbitMQ is not reachable on 127.0.0.1:{port}" in reason


def test_a_jasmin_that_does_not_install_is_unavailable_with_pips_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def failed_install() -> Path:
        raise jasmin_stack.JasminUnavailable("pip install jasmin==0.11.0 failed: no Twisted")

    monkeypatch.setattr(jasmin_reference, "missing", lambda: None)
    monkeypatch.setattr(jasmin_reference, "ensure_jasmin", failed_install)

    assert jasmin_reference.unavailable() == (
        "Jasmin 0.11.0 did not install: pip install jasmin==0.11.0 failed: no Twisted"
    )


def test_make_bench_prints_a_skipped_line_and_records_it_without_failing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(jasmin_reference, "unavailable", lambda: "redis-server is not installed")
    results: dict[str, Any] = {"skipped": {}, "send_api_msgs_per_s": 500.0}

    found = run_all.jasmin(True, results)

    assert found == {}
    assert results["skipped"] == {"jasmin": "redis-server is not installed"}
    assert "skipped: redis-server is not installed" in capsys.readouterr().out


def test_make_bench_skips_jasmin_when_another_jasmind_holds_the_machine(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    async def held(messages: int) -> object:
        raise jasmin_stack.JasminUnavailable("another jasmind runs on this machine (pid 42)")

    monkeypatch.setattr(jasmin_reference, "unavailable", lambda: None)
    monkeypatch.setattr(jasmin_reference, "run_jasmin", held)
    results: dict[str, Any] = {"skipped": {}}

    assert run_all.jasmin(False, results) == {}
    assert results["skipped"] == {"jasmin": "another jasmind runs on this machine (pid 42)"}
    assert "skipped: another jasmind runs" in capsys.readouterr().out


def test_a_lock_left_by_a_killed_jasmind_is_cleared_with_its_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = tmp_path / "jasmind.lock"
    unique = tmp_path / "host.4242-1234"
    unique.write_text("")
    os.link(unique, lock)  # how lockfile's LinkLockFile takes it
    other = tmp_path / "unrelated"
    other.write_text("")
    monkeypatch.setattr(jasmin_stack, "running_jasmind", lambda: None)

    jasmin_stack.clear_stale_lock(lock)

    assert not lock.exists()
    assert not unique.exists()
    assert other.exists()


def test_a_lock_held_by_a_running_jasmind_is_left_and_named_as_the_reason(
    tmp_path: Path,
) -> None:
    lock = tmp_path / "jasmind.lock"
    lock.write_text("")
    stand_in = tmp_path / "jasmind.py"
    stand_in.write_text("import time\ntime.sleep(30)\n")
    process = subprocess.Popen([sys.executable, str(stand_in)])
    try:
        with pytest.raises(jasmin_stack.JasminUnavailable, match="another jasmind runs"):
            jasmin_stack.clear_stale_lock(lock)
        assert jasmin_stack.running_jasmind() is not None
    finally:
        process.kill()
        process.wait()

    assert lock.exists()


def test_make_bench_measures_jasmin_after_the_send_api_and_prints_its_figures() -> None:
    assert run_all.PARTS.index("jasmin") == run_all.PARTS.index("send") + 1
    printed = [key for key, _, _ in run_all.TABLE]
    assert {"jasmin_receipts_per_s", "send_api_jasmin_ratio"} <= set(printed)


def test_the_jasmin_config_listens_on_loopback_on_the_run_s_ports_and_vhost() -> None:
    ports = {name: 20_000 + number for number, name in enumerate(jasmin_stack.PORTS)}
    options = jasmin_stack.JasminOptions(dlr_retry_delay=3)
    text = jasmin_stack.render_config(
        ports, "relay-bench-jasmin-1-ab", Path("/spec.xml"), 6390, options
    )

    config = configparser.RawConfigParser()
    config.read_string(text)

    binds = {section: config[section]["bind"] for section in config if "bind" in config[section]}
    assert set(binds) == {
        "smpp-server", "smpp-server-pb", "client-management", "http-api", "router", "jcli"
    }  # fmt: skip
    assert set(binds.values()) == {"127.0.0.1"}
    assert config["http-api"]["port"] == str(ports["http"])
    assert config["jcli"]["port"] == str(ports["jcli"])
    assert config["amqp-broker"]["vhost"] == "relay-bench-jasmin-1-ab"
    assert config["redis-client"]["port"] == "6390"
    assert "dbid" not in config["redis-client"]  # a server of its own: db 0 is the run's
    assert config["dlr"]["dlr_lookup_retry_delay"] == "3"
    assert {config[section]["log_level"] for section in config if section != "DEFAULT"} == {
        "WARNING"
    }


def test_only_this_bench_s_vhosts_of_runs_that_are_gone_are_cleared() -> None:
    mine = f"relay-bench-jasmin-{os.getpid()}-ab12"
    gone = "relay-bench-jasmin-999999999-cd34"
    others = ["/", "name", "relay-bench-jasmin-other", "jasmin"]

    assert jasmin_stack._left_behind([*others, mine, gone]) == [gone]


@asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def exchange(port: int, requests: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(requests)
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), timeout=5)
    writer.close()
    return answer


async def test_the_receipt_sink_counts_each_delivered_message_once_and_answers_ack_jasmin() -> None:
    sink = jasmin_reference.receipt_sink()
    callback = "GET /dlr?id={id}&level=2&message_status={status} HTTP/1.1\r\nHost: x\r\n"
    requests = (
        callback.format(id="a", status="DELIVRD") + "\r\n"
        + callback.format(id="a", status="DELIVRD") + "\r\n"
        + callback.format(id="b", status="UNDELIV") + "\r\n"
        + callback.format(id="c", status="DELIVRD") + "Connection: close\r\n\r\n"
    ).encode()  # fmt: skip

    async with serving(sink.handle) as port:
        answer = await exchange(port, requests)

    assert answer.count(b"HTTP/1.1 200 OK") == 4
    assert answer.count(b"\r\n\r\nACK/Jasmin") == 4
    assert sink.delivered == {"a", "c"}
    assert sink.other == 1


async def test_the_keep_alive_client_reads_two_chunked_answers_on_one_connection() -> None:
    connections = 0

    async def twisted_like(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        for body in (b'Success "1f2e"', b'Success "3d4c"'):
            await reader.readuntil(b"\r\n\r\n")
            chunks = b"%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n" % (4, body[:4], len(body) - 4, body[4:])
            writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks)
        await writer.drain()
        writer.close()

    async with serving(twisted_like) as port:
        client = KeepAliveClient("127.0.0.1", port)
        first = await client.get("/send?n=1")
        second = await client.get("/send?n=2")
        await client.close()

    assert first == (200, b'Success "1f2e"')
    assert second == (200, b'Success "3d4c"')
    assert connections == 1
