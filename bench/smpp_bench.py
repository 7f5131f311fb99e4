"""Send API end to end over SMPP: HTTPS request → submit_sm → receipt → delivered → webhook.

Starts a real SMSC (node-smpp, the peer of the test suite; needs Node.js and
npm), `relay serve` with one SMPP carrier bound to it, and a local HTTPS
webhook receiver. Sends N messages with `POST /v1/messages` from an async
client (httpx, `--concurrency` requests in flight) and reports:

* request rate and p50/p95/p99 latency of `POST /v1/messages`;
* the end-to-end rate: N divided by the time from the first request to the
  last `message.delivered` webhook received.

With `--kannel`, Kannel (Debian package `kannel`, see bench/kannel_reference.py)
drives the same SMSC in the same run, and the ratio is printed.

Usage:
  .venv/bin/python bench/smpp_bench.py [--messages 3000] [--concurrency 64] [--db sqlite|pg]
                                       [--kannel]
  .venv/bin/python bench/smpp_bench.py --smoke     # a few seconds, for CI
"""

from __future__ import annotations

import argparse
import asyncio
import http.server
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.verify_bench import free_port, wait_ready  # noqa: E402
from tests.carriers.smpp_peer import SmppPeer, install_peer  # noqa: E402

from relay.tls import ensure_self_signed  # noqa: E402

RELAY = str(ROOT / ".venv" / "bin" / "relay")
PG_URL = os.environ.get("RELAY_BENCH_PG", "postgresql://127.0.0.1:5432/relay_bench_smpp")


@dataclass
class Outcome:
    messages: int
    request_rps: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    end_to_end_rps: float
    delivered_status: int
    webhooks: int


class _Receiver(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.delivered: set[str] = set()
        self.last_at = 0.0
        self.lock = threading.Lock()


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        return

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        event = json.loads(body)
        server = self.server
        assert isinstance(server, _Receiver)
        if event.get("type") == "message.delivered":
            with server.lock:
                server.delivered.add(event["data"]["object"]["id"])
                server.last_at = time.monotonic()
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()


@contextmanager
def receiver(cert_dir: Path) -> Iterator[tuple[_Receiver, str]]:
    paths = ensure_self_signed(cert_dir)
    server = _Receiver(free_port())
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(paths.cert, paths.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server, str(paths.cert)
    finally:
        server.shutdown()
        server.server_close()


def recreate_pg(url: str) -> None:
    from urllib.parse import urlsplit

    database = urlsplit(url).path.lstrip("/")
    for sql in (
        f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)',
        f'CREATE DATABASE "{database}"',
    ):
        subprocess.run(
            ["psql", "-h", "127.0.0.1", "-U", "postgres", "-qc", sql], check=True, timeout=60
        )


async def relay_side(args: argparse.Namespace, work: Path, peer_port: int) -> Outcome:
    data = work / "relay"
    data.mkdir(parents=True, exist_ok=True)
    database_url = PG_URL if args.db == "pg" else f"sqlite:///{data / 'relay.sqlite3'}"
    if args.db == "pg":
        recreate_pg(database_url)
    config = work / "relay.toml"
    config.write_text(
        "[carriers.smsc]\n"
        'kind = "smpp"\nhost = "127.0.0.1"\n'
        f"port = {peer_port}\n"
        'system_id = "relay"\npassword = "secret"\n'
        f"binds = {args.binds}\nwindow = {args.window}\n"
        '[routes]\ndefault = ["smsc"]\n'
    )
    with receiver(work / "receiver-tls") as (hook, hook_ca):
        env = {
            **os.environ,
            "RELAY_CONFIG": str(config),
            "RELAY_DATA_DIR": str(data),
            "RELAY_DATABASE_URL": database_url,
            "RELAY_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
            "RELAY_WEBHOOK_CA_BUNDLE": hook_ca,
            "RELAY_PUMPING_GUARD": "off",
            "RELAY_DAILY_SMS_CAP": "100000000",
            "RELAY_RATE_LIMIT": "100000",
            "RELAY_RATE_LIMIT_BURST": "100000",
            "RELAY_LOG_LEVEL": "warning",
        }
        key = await asyncio.to_thread(prepare, env)
        relay_cert = ensure_self_signed(data / "tls")  # serve uses it rather than make one
        port = free_port()
        url = f"https://127.0.0.1:{port}"
        command = [RELAY, "serve", "--port", str(port)]
        process = await asyncio.to_thread(
            subprocess.Popen, command, env=env, stdout=subprocess.DEVNULL
        )
        try:
            tls = ssl.create_default_context(cafile=str(relay_cert.cert))
            await asyncio.to_thread(wait_ready, url, tls, process)
            hook_url = f"https://127.0.0.1:{hook.server_address[1]}/hook"
            return await drive(args, url, tls, key, hook_url, hook)
        finally:
            process.terminate()
            process.wait(timeout=30)


def prepare(env: dict[str, str]) -> str:
    """Migrate, create the bench account, return its live key."""
    subprocess.run([RELAY, "migrate"], env=env, check=True, capture_output=True)
    created = subprocess.run(
        [RELAY, "accounts", "create", "Bench", "--json"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key: str = json.loads(created.stdout)["live_key"]
    return key


def wait_for_webhooks(hook: _Receiver, count: int, deadline: float) -> None:
    while len(hook.delivered) < count and time.monotonic() < deadline:
        time.sleep(0.05)


async def drive(
    args: argparse.Namespace,
    url: str,
    tls: ssl.SSLContext,
    key: str,
    hook_url: str,
    hook: _Receiver,
) -> Outcome:
    latencies: list[float] = []
    ids: list[str] = []
    limits = httpx.Limits(max_connections=args.concurrency)
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(
        base_url=url, verify=tls, headers=headers, limits=limits, timeout=30
    ) as client:
        queue: asyncio.Queue[int] = asyncio.Queue()
        for index in range(args.messages):
            queue.put_nowait(index)

        async def worker() -> None:
            while not queue.empty():
                index = queue.get_nowait()
                body = {
                    "to": f"+1415{3000000 + index:07d}",
                    "code": f"{index % 1000000:06d}",
                    "webhook_url": hook_url,
                }
                started = time.perf_counter()
                response = await client.post("/v1/messages", json=body)
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    raise SystemExit(
                        f"POST /v1/messages answered {response.status_code}: {response.text}"
                    )
                ids.append(response.json()["id"])

        started = time.monotonic()
        await asyncio.gather(*(worker() for _ in range(args.concurrency)))
        sent_for = time.monotonic() - started
        deadline = time.monotonic() + max(30.0, sent_for * 3)
        await asyncio.to_thread(wait_for_webhooks, hook, len(ids), deadline)
        end = hook.last_at if hook.delivered else time.monotonic()
        delivered = 0
        for message_id in ids[-50:]:
            status = (await client.get(f"/v1/messages/{message_id}")).json()["status"]
            delivered += status == "delivered"
    quantiles = statistics.quantiles(latencies, n=100)
    return Outcome(
        messages=len(ids),
        request_rps=len(ids) / sent_for,
        p50_ms=quantiles[49],
        p95_ms=quantiles[94],
        p99_ms=quantiles[98],
        end_to_end_rps=len(hook.delivered) / (end - started),
        delivered_status=delivered,
        webhooks=len(hook.delivered),
    )


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="relay-smpp-bench-") as tmp:
        work = Path(tmp)
        peer_dir = install_peer(Path.home() / ".cache" / "relay-bench")
        peer = await SmppPeer.start(peer_dir, receipt={"stat": "DELIVRD", "form": "tlv"})
        try:
            outcome = await relay_side(args, work, peer.port)
        finally:
            await peer.stop()
    kannel_rate = None
    if args.kannel:
        from bench.kannel_reference import measure_kannel

        kannel_rate = await asyncio.to_thread(measure_kannel, args.messages)
    report(args, outcome, kannel_rate)


def report(args: argparse.Namespace, outcome: Outcome, kannel_rate: float | None) -> None:
    latency = f"{outcome.p50_ms:.1f} / {outcome.p95_ms:.1f} / {outcome.p99_ms:.1f} ms"
    rows = [
        ("POST /v1/messages", f"{outcome.request_rps:,.0f} req/s"),
        ("request latency p50 / p95 / p99", latency),
        ("end to end: request → receipt → webhook", f"{outcome.end_to_end_rps:,.0f} msg/s"),
        ("message.delivered webhooks", f"{outcome.webhooks} of {outcome.messages}"),
    ]
    if kannel_rate is not None:
        rows.append(("Kannel, same SMSC", f"{kannel_rate:,.0f} receipts/s"))
        rows.append(("Relay / Kannel", f"{outcome.end_to_end_rps / kannel_rate:.2f}x"))
    print(
        f"\nSend API over SMPP, {args.db}, {outcome.messages} messages, "
        f"{args.concurrency} in flight, {args.binds} bind(s) x window {args.window}"
    )
    print("| measure | value |\n|---|---|")
    for name, value in rows:
        print(f"| {name} | {value} |")
    if outcome.webhooks < outcome.messages:
        raise SystemExit("not every message was reported delivered")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--binds", type=int, default=2)
    parser.add_argument("--window", type=int, default=64)
    parser.add_argument("--db", choices=["sqlite", "pg"], default="sqlite")
    parser.add_argument("--kannel", action="store_true", help="measure Kannel side by side")
    parser.add_argument("--smoke", action="store_true", help="200 messages, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.concurrency = 200, 16
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
