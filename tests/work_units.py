"""A pytest plugin (``-p tests.work_units`` in pyproject.toml's addopts) for tests/ and
examples/: how the suite is spread over several processes (pytest-xdist, ``-n auto``, as CI
runs it).

Tests are handed out one at a time, except two kinds that must share a process: a
notebook's cells run in order in one kernel, so each notebook goes whole to one process;
and the cluster tests share one loopback Dask cluster per test process
(tests/distributed/conftest.py), so they all go to one process (a second cluster would
cost more than it saves). xdist's own ``--dist loadgroup`` would do this from marks, but
it renames tests in a way pytest 9 no longer sees, hence a scheduler of our own.
"""

from __future__ import annotations

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pytest without xdist: nothing to spread
    LoadScopeScheduling = None


def work_unit(nodeid: str) -> str:
    """The tests that must run in one process share a name (see the module docstring).

    Example:
        >>> work_unit("examples/01_tour.ipynb::Cell 3")
        'examples/01_tour.ipynb'
        >>> work_unit("tests/distributed/test_plan_stages.py::test_x[1]")
        'tests/distributed'
        >>> work_unit("tests/test_errors.py::test_y")
        'tests/test_errors.py::test_y'
    """
    path = nodeid.split("::", 1)[0]
    if path.endswith(".ipynb"):
        return path
    if path.startswith("tests/distributed/"):
        return "tests/distributed"
    return nodeid


if LoadScopeScheduling is not None:
    class _WorkUnits(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    def pytest_xdist_make_scheduler(config, log):
        return _WorkUnits(config, log)
