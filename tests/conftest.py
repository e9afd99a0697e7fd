import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "programs"


@pytest.fixture
def lambdad_cli():
    """Run the real command (``python -m lambdad``); returns the CompletedProcess."""

    def run(*args: str, input: str | None = None, timeout: float = 60):
        env = dict(os.environ)
        env.pop("LAMBDAD_DEBUG", None)
        return subprocess.run(
            [sys.executable, "-m", "lambdad", *args],
            capture_output=True, text=True, input=input, timeout=timeout, cwd=ROOT, env=env,
        )

    return run


def pytest_addoption(parser):
    parser.addoption("--long", action="store_true",
                     help="also run the long profile: tests marked `long` (adversarial "
                          "inputs in full, every mutation of every partial)")


def pytest_configure(config):
    config.addinivalue_line("markers", "long: part of the long profile (run with --long)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--long"):
        return
    skip = pytest.mark.skip(reason="long profile: run with --long")
    for item in items:
        if "long" in item.keywords:
            item.add_marker(skip)
