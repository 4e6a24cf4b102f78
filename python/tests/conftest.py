"""Shared fixtures: the `bfq` command line built from this workspace, to compare the package against."""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
from typing import List

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _candidates() -> List[pathlib.Path]:
    out = []
    if os.environ.get("BFQ_BIN"):
        out.append(pathlib.Path(os.environ["BFQ_BIN"]))
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    out.append(target / "release" / "bfq")
    return out


@pytest.fixture(scope="session")
def bfq_bin() -> str:
    """Path of the `bfq` binary: $BFQ_BIN, else the workspace's release build (built here if missing)."""
    for c in _candidates():
        if c.is_file():
            return str(c)
    if shutil.which("cargo") is None:
        pytest.fail("no bfq binary: set BFQ_BIN or build it with `cargo build --release -p bfq`")
    subprocess.run(["cargo", "build", "--release", "-p", "bfq"], cwd=ROOT, check=True)
    for c in _candidates():
        if c.is_file():
            return str(c)
    pytest.fail("cargo build did not produce the bfq binary")


@pytest.fixture(scope="session")
def cli(bfq_bin: str):
    """Runs the `bfq` command line and returns the completed process (text mode)."""

    def run(*args: str, cwd: "os.PathLike[str] | str | None" = None) -> subprocess.CompletedProcess:
        return subprocess.run([bfq_bin, *args], capture_output=True, text=True, cwd=cwd)

    return run
