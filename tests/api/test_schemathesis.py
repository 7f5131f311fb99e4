"""Schemathesis drives the served OpenAPI document: no 5xx, no answer that contradicts it,
and no request the document calls invalid is accepted. Its stateful phase follows the
document's links from a create to check, cancel and retrieve.

Short in CI; `RELAY_FUZZ_PROFILE=long` (or `make test-long`) runs many more examples.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from relay.accounts.models import NewAccount
from tests.harness import RunningServer

CHECKS = ",".join(
    [
        "not_a_server_error",
        "status_code_conformance",
        "content_type_conformance",
        "response_schema_conformance",
        "response_headers_conformance",
        "negative_data_rejection",
        "ignored_auth",
        "unsupported_method",
        "ensure_resource_availability",
    ]
)
# (examples per operation, seconds at most per phase, seconds for the whole run)
PROFILES = {"ci": ("15", "60", 240), "long": ("500", "1800", 4 * 3600)}


def profile() -> tuple[str, str, int]:
    name = os.environ.get("RELAY_FUZZ_PROFILE", "ci")
    assert name in PROFILES, f"RELAY_FUZZ_PROFILE must be one of {sorted(PROFILES)}"
    return PROFILES[name]


def test_the_openapi_document_holds_under_generated_requests(
    server: RunningServer, account: NewAccount, tmp_path: Path
) -> None:
    examples, max_time, timeout = profile()
    command = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
    assert command is not None, "schemathesis is a dev dependency"
    result = subprocess.run(
        [
            command,
            "run",
            f"{server.base_url}/v1/openapi.json",
            "--header",
            f"Authorization: Bearer {account.test_key}",
            "--tls-verify",
            os.fspath(server.cert.cert),
            "--checks",
            CHECKS,
            "--max-examples",
            examples,
            "--seed",
            "20261120",
            "--workers",
            "1",
            "--max-time",
            max_time,
            "--no-color",
            "--generation-database",
            ":memory:",
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=tmp_path,
        check=False,
    )
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "No issues found" in result.stdout or "passed" in result.stdout, report
    # The stateful phase ran and followed links from a create to the calls it enables.
    links = re.search(r"API Links:\s+(\d+) covered", result.stdout)
    assert links is not None, report
    assert int(links.group(1)) >= 3, report
