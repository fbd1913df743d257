"""``%config Query.<option> = value``: kernel-wide defaults for ``%%query``, with validation.

A traitlets Configurable registered with the shell, so IPython's ``%config`` and config files
set it. Engine options are checked by ``Session.set_option`` (bad values are refused with the
engine's message, the old value stays) and applied to the kernel's session at once.
"""

from __future__ import annotations

from traitlets import Bool, Int, TraitError, Unicode, observe, validate
from traitlets.config import Configurable

from plansight.errors import PlanError

ENGINE_OPTIONS = ("memory_limit", "target_partitions", "batch_size", "default_null_order",
                  "integer_division")


class Query(Configurable):
    """Defaults of the ``%%query`` magic (``%config Query`` lists them)."""

    memory_limit = Unicode(None, allow_none=True, config=True,
                           help="Memory limit of queries, e.g. '2GB' (default: a share of RAM)")
    target_partitions = Int(None, allow_none=True, config=True,
                            help="Partitions (threads) per query (default: CPU count)")
    batch_size = Int(None, allow_none=True, config=True, help="Rows per batch")
    default_null_order = Unicode(None, allow_none=True, config=True,
                                 help="nulls_last | nulls_first | nulls_first_on_asc_last_on_desc"
                                      " | nulls_last_on_asc_first_on_desc")
    integer_division = Bool(None, allow_none=True, config=True,
                            help="PostgreSQL-style / on integers (DuckDB's option)")
    monitor = Bool(True, config=True, help="Show the live plan monitor while a query runs")

    @validate(*ENGINE_OPTIONS)
    def _check(self, proposal):
        value, name = proposal["value"], proposal["trait"].name
        if value is not None:
            from plansight.session import OPTIONS

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
