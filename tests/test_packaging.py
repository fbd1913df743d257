"""Every subpackage folder is listed in pyproject.toml (the remapped layout needs it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"plansight": "plansight", "engine": "plansight.engine", "magic": "plansight.magic",
           "widgets": "plansight.widgets", "profiling": "plansight.profiling"}


def test_every_subpackage_is_listed():
    text = (ROOT / "pyproject.toml").read_text()  # tomllib needs 3.11; we support 3.10
    block = text[text.index("packages = ["):]
    listed = set(re.findall(r'"(plansight[\w.]*)"', block[:block.index("]")]))
    found = set()
    for folder, package in MAPPING.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *relative)))
    assert found - listed == set(), f"add to pyproject.toml packages: {sorted(found - listed)}"
