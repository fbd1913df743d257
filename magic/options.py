"""``%config Query.<option> = value``: kernel-wide defaults for ``%%query``, with validation.

A traitlets Configurable registered with the shell, so IPython's ``%config`` and config files
set it. Its engine options are derived from the session's option table
(``plansight.session.OPTIONS``, one entry per ``SessionConfig`` field), so a new engine option
is configurable here without touching this module. Values are checked by the same validators
as ``SET`` (bad values are refused with the engine's message, the old value stays) and applied
to the kernel's session at once.
"""

from __future__ import annotations

from traitlets import Bool, Int, TraitError, Unicode, Union, observe, validate
from traitlets.config import Configurable

from plansight.engine.exec.context import SessionConfig
from plansight.errors import PlanError
from plansight.session import OPTIONS

#: Every engine option under its canonical name (aliases such as ``threads`` are left out).
ENGINE_OPTIONS = tuple(name for name in OPTIONS if name in SessionConfig.__dataclass_fields__)

_HELP = {
    "memory_limit": "Memory limit of queries, e.g. '2GB' (default: a share of RAM)",
    "target_partitions": "Partitions (threads) per query (default: CPU count)",
    "batch_size": "Rows per batch",
    "default_null_order": "nulls_last | nulls_first | nulls_first_on_asc_last_on_desc"
                          " | nulls_last_on_asc_first_on_desc",
    "integer_division": "PostgreSQL-style / on integers (DuckDB's option)",
}


def _trait(name: str):
    """A trait of the option's type (None: not configured, the session's value stays)."""
    kind = SessionConfig.__dataclass_fields__[name].type
    help_text = _HELP.get(name, f"the engine option {name} (SET {name} = ...)")
    if kind == "bool":
        return Bool(None, allow_none=True, config=True, help=help_text)
    if kind == "int":
        return Int(None, allow_none=True, config=True, help=help_text)
    if kind == "bool | str":  # a switch with a third setting, such as 'auto'
        return Union([Bool(), Unicode()], default_value=None, allow_none=True, config=True,
                     help=help_text)
    return Unicode(None, allow_none=True, config=True, help=help_text)  # sizes such as '2GB'


class Query(Configurable):
    """Defaults of the ``%%query`` magic (``%config Query`` lists them)."""

    locals().update({name: _trait(name) for name in ENGINE_OPTIONS})
    monitor = Bool(True, config=True, help="Show the live plan monitor while a query runs")
    displaylimit = Int(20, allow_none=True, config=True,
                       help="Rows a result shows, half from the start and half from the end "
                            "(0 or None: all rows)")
    autopandas = Bool(False, config=True, help="Return results as pandas DataFrames")
    autopolars = Bool(False, config=True, help="Return results as polars DataFrames")

    @validate(*ENGINE_OPTIONS)
    def _check(self, proposal):
        value, name = proposal["value"], proposal["trait"].name
        if value is not None:
            try:
                OPTIONS[name](value)
            except PlanError as error:
                raise TraitError(str(error)) from None
        return value

    @observe(*ENGINE_OPTIONS)
    def _apply(self, change):
        if change["new"] is not None:
            from plansight.magic.extension import get_session

            get_session().set_option(change["name"], change["new"])

    def apply_to(self, session) -> None:
        """Set every configured engine option on ``session`` (a newly created one)."""
        for name in ENGINE_OPTIONS:
            value = getattr(self, name)
            if value is not None:
                session.set_option(name, value)
