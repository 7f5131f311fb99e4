"""`relay serve` keeps its data directory to the user running it: the directory 0700,
every file in it 0600, and an existing directory open to others left alone, with a warning."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.e2e.serving import Serving, relay_serve


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def sqlite_in(data_dir: Path) -> str:
    return f"sqlite:///{data_dir / 'relay.sqlite3'}"


def write_something(serving: Serving) -> None:
    """A verification created: the database's WAL has a page to hold."""
    with serving.client(serving.account["test_key"]) as api:
        answer = api.post("/v1/verifications", json={"to": "+14155550123"})
    assert answer.status_code in (200, 201), answer.text


def test_a_fresh_data_directory_and_every_file_in_it_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    # No code key given: Relay makes code.key itself.
    with relay_serve(tmp_path, sqlite_in(data_dir), "--demo", RELAY_CODE_KEY="") as serving:
        write_something(serving)
        modes = {
            path.relative_to(data_dir).as_posix(): oct(mode(path))
            for path in data_dir.rglob("*")
            if path.is_file()
        }
        assert {
            "relay.sqlite3",
            "relay.sqlite3-wal",
            "relay.sqlite3-shm",
            "code.key",
            "demo-account.json",
            "tls/cert.pem",
            "tls/key.pem",
        } <= set(modes), modes
        assert modes == dict.fromkeys(modes, oct(0o600))
        assert {
            path.relative_to(data_dir).as_posix(): oct(mode(path))
            for path in [data_dir, *data_dir.rglob("*")]
            if path.is_dir()
        } == {".": oct(0o700), "tls": oct(0o700)}
    assert "warning" not in serving.stderr.read_text()


def test_a_data_directory_open_to_others_is_left_as_it_is_with_one_warning(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    # Open to others on purpose: the case the warning is for.
    os.chmod(data_dir, 0o755)  # noqa: S103
    with relay_serve(tmp_path, sqlite_in(data_dir)) as serving:
        write_something(serving)
    warnings = [line for line in serving.stderr.read_text().splitlines() if "warning" in line]
    assert len(warnings) == 1, warnings
    assert str(data_dir) in warnings[0]
    assert "0755" in warnings[0]
    assert mode(data_dir) == 0o755
    assert mode(data_dir / "relay.sqlite3") == 0o600
