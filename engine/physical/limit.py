"""GlobalLimitExec / LocalLimitExec: skip then fetch rows; stop pulling input once done."""

from __future__ import annotations

from plansight.engine.physical.plan import SINGLE_PARTITION, UNSPECIFIED, ExecutionPlan


class GlobalLimitExec(ExecutionPlan):
    """OFFSET ``skip`` LIMIT ``fetch`` over a single input partition."""

    name = "GlobalLimitExec"

    def __init__(self, input: ExecutionPlan, skip: int = 0, fetch: int | None = None,
                 local: bool = False):
        super().__init__(input.schema)
        self.input, self.skip, self.fetch, self.local = input, skip, fetch, local
        if local:
            self.name = "LocalLimitExec"

    def children(self):
        return [self.input]

    def with_new_children(self, children):
        return GlobalLimitExec(children[0], self.skip, self.fetch, self.local)

    def required_input_distribution(self):
        return [UNSPECIFIED if self.local else SINGLE_PARTITION]

    def maintains_input_order(self):
        return [True]

    def derived_row_estimate(self):
        rows = self.input.row_estimate
        if rows is None or self.fetch is None:
            return rows
        return min(max(rows - self.skip, 0.0), self.fetch)

    def display(self) -> str:
        if self.local:
            return f"LocalLimitExec: fetch={self.fetch}"
        return f"GlobalLimitExec: skip={self.skip}, fetch={self.fetch}"

    def _execute(self, partition, ctx):
        skip, remaining = self.skip, self.fetch
        if remaining == 0:
            return
        for batch in self.input.execute(partition, ctx):
            if skip:
                dropped = min(skip, batch.num_rows)
                batch, skip = batch.slice(dropped), skip - dropped
            if remaining is not None:
                batch = batch.slice(0, remaining)
                remaining -= batch.num_rows
            yield batch
            if remaining is not None and remaining <= 0:
                return
