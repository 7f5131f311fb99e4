"""A real SMSC for the SMPP carrier tests: node-smpp's server, in a subprocess.

`install_peer` installs the pinned npm package once per lockfile into a cache
directory (never into the source tree) with `npm ci`; `SmppPeer.start` runs
`smpp_peer_node/peer.js` on a free loopback port. The peer is scripted by a
JSON config and commands, and reports every PDU it sees as a JSON event.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import hashlib
import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SOURCE = Path(__file__).parent / "smpp_peer_node"
_MANIFESTS = ("package.json", "package-lock.json")
_NPM_TIMEOUT = 300.0
_START_TIMEOUT = 10.0

Event = dict[str, Any]


def install_peer(cache_root: Path) -> Path:
    """A directory holding peer.js and its node_modules; installs on first use."""
    for tool in ("node", "npm"):
        if shutil.which(tool) is None:
            pytest.fail(f"the SMPP tests need `{tool}` (Node.js 18+) on PATH to run their SMSC")
    digest = hashlib.sha256(b"".join((SOURCE / name).read_bytes() for name in _MANIFESTS))
    target = cache_root / f"smpp-peer-{digest.hexdigest()[:16]}"
    target.mkdir(parents=True, exist_ok=True)
    with _locked(cache_root / "smpp-peer.lock"):
        if not (target / "node_modules" / "smpp" / "package.json").is_file():
            for name in _MANIFESTS:
                shutil.copyfile(SOURCE / name, target / name)
            _npm_ci(target)
        shutil.copyfile(SOURCE / "peer.js", target / "peer.js")
    return target


def _npm_ci(directory: Path) -> None:
    command = ["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"]
    try:
        done = subprocess.run(
            command, cwd=directory, capture_output=True, text=True, timeout=_NPM_TIMEOUT
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`npm ci` for the SMPP test peer took over {_NPM_TIMEOUT:.0f}s")
    if done.returncode != 0:
        pytest.fail(f"`npm ci` for the SMPP test peer failed:\n{done.stdout}\n{done.stderr}")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    # Parallel test workers share the cache: one installs, the others wait.
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class SmppPeer:
    """One running peer; `events` holds everything it reported, in order."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self.events: list[Event] = []
        self.port = 0
        self._changed = asyncio.Condition()
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, directory: Path, **config: Any) -> SmppPeer:
        process = await asyncio.create_subprocess_exec(
            "node",
            str(directory / "peer.js"),
            json.dumps(config),
            cwd=directory,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        peer = cls(process)
        try:
            listening = await peer.wait_for("listening", within=_START_TIMEOUT)
        except BaseException:
            await peer.stop()
            raise
        peer.port = int(listening["port"])
        return peer

    def carrier_table(self, **settings: Any) -> dict[str, Any]:
        """A `[carriers.NAME]` table binding Relay to this peer, with `settings` added."""
        return {
            "kind": "smpp",
            "host": "127.0.0.1",
            "port": self.port,
            "system_id": "relay",
            "password": "secret",
            "response_timeout": 5.0,  # no test waits it out; generous for loaded CI
            "reconnect_backoff": [0.05, 0.2],
            **settings,
        }

    def seen(self, event: str, **match: Any) -> list[Event]:
        return [item for item in self.events if _matches(item, event, match)]

    async def wait_for(
        self, event: str, *, count: int = 1, within: float = 3.0, **match: Any
    ) -> Event:
        """The `count`-th event named `event` whose fields include `match`."""

        def enough() -> bool:
            return len(self.seen(event, **match)) >= count

        try:
            async with asyncio.timeout(within), self._changed:
                await self._changed.wait_for(enough)
        except TimeoutError:
            raise AssertionError(
                f"peer never reported {count} x {event} {match}; it reported {self.events}"
            ) from None
        return self.seen(event, **match)[count - 1]

    async def command(self, cmd: str, **fields: Any) -> None:
        """Send a command and wait until the peer has carried it out."""
        done_before = len(self.seen("done", cmd=cmd))
        stdin = self._process.stdin
        assert stdin is not None
        stdin.write((json.dumps({"cmd": cmd, **fields}) + "\n").encode())
        await stdin.drain()
        await self.wait_for("done", cmd=cmd, count=done_before + 1)

    async def stop(self) -> None:
        if self._process.returncode is None:
            self._process.kill()
        await self._process.wait()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader

    async def _read(self) -> None:
        stdout = self._process.stdout
        assert stdout is not None
        async for raw in stdout:
            line = raw.decode(errors="replace").strip()
            try:
                item = json.loads(line)
            except json.JSONDecodeError:
                item = {"event": "output", "line": line}
            async with self._changed:
                self.events.append(item)
                self._changed.notify_all()


def _matches(item: Event, event: str, match: dict[str, Any]) -> bool:
    return item.get("event") == event and all(item.get(k) == v for k, v in match.items())
