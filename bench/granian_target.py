"""The app `relay serve` builds, as a factory granian can import (bench/servers.py)."""

from __future__ import annotations

from starlette.applications import Starlette

from relay.cli.serve import process_app
from relay.config import load_settings


def app() -> Starlette:
    return process_app(load_settings())
