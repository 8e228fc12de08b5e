"""gate.schedule.authority_fresh through the operator's own path: the principal directory
as the provisioning import writes it (``bootstrap.open_provisioning``, what ``principals
import`` and ``provision apply`` run).

The gate's other checks change a principal by writing its row directly; an operator
revokes a scope, disables a principal or changes its roles by importing the principals
file again. Each such re-import must reach the durable directory exactly as written -
the scope set replaced (never merged with the one held), the enabled flag and the
authority inputs taken from the file - so the next due occurrence fails closed with its
stable reason, and importing the original content again restores only the occurrence
after it. Re-importing unchanged content is reported unchanged and leaves the row (and
so the pinned authority version) alone.

Tests of the test: ``scheduling-gates mutate`` (``svc.provision_disable_ignored``,
``svc.provision_scopes_merged``, ``svc.provision_inputs_kept``).
"""

from __future__ import annotations

from typing import Any

import pytest

from gates.checks.fail_closed import fails_closed_then_recovers
from gates.runner.pytest_plugin import GateEvidence
from scheduling import bootstrap
from scheduling.service.materializer import AUTHORITY_CHANGED, PRINCIPAL_DISABLED, SCOPE_REVOKED
from simulation.worlds.materialize import WHO, MaterializeWorld

pytestmark = [pytest.mark.postgres, pytest.mark.gate("gate.schedule.authority_fresh")]

NAME = f"{WHO.tenant_id}/{WHO.principal_id}"
ROLES = ["member"]
"""The roles ``seed_durable`` gives the owner: the file below states exactly that row."""


def principals_file(
    *, scopes: frozenset[str] = WHO.scopes, enabled: bool = True, roles: list[str] = ROLES
) -> dict[str, Any]:
    return {
        "principals": [
            {
                "tenant_id": WHO.tenant_id,
                "principal_id": WHO.principal_id,
                "enabled": enabled,
                "scopes": sorted(scopes),
                "authority_inputs": {"roles": list(roles)},
            }
        ]
    }


CASES: dict[str, tuple[dict[str, Any], str]] = {
    "scope_revoked": (principals_file(scopes=WHO.scopes - {"memory.read"}), SCOPE_REVOKED),
    "principal_disabled": (principals_file(enabled=False), PRINCIPAL_DISABLED),
    "authority_inputs_changed": (principals_file(roles=[*ROLES, "auditor"]), AUTHORITY_CHANGED),
}


async def principal_row(h: MaterializeWorld) -> dict[str, Any]:
    rows = await h.sql(
        "SELECT enabled, scopes, authority_inputs, updated_at FROM principals"
        " WHERE tenant_id = :t AND principal_id = :p",
        t=WHO.tenant_id,
        p=WHO.principal_id,
    )
    return rows[0]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_reimport_revokes_then_restores(
    pg_url: str, case: str, gate_evidence: GateEvidence
) -> None:
    document, code = CASES[case]
    h = await MaterializeWorld.open(pg_url)
    try:
        seeded = await principal_row(h)
        h.clock.advance(60)
        async with bootstrap.open_provisioning(pg_url, h.clock) as service:
            same = await service.import_principals(principals_file())
            assert (same.unchanged, same.updated, same.created) == ([NAME], [], []), same
            assert await principal_row(h) == seeded, "an unchanged import rewrote the row"
            worker = h.worker(h.materializer())
            sid = await h.create()

            async def breaks() -> None:
                report = await service.import_principals(document)
                assert report.updated == [NAME], (case, report)
                row = await principal_row(h)
                wanted = document["principals"][0]
                assert row["enabled"] is wanted["enabled"], row
                assert sorted(row["scopes"]) == wanted["scopes"], row
                assert row["authority_inputs"] == wanted["authority_inputs"], row

            async def restores() -> None:
                report = await service.import_principals(principals_file())
                assert report.updated == [NAME], (case, report)

            failed, after = await fails_closed_then_recovers(
                h,
                worker,
                sid,
                disposition="AUTHORIZATION_FAILED",
                code=code,
                breaks=breaks,
                restores=restores,
            )
        gate_evidence.record(
            f"provisioned_{case}",
            {
                "reason_code": failed["reason_code"],
                "occurrences": [o["disposition"] for o in after.occurrences],
                "path": "principals import of the changed file, then of the original",
            },
        )
    finally:
        await h.close()
