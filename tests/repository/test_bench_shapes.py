"""`make bench` sends what production sends: an Idempotency-Key on every POST, one per request."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from bench import run_all, serving, smpp_bench, trend, verify_report, wrk_scripts

# What relay-client (clients/python, core.new_idempotency_key) sends.
CLIENT_KEY = re.compile(r"rc_[0-9a-f]{32}")

needs_wrk = pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed")


class Recorder(BaseHTTPRequestHandler):
    """Answers every POST like a create, keeping the headers and body it was sent."""

    protocol_version = "HTTP/1.1"
    seen: list[tuple[dict[str, str], dict[str, Any]]]

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.seen.append(({name.lower(): value for name, value in self.headers.items()}, body))
        answer = json.dumps({"id": f"v_{len(self.seen)}"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@contextmanager
def recording() -> Iterator[tuple[str, list[tuple[dict[str, str], dict[str, Any]]]]]:
    seen: list[tuple[dict[str, str], dict[str, Any]]] = []
    handler = type("Handler", (Recorder,), {"seen": seen})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def drive(script: str, url: str, tmp_path: Path, threads: int) -> None:
    path = tmp_path / "script.lua"
    path.write_text(script)
    command = ["wrk", f"-t{threads}", "-c4", "-d1s", "-s", str(path), url]
    subprocess.run(command, capture_output=True, text=True, check=True, timeout=30)


def create_script(tmp_path: Path, shape: str) -> str:
    body = wrk_scripts.LUA_CREATE.format(ids=tmp_path / "ids.txt", seed=1)
    return wrk_scripts.script("rk_test_key", body, shape=shape)


@needs_wrk
def test_every_keyed_create_carries_an_idempotency_key_of_its_own_in_relay_clients_form(
    tmp_path: Path,
) -> None:
    with recording() as (url, seen):
        drive(create_script(tmp_path, "keyed"), f"{url}/v1/verifications", tmp_path, threads=2)

    keys = [headers.get("idempotency-key", "") for headers, _ in seen]
    assert len(keys) > 10
    assert all(CLIENT_KEY.fullmatch(key) for key in keys), keys[:3]
    assert len(set(keys)) == len(keys)
    # The key is added to the script's headers, not sent instead of them.
    assert {headers["authorization"] for headers, _ in seen} == {"Bearer rk_test_key"}
    assert {headers["content-type"] for headers, _ in seen} == {"application/json"}


@needs_wrk
def test_the_keyed_shape_makes_different_keys_in_each_run_on_one_database(
    tmp_path: Path,
) -> None:
    with recording() as (url, seen):
        drive(create_script(tmp_path, "keyed"), url, tmp_path, threads=1)
        first = {headers["idempotency-key"] for headers, _ in seen}
        drive(create_script(tmp_path, "keyed"), url, tmp_path, threads=1)
        second = {headers["idempotency-key"] for headers, _ in seen} - first

    assert first
    assert second
    assert not first & second
    assert len(first | second) == len(seen)


@needs_wrk
def test_a_bare_create_carries_no_idempotency_key(tmp_path: Path) -> None:
    with recording() as (url, seen):
        drive(create_script(tmp_path, "bare"), url, tmp_path, threads=1)

    assert seen
    assert not any("idempotency-key" in headers for headers, _ in seen)
    assert {headers["authorization"] for headers, _ in seen} == {"Bearer rk_test_key"}


@needs_wrk
def test_end_to_end_verifications_are_keyed_to_numbers_of_their_own_with_the_webhook(
    tmp_path: Path,
) -> None:
    hook = "https://127.0.0.1:9/hook"
    with recording() as (url, seen):
        drive(smpp_bench.driver_lua("verifications", "rk_live_key", hook), url, tmp_path, 1)

    keys = [headers["idempotency-key"] for headers, _ in seen]
    numbers = [body["to"] for _, body in seen]
    assert len(seen) > 10
    assert all(CLIENT_KEY.fullmatch(key) for key in keys)
    assert len(set(keys)) == len(keys)
    assert len(set(numbers)) == len(numbers)
    assert all(re.fullmatch(r"\+1415[2-9]\d{6}", number) for number in numbers)
    assert {body["webhook_url"] for _, body in seen} == {hook}
    assert {headers["authorization"] for headers, _ in seen} == {"Bearer rk_live_key"}


def test_a_key_prefix_that_is_not_fourteen_hex_digits_is_refused() -> None:
    assert "0123456789abcd" in wrk_scripts.shape_lua("keyed", "0123456789abcd")
    with pytest.raises(ValueError, match="14 lowercase hex digits"):
        wrk_scripts.shape_lua("keyed", "0123456789abc")
    with pytest.raises(ValueError, match="14 lowercase hex digits"):
        wrk_scripts.shape_lua("keyed", '0123456789abc"')
    with pytest.raises(ValueError, match="unknown request shape"):
        wrk_scripts.shape_lua("idempotent")


def result(rps: float, p99_ms: float = 1.0, target_rps: float | None = None) -> Any:
    return serving.Result(
        requests=int(rps * 10),
        seconds=10.0,
        p50_ms=0.5,
        p95_ms=0.8,
        p99_ms=p99_ms,
        non_2xx=0,
        socket_errors=0,
        late=0,
        target_rps=target_rps,
    )


def test_the_keyed_figures_take_the_headline_names_and_the_bare_ones_a_bare_prefix() -> None:
    row = serving.Row
    rows = [row("reference", "healthz", result(5000.0)), row("relay", "list", result(900.0))]
    for shape, relay_create, relay_check in (("bare", 400.0, 600.0), ("keyed", 300.0, 500.0)):
        rows += [
            row("reference", "create", result(1000.0), shape),
            row("reference", "check", result(2000.0), shape),
            row("relay", "create", result(relay_create), shape),
            row("relay", "check", result(relay_check), shape),
            row("relay", "create", result(relay_create / 2, relay_create / 100, 1.0), shape),
            row("relay", "check", result(relay_check / 2, relay_check / 100, 1.0), shape),
        ]

    found = verify_report.figures(rows, "pg")

    assert found["pg_create_ratio"] == pytest.approx(0.30)
    assert found["pg_check_ratio"] == pytest.approx(0.25)
    assert found["pg_create_p99_ms"] == pytest.approx(3.0)
    assert found["pg_check_p99_ms"] == pytest.approx(5.0)
    assert found["bare_pg_create_ratio"] == pytest.approx(0.40)
    assert found["bare_pg_check_ratio"] == pytest.approx(0.30)
    assert found["bare_pg_create_p99_ms"] == pytest.approx(4.0)
    assert found["bare_pg_check_p99_ms"] == pytest.approx(6.0)
    assert found["pg_create_floor_rps"] == pytest.approx(1000.0)
    assert set(found) == {
        f"{prefix}pg_{call}_{figure}"
        for prefix in ("", "bare_")
        for call in ("create", "check")
        for figure in ("ratio", "rps", "floor_rps", "p99_ms")
    }


def test_a_run_measured_before_the_shapes_has_its_create_and_check_figures_under_bare(
    tmp_path: Path,
) -> None:
    older = {
        "date": "2026-11-26T01:45:00Z",
        "commit": "e8370fe",
        "sqlite_create_ratio": 0.39,
        "pg_check_p99_ms": 12.0,
        "send_api_msgs_per_s": 617.0,
    }
    newer = {
        "date": "2026-11-27T01:45:00Z",
        "commit": "abc1234",
        "sqlite_create_ratio": 0.31,
        "bare_sqlite_create_ratio": 0.38,
        "verify_e2e_per_s": 250.0,
    }
    history = tmp_path / "history.jsonl"
    history.write_text(json.dumps(older) + "\n" + json.dumps(newer) + "\n")

    runs = trend.load(history)

    assert runs[0]["bare_sqlite_create_ratio"] == 0.39
    assert runs[0]["bare_pg_check_p99_ms"] == 12.0
    assert "sqlite_create_ratio" not in runs[0]
    assert runs[0]["send_api_msgs_per_s"] == 617.0
    assert runs[1] == newer
    table = trend.render(runs, ["sqlite_create_ratio", "bare_sqlite_create_ratio"])
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()]
    assert rows[2][-2:] == ["-", "0.39"]
    assert rows[3][-2:] == ["0.31", "0.38"]


def test_the_headline_columns_hold_both_shapes_and_the_end_to_end_verifications() -> None:
    for key in ("sqlite_create_ratio", "bare_sqlite_create_ratio", "pg_check_ratio"):
        assert key in trend.HEADLINE
    assert "bare_pg_check_ratio" in trend.HEADLINE
    assert "verify_e2e_per_s" in trend.HEADLINE
    assert "verify_e2e_pg_per_s" in trend.HEADLINE


def test_make_bench_runs_verifications_end_to_end_on_both_databases_and_prints_every_key() -> None:
    verifications = {
        key: (db, workers) for api, db, workers, key in run_all.END_TO_END if api == "verifications"
    }
    assert verifications == {"verify_e2e_per_s": ("sqlite", 1), "verify_e2e_pg_per_s": ("pg", 2)}
    printed = [key for key, _, _ in run_all.TABLE]
    for db in ("sqlite", "pg"):
        for call in ("create", "check"):
            for figure in ("ratio", "p99_ms"):
                assert f"{db}_{call}_{figure}" in printed
                assert f"bare_{db}_{call}_{figure}" in printed
    assert {"verify_e2e_per_s", "verify_e2e_pg_per_s", "send_api_msgs_per_s"} <= set(printed)
