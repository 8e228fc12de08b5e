"""gate.schedule.model_update_preserves_authority: "updating while paused keeps the
schedule paused with no next firing". Kept paused means kept as it was paused: a
schedule the failure limit paused (pause_reason ``failure_limit``, spec "State
transitions") and then edited through the conversational patch is still PAUSED for
``failure_limit`` - the owner never paused it - with its failure count and no next
firing (mutant ``domain.paused_update_relabels_user``: an update relabels every pause
as the user's)."""

from __future__ import annotations

import pytest

from gates.checks.test_rules_admission import finish, fire_next
from scheduling.service.values import SchedulePatch
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = pytest.mark.postgres


@pytest.mark.gate("gate.schedule.model_update_preserves_authority")
async def test_an_edit_keeps_a_failure_limit_pause(pg_url: str) -> None:
    h = await MaterializeWorld.open(pg_url)
    try:
        sid = await h.create(key="limit-paused", max_consecutive_failures=1)
        role = h.scheduler_role(ids=h.world.ids.fork("acct"), materializer=h.materializer())
        run = await fire_next(h, sid)
        await finish(h, run, "FAILED", {"reason": "schedule.runtime.step_limit"})
        assert await role.accountant.account_run(run) is not None
        row = await h.schedule(sid)
        paused = (row["state"], row["pause_reason"], row["next_fire_at"])
        assert paused == ("PAUSED", "failure_limit", None), row
        patched = await h.world.service.patch(
            WHO, sid, row["current_revision"], SchedulePatch(title="Renamed"), "edit-paused"
        )
        assert patched.changed, patched
        after = await h.schedule(sid)
        assert after["current_revision"] == row["current_revision"] + 1, after
        kept = (after["state"], after["pause_reason"], after["next_fire_at"])
        assert kept == ("PAUSED", "failure_limit", None), after
        assert after["consecutive_failures"] == row["consecutive_failures"], after
    finally:
        await h.close()
