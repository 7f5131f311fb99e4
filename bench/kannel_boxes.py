"""Kannel's boxes and the SMPP peer they bind to, as child processes of the reference bench.

Every process is tied to this one's life (`PR_SET_PDEATHSIG`) and stopped on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = Path(__file__).resolve().parent / "kannel" / "kannel.conf.template"
INSTALL_COMMAND = ["apt-get", "install", "-y", "kannel"]
# Debian puts the boxes in /usr/sbin, which a non-root PATH often lacks.
_SBIN = ("/usr/sbin", "/usr/local/sbin")
_PEER_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relay-bench"
_START_TIMEOUT = 30.0
SENDSMS_PASSWORD = secrets.token_hex(8)


class KannelMissing(RuntimeError):
    pass


def find_boxes() -> tuple[str, str] | None:
    """Paths of bearerbox and smsbox, or None when Kannel is not installed."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN])
    bearerbox, smsbox = shutil.which("bearerbox", path=path), shutil.which("smsbox", path=path)
    return (bearerbox, smsbox) if bearerbox and smsbox else None


def install_kannel() -> None:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=env)
    subprocess.run(INSTALL_COMMAND, check=True, env=env)


def kannel_version() -> str:
    done = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "kannel"], capture_output=True, text=True
    )
    return done.stdout.strip() if done.returncode == 0 else "unknown"


@dataclass(frozen=True)
class KannelOptions:
    window: int = 10  # max-pending-submits, as Relay's SmppSettings.window
    concurrency: int = 64  # sendsms requests in flight
    log_level: int = 2
    store: str = "none"  # or "file" / "spool": bearerbox's message store


def install_peer_once() -> Path:
    # One pinned install shared with the carrier tests' logic (npm ci, cached by lockfile).
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from tests.carriers.smpp_peer import install_peer

    return Path(install_peer(_PEER_CACHE))


async def start_peer(stack: contextlib.AsyncExitStack, peer_dir: Path, work: Path) -> int:
    config = {"receipt": {"stat": "DELIVRD", "form": "text"}}
    # The peer reports every PDU on stdout; a file takes that without a reader in this
    # process competing with Kannel for the two cores.
    log = work / "peer.jsonl"
    with log.open("wb") as out:
        process = await spawn(
            stack, ["node", str(peer_dir / "peer.js"), json.dumps(config)], peer_dir, out
        )
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"the SMPP peer exited: {log.read_text()}")
        with log.open() as lines:
            for line in lines:
                with contextlib.suppress(json.JSONDecodeError):
                    event = json.loads(line)
                    if event.get("event") == "listening":
                        return int(event["port"])
        await asyncio.sleep(0.05)
    raise RuntimeError("the SMPP peer did not start listening")


async def start_kannel(
    stack: contextlib.AsyncExitStack,
    boxes: tuple[str, str],
    work: Path,
    peer_port: int,
    options: KannelOptions,
) -> int:
    bearerbox, smsbox = boxes
    admin_port, smsbox_port, sendsms_port = free_port(), free_port(), free_port()
    admin_password = secrets.token_hex(8)
    conf = work / "kannel.conf"
    conf.write_text(
        string.Template(TEMPLATE.read_text()).substitute(
            admin_port=admin_port,
            admin_password=admin_password,
            smsbox_port=smsbox_port,
            sendsms_port=sendsms_port,
            sendsms_password=SENDSMS_PASSWORD,
            peer_port=peer_port,
            window=options.window,
            log_dir=work,
            log_level=options.log_level,
            store=_store_lines(options.store, work),
        )
    )
    admin = f"http://127.0.0.1:{admin_port}"
    # The console has its own level (-v), debug unless told: every PDU again, on stderr.
    verbosity = ["-v", str(options.log_level)]
    with (work / "bearerbox.out").open("wb") as out:
        bearer = await spawn(stack, [bearerbox, *verbosity, str(conf)], work, out)
    await _wait_online(admin, admin_password, [bearer], box=False)
    with (work / "smsbox.out").open("wb") as out:
        sms = await spawn(stack, [smsbox, *verbosity, str(conf)], work, out)
    await _wait_online(admin, admin_password, [bearer, sms], box=True)
    await wait_listening(sendsms_port)
    return sendsms_port


def _store_lines(store: str, work: Path) -> str:
    # Never an empty line: a blank line ends a Kannel config group.
    if store == "none":
        return "# no message store"
    location = work / ("store.d" if store == "spool" else "store.dat")
    if store == "spool":
        location.mkdir()
    return f'store-type = {store}\nstore-location = "{location}"'


async def _wait_online(
    admin: str, password: str, processes: list[asyncio.subprocess.Process], *, box: bool
) -> None:
    """Until the SMPP bind is up (and, with `box`, an smsbox is connected)."""
    deadline = time.monotonic() + _START_TIMEOUT
    status = ""
    async with httpx.AsyncClient(timeout=2) as client:
        while time.monotonic() < deadline:
            if any(process.returncode is not None for process in processes):
                raise RuntimeError("a Kannel box exited during start")
            with contextlib.suppress(httpx.TransportError):
                response = await client.get(f"{admin}/status.txt", params={"password": password})
                status = response.text
                online = any(
                    line.strip().startswith("peer") and "online" in line
                    for line in status.splitlines()
                )
                if online and (not box or "smsbox:" in status):
                    return
            await asyncio.sleep(0.1)
    raise RuntimeError(f"Kannel did not come online; last status:\n{status}")


async def wait_listening(port: int) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.1)
            continue
        writer.close()
        await writer.wait_closed()
        return
    raise RuntimeError(f"nothing listens on port {port}")


async def spawn(
    stack: contextlib.AsyncExitStack,
    command: list[str],
    cwd: Path,
    out: IO[bytes],
    env: dict[str, str] | None = None,
) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
        # A pipe that stays open: the peer takes end-of-input as its signal to exit.
        stdin=subprocess.PIPE,
        stdout=out,
        stderr=subprocess.STDOUT,
        preexec_fn=_die_with_parent,
    )
    stack.push_async_callback(_stop, process)
    return process


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        try:
            async with asyncio.timeout(10):
                await process.wait()
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
    if process.stdin is not None:
        process.stdin.close()


def _die_with_parent() -> None:
    # Even a SIGKILLed bench leaves no bearerbox bound to the peer behind.
    libc = ctypes.CDLL(None, use_errno=True)
    pr_set_pdeathsig = 1
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


async def close_server(server: asyncio.Server) -> None:
    server.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(2):
            await server.wait_closed()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def print_logs(work: Path) -> None:
    for name in ("bearerbox.log", "smsbox.log", "bearerbox.out", "smsbox.out"):
        path = work / name
        if path.is_file():
            tail = path.read_text(errors="replace").splitlines()[-20:]
            print(f"--- {name} (last lines)", *tail, sep="\n", file=sys.stderr)
