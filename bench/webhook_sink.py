"""A webhook receiver for benchmarks: counts events by type, answers 204, nothing else.

Run by bench/smpp_bench.py in a process of its own (uvicorn, TLS), so that
receiving webhooks does not compete with the load generator for one
interpreter. `GET /stats` answers `{"counts": {type: n}, "first": seconds,
"last": seconds, "paths": {path: {"count": n, "first": seconds, "last":
seconds}}}`, where `first` and `last` are the monotonic clock (shared by every
process of the machine) of the first and last `message.delivered` or
`verification.delivered` (a bench run sends one of the two), over all paths
and per path (bench/webhook_bench.py posts each of its runs to a path of its
own).

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

DELIVERED = {"message.delivered", "verification.delivered"}
counts: Counter[str] = Counter()
first_delivered = 0.0
last_delivered = 0.0
paths: dict[str, dict[str, float]] = {}


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    global first_delivered, last_delivered
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":
        body = orjson.dumps(
            {"counts": counts, "first": first_delivered, "last": last_delivered, "paths": paths}
        )
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})
        return
    chunks = []
    failing = str(scope["path"]).startswith("/fail")
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    if failing:
        await send({"type": "http.response.start", "status": 500, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    try:
        kind = str(orjson.loads(b"".join(chunks)).get("type", "?"))
    except (orjson.JSONDecodeError, AttributeError):
        # A sender that went away mid-body (http.disconnect): nothing to count.
        await send({"type": "http.response.start", "status": 400, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    counts[kind] += 1
    if kind in DELIVERED:
        last_delivered = time.monotonic()
        first_delivered = first_delivered or last_delivered
        path = paths.setdefault(scope["path"], {"count": 0, "first": last_delivered})
        path["count"] += 1
        path["last"] = last_delivered
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
