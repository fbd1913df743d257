"""Test-run wiring shared by tests/ and examples/: which tests must run in one process when
the suite is spread over several (pytest-xdist with ``--dist loadgroup``, as CI runs it).

A notebook's cells run in order in one kernel, so each notebook is one group. The cluster
tests share one loopback Dask cluster per test process (tests/distributed/conftest.py), so
they are one group too: a second cluster would cost more than it saves.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before xdist reads the marks to name the groups
def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.suffix == ".ipynb":
            item.add_marker(pytest.mark.xdist_group(f"notebook-{item.path.name}"))
        elif item.path.parent.name == "distributed" and item.path.parent.parent.name == "tests":
            item.add_marker(pytest.mark.xdist_group("dask-cluster"))
