"""misc scalar functions."""

from __future__ import annotations
