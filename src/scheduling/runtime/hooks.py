"""Post-run hooks: the seam between the run worker and post-run accounting."""

from __future__ import annotations

from typing import Any, Protocol
from uuid import UUID

from scheduling.ports.records import RunRecord


class AccountsRuns(Protocol):
    """Anything that accounts a terminal run by id (``RunAccountant`` does)."""

    async def account_run(self, run_id: UUID) -> Any: ...


class AccountingHook:
    """``RunTerminalHook`` that hands every terminal run to post-run accounting. The
    accountant is idempotent per occurrence and ignores runs without one, so a retry or
    an on-demand run is harmless."""

    def __init__(self, accountant: AccountsRuns) -> None:
        self._accountant = accountant

    async def run_finished(self, run: RunRecord) -> None:
        await self._accountant.account_run(run.id)
