"""The data directory and the files Relay makes in it, readable by the account running Relay
only: they hold the database, the code key, the TLS private key and the demo account's keys.

Modes are given at creation, whatever the process umask: a file is never open to
others, not even between its creation and a chmod. What exists already is left as
it is; the operator chose it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIRECTORY_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> str | None:
    """Makes `path` with mode 0700 if it does not exist (its parents as usual). An
    existing directory is left unchanged; the answer is a warning when others may
    read or enter it, otherwise None."""
    try:
        path.mkdir(mode=DIRECTORY_MODE, parents=True)
    except FileExistsError:
        if not path.is_dir():
            raise
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o077:
            return (
                f"warning: data directory {path} is open to other users (mode {mode:04o});"
                f" `chmod 700 {path}` keeps its keys and database to this user"
            )
        return None
    # mkdir's mode passes through the umask, which may leave out owner bits.
    path.chmod(DIRECTORY_MODE)
    return None


def create_private(path: Path) -> bool:
    """Makes `path` an empty file with mode 0600 unless it exists; whether it made it."""
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return False
    os.close(descriptor)
    return True


def write_private(path: Path, data: bytes) -> None:
    """Writes `data` to a file that is 0600 from its first byte; an existing file keeps
    its mode."""
    create_private(path)
    path.write_bytes(data)
