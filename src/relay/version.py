"""Relay's version: the one in pyproject.toml, read from the installed distribution's metadata."""

from __future__ import annotations

from importlib.metadata import version

DISTRIBUTION = "relay-otp"
VERSION = version(DISTRIBUTION)
