"""rule.http.bearer through the schedule service: a disabled principal can write no
definition, whichever front door called.

The HTTP edge refuses a disabled caller before the service (test_rules_edge), so a
service that forgot the directory's ``enabled`` flag passes every HTTP check; the model
tools reach the same service without that edge. Here the owner's schedule exists, the
directory then disables the owner, and a create and a full-definition update through
the service each answer schedule.auth.principal_unavailable and write nothing.
"""

from __future__ import annotations

import pytest

from gates.runner.pytest_plugin import GateEvidence
from scheduling.domain.errors import AuthorizationError
from simulation.worlds.materialize import WHO, MaterializeWorld
from simulation.worlds.service import definition

pytestmark = [pytest.mark.postgres, pytest.mark.rule("rule.http.bearer")]

UNAVAILABLE = "schedule.auth.principal_unavailable"


async def test_a_disabled_principal_writes_no_definition(
    pg_url: str, gate_evidence: GateEvidence
) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(key="writer-first")
        await h.set_principal(enabled=False)
        before = await h.counts(), await h.schedule(sid)
        with pytest.raises(AuthorizationError) as create:
            await h.create(key="writer-second")
        assert create.value.code == UNAVAILABLE
        with pytest.raises(AuthorizationError) as update:
            await h.world.service.update(WHO, sid, 1, definition(title="Renamed"))
        assert update.value.code == UNAVAILABLE
        assert (await h.counts(), await h.schedule(sid)) == before
        gate_evidence.record("disabled_writes", {"create": UNAVAILABLE, "update": UNAVAILABLE})
    finally:
        await h.close()
