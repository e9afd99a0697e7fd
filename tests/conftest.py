import atexit
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "programs"

# Hundreds of tests start `python -m lambdad` (or a kernel, or a GradBench tool). Where
# PYTHONDONTWRITEBYTECODE is set, each of them would compile lambdad's modules from their
# source again (about 0.4 s a process); the test run's processes keep their bytecode in a
# directory of their own instead, outside the checkout, removed when the run ends. (Set
# once, by the first process of the run: pytest-xdist's workers inherit it.)
if "LAMBDAD_TEST_BYTECODE" not in os.environ:
    _bytecode = tempfile.mkdtemp(prefix="lambdad-test-bytecode-")
    os.environ["LAMBDAD_TEST_BYTECODE"] = os.environ["PYTHONPYCACHEPREFIX"] = _bytecode
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    atexit.register(shutil.rmtree, _bytecode, True)


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


# The reason of a test skipped for want of an optional outside program starts with this.
MISSING_TOOL = "optional tool missing:"


def missing_tool(hint: str):
    """Skip the test that needs an outside program which is not installed (``hint`` says
    how to install it), or fail it when LAMBDAD_REQUIRE_TOOLS=1 (CI installed the tools:
    they must be found)."""
    if os.environ.get("LAMBDAD_REQUIRE_TOOLS") == "1":
        pytest.fail(f"LAMBDAD_REQUIRE_TOOLS=1 but {hint}")
    pytest.skip(f"{MISSING_TOOL} {hint}")


def pytest_terminal_summary(terminalreporter):
    """Say loudly which tests did not run for want of an optional tool."""
    reasons = []
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        if MISSING_TOOL in reason:
            reasons.append(f"{report.nodeid}: {reason.split(MISSING_TOOL, 1)[1].strip()}")
    if reasons:
        terminalreporter.section("NOT RUN: optional tools missing", sep="!", yellow=True)
        for line in reasons:
            terminalreporter.line(f"SKIPPED {line}", yellow=True)


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


class Calls:
    """Counts, while entered, the calls of the Python function ``function``."""

    def __init__(self, function):
        self.code = function.__code__
        self.count = 0

    def profile(self, frame, event, _):
        if event == "call" and frame.f_code is self.code:
            self.count += 1

    def __enter__(self):
        self.previous = sys.getprofile()
        sys.setprofile(self.profile)
        return self

    def __exit__(self, *_):
        sys.setprofile(self.previous)  # (the process as it was)
