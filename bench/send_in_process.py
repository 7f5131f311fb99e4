"""The Send API end to end in this process: CPU per message, request to webhook, no wrk, no TLS in.

What one message costs Relay, with the HTTP server and the load generator
taken out (bench/smpp_bench.py measures it through them, at the mercy of the
machine's load). The real app (every middleware, the router, the services) is
called as an ASGI app, over SQLite, with one SMPP carrier bound to node-smpp
(the peer of the test suite, in a process of its own) and webhooks posted over
TLS to bench/webhook_sink.py (a process of its own). `--messages` sends go in
with `--concurrency` in flight; the run ends when the sink has every
`message.delivered`. Reported: CPU of this process per message (the SMPP peer
and the sink are other processes), and how much of it was spent by the time
the last request was answered; the wall rates; SQL statements per message.
Where the CPU goes by stage: py-spy on this process (`py-spy record -f raw`).

Usage:
  .venv/bin/python bench/send_in_process.py [--messages 3000] [--concurrency 64] [--sql]
  .venv/bin/python bench/send_in_process.py --smoke     # a few messages, for CI
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import ssl
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402
from bench.in_process import CODE_KEY, call  # noqa: E402
from bench.smpp_bench import relay_env, sink, write_config  # noqa: E402
from bench.webhook_bench import _loop_factory  # noqa: E402
from tests.carriers.smpp_peer import SmppPeer, install_peer  # noqa: E402

from relay.config import load_settings  # noqa: E402
from relay.db.migrate import upgrade  # noqa: E402
from relay.db.sql import Sql  # noqa: E402
from relay.services import build_services  # noqa: E402
from relay.tls import ensure_self_signed  # noqa: E402
from relay.web.app import create_app  # noqa: E402

_numbers = itertools.count(random.randint(2_000_000, 5_000_000))


def configure(work: Path, peer_port: int, hook_ca: Path) -> None:
    """The environment `relay serve` gets from bench/smpp_bench.py."""
    config = write_config(work, peer_port, binds=2, window=64)
    database_url = f"sqlite:///{work / 'relay.sqlite3'}"
    os.environ.update(
        {**relay_env(config, work, database_url, hook_ca), "RELAY_CODE_KEY": CODE_KEY}
    )


async def measure(args: argparse.Namespace, hook: str, sink_url: str, sink_cert: Any) -> None:
    settings = load_settings()
    upgrade(settings.resolved_database_url)
    services = build_services(settings)
    key = (await services.accounts.create_account("Bench")).live_key
    app = create_app(services)
    statements: Counter[str] = Counter()

    def count(statement: Sql, _: object) -> None:
        statements[statement.sqlite] += 1

    gate = asyncio.Semaphore(args.concurrency)

    async def send() -> None:
        to = f"+1415{next(_numbers)}"
        body = json.dumps({"to": to, "code": "123456", "webhook_url": hook}).encode()
        async with gate:
            status, answer = await call(app, "POST", "/v1/messages", body, key)
        assert status == 200, answer

    # The sink is another process, asked from a thread over one kept connection:
    # its polling is this process's CPU too.
    client = httpx.Client(verify=ssl.create_default_context(cafile=str(sink_cert.cert)))

    def counted() -> int:
        return int(client.get(f"{sink_url}/stats").json()["counts"].get("message.delivered", 0))

    async def delivered(count: int) -> None:
        while True:
            if await asyncio.to_thread(counted) >= count:
                return
            await asyncio.sleep(0.1)

    async with app.router.lifespan_context(app):
        for _ in range(args.warmup):
            await send()
        await delivered(args.warmup)
        await asyncio.sleep(0.5)
        services.db.trace(count)
        started, cpu = time.perf_counter(), time.process_time()
        await asyncio.gather(*(send() for _ in range(args.messages)))
        answered_cpu = time.process_time() - cpu
        answered = time.perf_counter() - started
        await delivered(args.warmup + args.messages)
        wall = time.perf_counter() - started
        used = time.process_time() - cpu
    await asyncio.to_thread(client.close)  # the sink waits for its connections to close
    n = args.messages
    print(
        f"messages={n} concurrency={args.concurrency} (ASGI app in-process; SMSC and sink apart)\n"
        f"| end to end msg/s | CPU µs per message | of which until the last answer"
        f" | requests/s | statements per message |\n|---|---|---|---|---|\n"
        f"| {n / wall:,.0f} | {used / n * 1e6:,.0f} | {answered_cpu / n * 1e6:,.0f}"
        f" | {n / answered:,.0f} | {statements.total() / n:.1f} |"
    )
    if args.sql:
        print("\n| per message | statement (BEGIN, COMMIT and savepoints not counted) |\n|---|---|")
        for sql, times in statements.most_common():
            print(f"| {times / n:.2f} | `{sql[:110]}` |")


async def main_async(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="relay-send-inproc-") as tmp:
        work = Path(tmp)
        peer_dir = install_peer(Path.home() / ".cache" / "relay-bench")
        peer = await SmppPeer.start(peer_dir, receipt={"stat": "DELIVRD", "form": "tlv"})
        hook_cert = ensure_self_signed(work / "sink-tls")
        try:
            with sink(hook_cert) as hook_url:
                configure(work, peer.port, hook_cert.cert)
                await measure(args, f"{hook_url}/hook", hook_url, hook_cert)
        finally:
            await peer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=200)
    parser.add_argument("--sql", action="store_true", help="each statement's count per message")
    parser.add_argument("--smoke", action="store_true", help="a few messages, for CI")
    args = parser.parse_args()
    if args.smoke:
        args.messages, args.concurrency, args.warmup = 40, 8, 5
    # The same event loop as `relay serve` (uvicorn runs uvloop when installed).
    with asyncio.Runner(loop_factory=_loop_factory()) as runner:
        runner.run(main_async(args))


if __name__ == "__main__":
    main()
