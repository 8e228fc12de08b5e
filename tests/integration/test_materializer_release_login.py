"""The real materializer, admission controller, schedule worker and accountant through a
LOGIN holding exactly the scheduler release allowlist (no superuser, no BYPASSRLS)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from scheduling.adapters.postgres.release_check import scheduler_release_problems
from scheduling.adapters.postgres.roles import role_names
from scheduling.adapters.postgres.uow import PostgresUnitOfWorkFactory
from scheduling.service.accounting import RunAccountant
from scheduling.service.schedule_worker import ScheduleWorker
from scheduling.storage import PostgresStorage
from simulation.worlds.materialize import MaterializeWorld

pytestmark = pytest.mark.postgres


@pytest.fixture
async def login_url(pg_url: str) -> AsyncIterator[str]:
    name = f"mat_login_{secrets.token_hex(4)}"
    password = secrets.token_hex(12)
    admin = PostgresUnitOfWorkFactory.from_url(pg_url, pool_size=1)
    async with admin.engine.begin() as conn:
        await conn.execute(
            text(f"CREATE ROLE {name} LOGIN PASSWORD '{password}' IN ROLE {role_names().scheduler}")
        )
    try:
        yield (
            make_url(pg_url)
            .set(username=name, password=password)
            .render_as_string(hide_password=False)
        )
    finally:
        async with admin.engine.begin() as conn:
            await conn.execute(text(f"DROP OWNED BY {name}"))
            await conn.execute(text(f"DROP ROLE {name}"))
        await admin.dispose()


async def test_materialize_and_account_through_the_release_login(
    pg_url: str, login_url: str
) -> None:
    assert await scheduler_release_problems(login_url) == []
    h = await MaterializeWorld.open(pg_url)
    storage = PostgresStorage(None, logins={"scheduler": login_url}, pool_size=2)
    login = storage.as_role("scheduler")
    try:
        sid = await h.create(max_consecutive_failures=1)
        h.clock.advance_to(await h.next_fire(sid) + timedelta(seconds=1))
        worker = ScheduleWorker(
            uow=login, materializer=h.materializer(storage=storage), clock=h.clock
        )
        report = await worker.run_once()
        assert report.errors == {}
        assert [r.status.value for r in report.results] == ["decided"]
        run_id = report.results[0].run_id
        assert run_id is not None
        await h.sql(
            "UPDATE runs SET status = 'FAILED', finished_at = :t,"
            ' failure = \'{"reason": "schedule.runtime.agent_failed"}\' WHERE id = :i',
            t=h.clock.now(),
            i=run_id,
        )
        accountant = RunAccountant(uow=login, clock=h.clock, ids=h.world.ids.fork("login"))
        result = await accountant.account_run(run_id)
        assert result is not None
        assert result.auto_paused
        row = await h.schedule(sid)
        assert (row["state"], row["pause_reason"]) == ("PAUSED", "failure_limit")
    finally:
        await storage.close()
        await h.close()
