"""Schemathesis drives the served OpenAPI document: no 5xx, no answer that contradicts it,
and no request the document calls invalid is accepted."""

from __future__ import annotations

import os
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
    ]
)


def test_the_openapi_document_holds_under_generated_requests(
    server: RunningServer, account: NewAccount, tmp_path: Path
) -> None:
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
            "15",
            "--seed",
            "20261120",
            "--workers",
            "1",
            "--max-time",
            "60",
            "--no-color",
            "--generation-database",
            ":memory:",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        check=False,
    )
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert "No issues found" in result.stdout or "passed" in result.stdout, report
