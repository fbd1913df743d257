"""The Example: sections of every module's docstrings are tests too.

Modules are discovered, not listed, so a new module's examples run without anyone
remembering to add it here.
"""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

LAYERS = ("plansight", "plansight.engine", "plansight.magic", "plansight.widgets",
          "plansight.profiling")


def _modules() -> list[str]:
    """Every module of every layer (the layers are separate folders mapped under plansight, so
    each is walked from its own path)."""
    names = set(LAYERS)
    for layer in LAYERS:
        package = importlib.import_module(layer)
        for info in pkgutil.walk_packages(package.__path__, f"{layer}."):
            names.add(info.name)
    return sorted(n for n in names if not n.endswith("__main__"))


@pytest.mark.parametrize("name", _modules())
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"


def test_discovery_finds_the_engine_and_the_notebook_layers():
    found = _modules()
    for name in ("plansight.engine.exec.memory_pool", "plansight.engine.physical.sorts.sort",
                 "plansight.magic.magic", "plansight.widgets.plan_view"):
        assert name in found
