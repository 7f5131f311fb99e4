"""Fixtures shared by the carrier tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.carriers.smpp_peer import install_peer


@pytest.fixture(scope="session")
def peer_dir(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """node-smpp installed once per lockfile (npm ci into a cache, never the source tree)."""
    cache = getattr(pytestconfig, "cache", None)
    root = cache.mkdir("smpp-peer") if cache is not None else tmp_path_factory.mktemp("npm")
    return install_peer(Path(root))
