"""The app `relay serve` builds, from the same RELAY_* settings, as a factory another
server can import (bench/servers.py runs it under uvicorn)."""

from __future__ import annotations

from starlette.applications import Starlette

from relay.cli.serve import process_app
from relay.config import load_settings


def app() -> Starlette:
    return process_app(load_settings())
