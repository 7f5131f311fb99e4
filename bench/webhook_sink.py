"""A webhook receiver for benchmarks: counts events by type, answers 204, nothing else.

Run by bench/smpp_bench.py in a process of its own (uvicorn, TLS), so that
receiving webhooks does not compete with the load generator for one
interpreter. `GET /stats` answers `{"counts": {type: n}, "last": seconds}`,
where `last` is the monotonic clock of the last `message.delivered`.

  python bench/webhook_sink.py --port 9443 --cert c.pem --key k.pem
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import orjson
import uvicorn

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

counts: Counter[str] = Counter()
last_delivered = 0.0


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    global last_delivered
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":
        body = orjson.dumps({"counts": counts, "last": last_delivered})
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
        return
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    kind = orjson.loads(b"".join(chunks)).get("type", "?")
    counts[kind] += 1
    if kind == "message.delivered":
        last_delivered = time.monotonic()
    await send({"type": "http.response.start", "status": 204, "headers": []})
    await send({"type": "http.response.body", "body": b""})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=args.port,
        ssl_certfile=args.cert,
        ssl_keyfile=args.key,
        log_level="warning",
        access_log=False,
        lifespan="off",
    )


if __name__ == "__main__":
    main()
