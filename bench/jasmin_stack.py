"""Jasmin 0.11.0 and what it needs, as child processes of the reference bench.

Jasmin is installed from PyPI at bench time into a virtual environment of its
own, beside the SMSC's node modules in the bench cache (`~/.cache/relay-bench`,
outside the repository). Each run gets a RabbitMQ vhost of its own on the
machine's broker (deleted after), a `redis-server` of its own on a free port
(Jasmin 0.11.0 selects its configured Redis `dbid` only when a password is set,
so on a shared server it would write into db 0), and `jasmind` with the DLR
lookup and the DLR thrower in process, configured over jCli: SMPP connectors
to the SMSC, a user in a group, an MT route to the connectors.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import re
import secrets
import shutil
import socket
import string
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from bench.kannel_boxes import free_port, spawn

VERSION = "0.11.0"  # 0.11.1 loses every receipt (Jasmin's issue #1236)
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "relay-bench"
VENV = CACHE / f"jasmin-{VERSION}"
TEMPLATE = Path(__file__).resolve().parent / "jasmin" / "jasmin.cfg.template"
NODELAY = TEMPLATE.parent / "nodelay"
AMQP_PORT = 5672
VHOST_PREFIX = "relay-bench-jasmin-"
USERNAME, PASSWORD = "bench", secrets.token_hex(4)  # the HTTP API takes at most 16 characters
# The ports jasmind listens on besides Redis, RabbitMQ and the SMSC: one each, chosen free.
PORTS = ("smpp_server", "smpp_server_pb", "client_management", "router", "http", "jcli")
LOCK = Path("/tmp/jasmind.lock")  # jasmind's own: one jasmind per machine
_SBIN = ("/usr/sbin", "/usr/local/sbin")
_START_TIMEOUT = 60.0
_PIP_TIMEOUT = 900.0


class JasminUnavailable(RuntimeError):
    """Why Jasmin cannot be measured on this machine (reported as skipped, never faked)."""


@dataclass(frozen=True)
class JasminOptions:
    concurrency: int = 64  # HTTP API requests in flight
    log_level: str = "WARNING"
    dlr_retry_delay: int = 1  # seconds; Jasmin's default is 10
    # Lookups in all, the first included (Jasmin's default 2 is a single retry): ten
    # a second apart still match a receipt whose message id is stored 9 s late.
    dlr_max_retries: int = 10
    connectors: int = 1  # SMPP binds, each with one submit in flight
    # Not stock Jasmin: TCP_NODELAY on every socket Twisted opens (bench/jasmin/nodelay).
    tcp_nodelay: bool = False


def _which(name: str) -> str | None:
    return shutil.which(name, path=os.pathsep.join([os.environ.get("PATH", ""), *_SBIN]))


def missing() -> str | None:
    """What this machine lacks to run Jasmin (without installing anything), or None."""
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", AMQP_PORT), 2):
        if _which("rabbitmqctl") is None:
            return "rabbitmqctl is not on PATH (a vhost of its own needs it)"
        if _which("redis-server") is None:
            return "redis-server is not installed (apt-get install -y redis-server)"
        return None
    return (
        f"RabbitMQ is not reachable on 127.0.0.1:{AMQP_PORT} (apt-get install -y rabbitmq-server)"
    )


def venv_python() -> Path:
    return VENV / "bin" / "python"


def installed_version() -> str | None:
    if not venv_python().is_file():
        return None
    done = subprocess.run(
        [str(venv_python()), "-c", "import jasmin; print(jasmin.get_release())"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_jasmin() -> Path:
    """The venv's jasmind.py, installing Jasmin from PyPI first when it is not there."""
    CACHE.mkdir(parents=True, exist_ok=True)
    # Worktrees and CI share the cache: one installs, the others wait.
    with (CACHE / "jasmin.lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _install()
    return VENV / "bin" / "jasmind.py"


def _install() -> None:
    if installed_version() != VERSION:
        shutil.rmtree(VENV, ignore_errors=True)
        VENV.parent.mkdir(parents=True, exist_ok=True)
        print(f"installing jasmin=={VERSION} into {VENV}", file=sys.stderr)
        steps = [
            [sys.executable, "-m", "venv", str(VENV)],
            [str(venv_python()), "-m", "pip", "install", "--quiet", f"jasmin=={VERSION}"],
        ]
        for command in steps:
            done = subprocess.run(command, capture_output=True, text=True, timeout=_PIP_TIMEOUT)
            if done.returncode != 0:
                tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-8:])
                raise JasminUnavailable(f"{' '.join(command[-3:])} failed:\n{tail}")
        if installed_version() != VERSION:
            raise JasminUnavailable(f"jasmin=={VERSION} installed but does not import")


def amqp_spec() -> Path:
    """The AMQP 0-9-1 spec txamqp ships (Jasmin's own copy is in its sdist only)."""
    found = sorted(VENV.glob("lib/python*/site-packages/txamqp/specs/standard/amqp0-9-1*.xml"))
    if not found:
        raise JasminUnavailable("txamqp's AMQP 0-9-1 spec is missing from the Jasmin venv")
    return found[0]


async def _rabbitmqctl(*args: str) -> str:
    command = [_which("rabbitmqctl") or "rabbitmqctl", "-q", *args]
    done = await asyncio.to_thread(
        subprocess.run, command, capture_output=True, text=True, timeout=120
    )
    if done.returncode != 0:
        raise JasminUnavailable(f"rabbitmqctl {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


async def own_vhost(stack: contextlib.AsyncExitStack) -> str:
    """A RabbitMQ vhost for this run alone, deleted on exit (and any a killed run left)."""
    for name in _left_behind((await _rabbitmqctl("list_vhosts")).split()):
        await _rabbitmqctl("delete_vhost", name)
    vhost = f"{VHOST_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
    await _rabbitmqctl("add_vhost", vhost)
    stack.push_async_callback(_drop_vhost, vhost)
    await _rabbitmqctl("set_permissions", "-p", vhost, "guest", ".*", ".*", ".*")
    return vhost


async def _drop_vhost(vhost: str) -> None:
    try:
        await _rabbitmqctl("delete_vhost", vhost)
    except (JasminUnavailable, subprocess.TimeoutExpired) as error:
        # The measurement stands; the next run deletes the vhost of a run that is gone.
        print(f"warning: {error}", file=sys.stderr)


def _left_behind(vhosts: list[str]) -> list[str]:
    """This bench's vhosts whose run (the pid in their name) is gone."""
    pattern = re.compile(re.escape(VHOST_PREFIX) + r"(\d+)-[0-9a-f]+")
    found = [(name, pattern.fullmatch(name)) for name in vhosts]
    return [name for name, match in found if match and not os.path.exists(f"/proc/{match[1]}")]


async def own_redis(stack: contextlib.AsyncExitStack, work: Path) -> int:
    port = free_port()
    command = [_which("redis-server") or "redis-server", "--bind", "127.0.0.1", "--port", str(port)]
    command += ["--save", "", "--appendonly", "no", "--dir", str(work)]
    with (work / "redis.out").open("wb") as out:
        process = await spawn(stack, command, work, out)
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        if process.returncode is not None:
            raise RuntimeError(f"redis-server exited: {(work / 'redis.out').read_text()}")
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(2):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"PING\r\n")
                answer = await reader.readline()
                writer.close()
            if answer.startswith(b"+PONG"):
                return port
        await asyncio.sleep(0.1)
    raise RuntimeError("redis-server did not answer PING")


def running_jasmind() -> str | None:
    """The pid of a jasmind running on this machine, if any."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if any(
                Path(os.fsdecode(arg)).name == "jasmind.py"
                for arg in cmdline.read_bytes().split(b"\0")
            ):
                return cmdline.parent.name
    return None


def clear_stale_lock(lock: Path = LOCK) -> None:
    """jasmind's machine-wide lock, left behind by a jasmind that was killed."""
    if not lock.exists():
        return
    if (pid := running_jasmind()) is not None:
        raise JasminUnavailable(f"another jasmind runs on this machine (pid {pid})")
    for sibling in lock.parent.iterdir():
        with contextlib.suppress(OSError):
            if sibling != lock and sibling.samefile(lock):
                sibling.unlink()
    lock.unlink(missing_ok=True)


async def start_jasmin(
    stack: contextlib.AsyncExitStack, work: Path, peer_port: int, options: JasminOptions
) -> int:
    """jasmind bound to the SMSC at `peer_port`, configured: returns its HTTP API port."""
    jasmind = await asyncio.to_thread(ensure_jasmin)
    clear_stale_lock()
    vhost = await own_vhost(stack)
    redis_port = await own_redis(stack, work)
    ports = {name: free_port() for name in PORTS}
    config = work / "jasmin.cfg"
    config.write_text(render_config(ports, vhost, amqp_spec(), redis_port, options))
    for directory in ("log", "store"):
        (work / directory).mkdir(exist_ok=True)
    # Only what Jasmin reads: its config keys can also come from variables named after them.
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(work),
        "ROOT_PATH": str(work),
        "CONFIG_PATH": str(work),
        "LOG_PATH": str(work / "log"),
        "STORE_PATH": str(work / "store"),
    }
    if options.tcp_nodelay:
        env["PYTHONPATH"] = str(NODELAY)
    flags = ["--enable-dlr-lookup", "--enable-dlr-thrower"]
    command = [str(venv_python()), str(jasmind), "-c", str(config), *flags]
    out_path = work / "jasmind.out"
    with out_path.open("wb") as out:
        process = await spawn(stack, command, work, out, env=env)
    await _wait_started(process, out_path)
    await configure(ports["jcli"], peer_port, options)
    return ports["http"]


def render_config(
    ports: dict[str, int], vhost: str, spec: Path, redis_port: int, options: JasminOptions
) -> str:
    """jasmind's config file: bench/jasmin/jasmin.cfg.template with this run's fields."""
    return string.Template(TEMPLATE.read_text()).substitute(
        **{f"{name}_port": port for name, port in ports.items()},
        amqp_port=AMQP_PORT,
        amqp_vhost=vhost,
        amqp_spec=spec,
        redis_port=redis_port,
        log_level=options.log_level,
        dlr_retry_delay=options.dlr_retry_delay,
        dlr_max_retries=options.dlr_max_retries,
    )


async def _wait_started(process: asyncio.subprocess.Process, out: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT
    while time.monotonic() < deadline:
        text = await asyncio.to_thread(out.read_text, errors="replace")
        failed = [line for line in text.splitlines() if "Cannot " in line or "Lock not" in line]
        if failed or process.returncode is not None:
            raise RuntimeError(f"jasmind did not start: {failed or text[-2000:]}")
        if "jCli Started." in text:
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("jasmind did not start its jCli")


async def configure(jcli_port: int, peer_port: int, options: JasminOptions) -> None:
    """The connectors (no submit throttle), the user and an MT route to them, over jCli."""
    session = await JCli.open(jcli_port)
    cids = [f"smsc{number}" for number in range(1, options.connectors + 1)]
    try:
        for cid in cids:
            await session.add(
                "smppccm",
                cid=cid,
                host="127.0.0.1",
                port=peer_port,
                username="relay",
                password="secret",  # noqa: S106 - the test SMSC's, as in its carrier tests
                # Jasmin's default is 1 submit a second; 0 lifts the throttle.
                submit_throughput=0,
                loglevel=logging.getLevelName(options.log_level),
            )
            await session.run(f"smppccm -1 {cid}", expect="Successfully started")
        await session.add("group", gid="bench")
        await session.add("user", username=USERNAME, password=PASSWORD, gid="bench", uid="bench")
        if len(cids) == 1:
            await session.add(
                "mtrouter", type="defaultroute", connector=f"smppc({cids[0]})", rate=0
            )
        else:
            await session.add("filter", fid="all", type="transparentfilter")
            connectors = ";".join(f"smppc({cid})" for cid in cids)
            route = {"connectors": connectors, "filters": "all", "rate": 0}
            await session.add("mtrouter", type="randomroundrobinmtroute", order=10, **route)
        deadline = time.monotonic() + _START_TIMEOUT
        while (await session.run("smppccm -l")).count("BOUND_TRX") < len(cids):
            if time.monotonic() > deadline:
                raise RuntimeError("Jasmin's SMPP connectors did not all bind to the SMSC")
            await asyncio.sleep(0.2)
    finally:
        await session.close()


class JCli:
    """jasmind's management console: a telnet session whose prompts end in `jcli : ` or `> `."""

    _PROMPT = re.compile(rb"(jcli : |> )$")

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader, self._writer = reader, writer
        self._buffer = b""

    @classmethod
    async def open(cls, port: int) -> JCli:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        session = cls(reader, writer)
        # The banner ends without a prompt; an empty line brings the first one.
        await asyncio.sleep(0.2)
        await session.run("")
        return session

    async def run(self, line: str, expect: str | None = None) -> str:
        self._writer.write(line.encode() + b"\r\n")
        async with asyncio.timeout(30):
            while not self._PROMPT.search(self._buffer):
                chunk = await self._reader.read(65536)
                if not chunk:
                    raise RuntimeError(f"jCli closed the session after {line!r}")
                self._buffer += chunk
        answer, self._buffer = self._buffer.replace(b"\r", b"").decode(errors="replace"), b""
        if expect is not None and expect not in answer:
            raise RuntimeError(f"jCli {line!r} answered: {answer.strip()}")
        return answer

    async def add(self, manager: str, **fields: object) -> None:
        await self.run(f"{manager} -a")
        for key, value in fields.items():
            await self.run(f"{key} {value}")
        await self.run("ok", expect="Successfully added")

    async def close(self) -> None:
        self._writer.close()
        with contextlib.suppress(ConnectionError):
            await self._writer.wait_closed()
