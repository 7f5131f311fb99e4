"""A module's own server with the console's admin token set, for the console's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness import RunningServer, ServerThread, test_settings


def admin_console_server(
    tmp_path_factory: pytest.TempPathFactory, database_url: str, admin_token: str
) -> Iterator[RunningServer]:
    """Runs until the generator is closed; sign-ins are budgeted loosely, since a module's
    tests sign in many times from one address."""
    settings = test_settings(
        tmp_path_factory.mktemp("data"),
        database_url,
        admin_token=admin_token,
        console_signin_burst=50,
    )
    with ServerThread(settings) as running:
        yield running
