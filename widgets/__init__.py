"""Live ipywidgets views of a running plan; they subscribe to engine events."""

from __future__ import annotations

from plansight.widgets.plan_view import MonitorSnapshot, QueryMonitor, render_html, render_text

__all__ = ["MonitorSnapshot", "QueryMonitor", "render_html", "render_text"]
