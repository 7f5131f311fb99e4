"""Files Relay makes are private whatever the process umask: a mode given at creation."""

from __future__ import annotations

import os
import sqlite3
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from relay.config import Settings
from relay.db.sqlite import connect
from relay.private_files import private_dir
from relay.tls import ensure_self_signed


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.fixture
def open_umask() -> Iterator[None]:
    before = os.umask(0)
    try:
        yield
    finally:
        os.umask(before)


@pytest.mark.usefixtures("open_umask")
def test_every_file_and_directory_made_under_an_open_umask_is_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    assert private_dir(data_dir) is None
    Settings(data_dir=data_dir, code_key=None).code_secret()
    paths = ensure_self_signed(data_dir / "tls")
    connection: sqlite3.Connection = connect(os.fspath(data_dir / "relay.sqlite3"))
    try:
        connection.execute("CREATE TABLE t (x)")
        connection.execute("INSERT INTO t VALUES (1)")
        made = [data_dir / name for name in ("relay.sqlite3", "relay.sqlite3-wal", "code.key")]
        made += [data_dir / "relay.sqlite3-shm", paths.cert, paths.key]
        assert {p.name: oct(mode(p)) for p in made} == {p.name: oct(0o600) for p in made}
    finally:
        connection.close()
    assert oct(mode(data_dir)) == oct(0o700)
    assert oct(mode(data_dir / "tls")) == oct(0o700)


def test_an_existing_directory_open_to_others_is_warned_of_and_not_changed(
    tmp_path: Path,
) -> None:
    tmp_path.chmod(0o750)
    warning = private_dir(tmp_path)
    assert warning is not None
    assert "0750" in warning
    assert mode(tmp_path) == 0o750
    tmp_path.chmod(0o700)
    assert private_dir(tmp_path) is None
