"""A self-signed certificate for ``localhost``, for tests that put a server behind TLS."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest


def self_signed(directory: Path) -> tuple[Path, Path]:
    """``(cert, key)`` made by the openssl command line in ``directory`` (skips without it)."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key
