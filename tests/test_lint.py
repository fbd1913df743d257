"""ruff, with the rule set pinned in pyproject.toml, finds nothing in the repository.

Run in CI as a test so that one command (the README's) checks everything; a new finding
fails here with ruff's own message naming the file, line and rule.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_finds_nothing():
    result = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache",
                             "--output-format", "concise", str(ROOT)],
                            capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
