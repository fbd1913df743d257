"""The Example: sections of public docstrings are tests too."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["plansight", "plansight.session", "plansight.query", "plansight.errors",
           "plansight.datasets", "plansight.engine.exec.memory_pool",
           "plansight.engine.optimizer.fold_constants", "plansight.engine.optimizer.push_down_limit",
           "plansight.engine.physical.joins.output"]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
