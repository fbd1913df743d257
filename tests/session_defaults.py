"""Session option defaults for one test: every Session made during the test starts with them.

For tests whose sessions are made deep inside helpers (the differential harness, fixtures):
the options themselves are ordinary SessionConfig fields, settable with SET as well.
"""

from __future__ import annotations

from typing import Any

import plansight.session as session_module
from plansight.engine.exec.context import SessionConfig


def session_defaults(monkeypatch, **options: Any) -> None:
    """Make ``options`` the starting values of every Session created until the test ends."""
    unknown = set(options) - set(SessionConfig.__dataclass_fields__)
    assert not unknown, f"not SessionConfig options: {sorted(unknown)}"
    earlier = session_module.SessionConfig  # another fixture's defaults stay in force

    def config() -> SessionConfig:
        made = earlier()
        for name, value in options.items():
            setattr(made, name, value)
        return made

    monkeypatch.setattr(session_module, "SessionConfig", config)


def users_final_aggregates(monkeypatch) -> None:
    """Undo tests/conftest.py's pinned single-final threshold: for tests that compare with
    plans a user's session makes (TPC-H, a notebook's kernel)."""
    session_defaults(monkeypatch, aggregate_single_final_threshold_rows=SessionConfig.
                     aggregate_single_final_threshold_rows)
