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
