"""The database's occurrence rules and the domain value accept exactly the same forms.

``inspection.link_rule_problems`` evaluates the table's CHECKs against
``inspection.occurrence_form_legal`` on real PostgreSQL (gate.schedule.persistence_schema); this
test ties that oracle to ``ScheduleOccurrence`` itself, over all 320 combinations of
disposition and nullable fields, so the database, the oracle and the domain agree.
"""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from uuid import UUID

from scheduling.adapters.postgres.inspection import occurrence_form_legal
from scheduling.adapters.postgres.tables import DISPOSITIONS
from scheduling.domain.errors import ValidationError
from scheduling.domain.occurrence import ScheduleOccurrence

T = datetime(2026, 1, 1, tzinfo=UTC)


def _domain_accepts(d: str, s: bool, r: bool, e: bool, m: bool, a: bool, c: bool) -> bool:
    try:
        ScheduleOccurrence(
            id=UUID(int=1),
            schedule_id=UUID(int=2),
            schedule_revision=1,
            nominal_fire_at=T,
            disposition=d,
            session_id=UUID(int=3) if s else None,
            run_id=UUID(int=4) if r else None,
            reason_code="schedule.occurrence.missed_grace" if c else None,
            authority_version="av-1" if a else None,
            materialized_at=T if m else None,
            links_erased_at=T if e else None,
            created_at=T,
        )
    except ValidationError:
        return False
    return True


def test_domain_value_and_database_oracle_agree_on_every_form() -> None:
    combos = [
        (d, *flags) for d in DISPOSITIONS for flags in itertools.product((False, True), repeat=6)
    ]
    disagreements = [
        combo
        for combo in combos
        if _domain_accepts(*combo) != occurrence_form_legal(*combo)  # type: ignore[arg-type]
    ]
    assert disagreements == []
    accepted = sum(occurrence_form_legal(*combo) for combo in combos)  # type: ignore[arg-type]
    # MATERIALIZED: live-linked or erased (2 forms); each of the four others: unlinked,
    # with a reason, with or without a (non-secret) authority version (2 forms).
    assert accepted == 2 + 4 * 2
