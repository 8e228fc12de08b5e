"""The corpus half of gate.schedule.no_credentials, adapter-agnostic (not a test module).

``run_corpus`` submits every credential-shaped case through the schedule service, on
one of four paths (create instruction, create title, conversational patch, full
update), and reports every case that was not rejected with ``schedule.secret_detected``
and every planted value found in an error, in the database dump or in the logs. A
benign control set must be accepted, so a service that rejects everything cannot pass.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from uuid import UUID

from sqlalchemy import text

from gates.checks.corpora import CredentialCase
from scheduling.domain.errors import SchedulingError
from scheduling.domain.identity import Principal
from scheduling.domain.revision import MAX_TITLE
from scheduling.domain.secrets import SECRET_DETECTED
from scheduling.service import SchedulePatch
from scheduling.testing import open_storage
from scheduling.testing import tables as tables_module
from simulation.worlds.service import ServiceWorld, build_world, definition, principal, seed_durable

PATHS = ("create.instruction", "create.title", "patch.instruction", "update.instruction")


@dataclass
class CorpusReport:
    cases: int = 0
    rejected: int = 0
    by_path: dict[str, int] = field(default_factory=dict)
    accepted: list[str] = field(default_factory=list)
    wrong_code: list[str] = field(default_factory=list)
    leaked_in_errors: list[str] = field(default_factory=list)
    leaked_in_database: list[str] = field(default_factory=list)
    leaked_in_logs: list[str] = field(default_factory=list)
    benign_accepted: int = 0
    benign_rejected: list[str] = field(default_factory=list)

    @property
    def failures(self) -> list[str]:
        out = [f"accepted: {c}" for c in self.accepted]
        out += [f"wrong code: {c}" for c in self.wrong_code]
        out += [f"value in error: {c}" for c in self.leaked_in_errors]
        out += [f"value in database: {c}" for c in self.leaked_in_database]
        out += [f"value in logs: {c}" for c in self.leaked_in_logs]
        out += [f"benign rejected: {c}" for c in self.benign_rejected]
        return out


def path_for(index: int, case: CredentialCase) -> str:
    path = PATHS[index % len(PATHS)]
    if path == "create.title" and len(case.instruction) > MAX_TITLE:
        return "create.instruction"
    return path


def _contains(haystack: str, case: CredentialCase) -> bool:
    return any(needle and needle in haystack for needle in case.needles)


async def run_corpus(
    world: ServiceWorld,
    who: Principal,
    cases: Sequence[CredentialCase],
    benign: Sequence[str],
    *,
    dump_database: Callable[[], Awaitable[str]],
    log_text: Callable[[], str],
) -> CorpusReport:
    """Submit every case and every benign control; see the module docstring."""
    report = CorpusReport(cases=len(cases))
    target = (await world.service.create(who, "corpus-target", definition())).schedule
    for index, case in enumerate(cases):
        path = path_for(index, case)
        report.by_path[path] = report.by_path.get(path, 0) + 1
        try:
            await _submit(world, who, target.id, index, case, path)
        except SchedulingError as exc:
            if exc.code != SECRET_DETECTED:
                report.wrong_code.append(f"{case.case_id} via {path}: {exc.code}")
            else:
                report.rejected += 1
            if _contains(f"{exc} {exc.message} {exc.details!r}", case):
                report.leaked_in_errors.append(case.case_id)
        else:
            report.accepted.append(f"{case.case_id} via {path}")
    for index, control in enumerate(benign):
        try:
            await world.service.create(who, f"benign-{index}", definition(instruction=control))
            report.benign_accepted += 1
        except SchedulingError as exc:
            report.benign_rejected.append(f"benign-{index}: {exc.code}")
    database = await dump_database()
    logs = log_text()
    for case in cases:
        if _contains(database, case):
            report.leaked_in_database.append(case.case_id)
        if _contains(logs, case):
            report.leaked_in_logs.append(case.case_id)
    return report


async def _submit(
    world: ServiceWorld, who: Principal, target: UUID, index: int, case: CredentialCase, path: str
) -> None:
    service = world.service
    if path == "create.instruction":
        await service.create(who, f"cred-{index}", definition(instruction=case.instruction))
    elif path == "create.title":
        await service.create(who, f"cred-{index}", definition(title=case.instruction))
    else:
        detail = await service.get(who, target)
        revision = detail.schedule.current_revision
        if path == "patch.instruction":
            patch = SchedulePatch(instruction=case.instruction)
            await service.patch(who, detail.schedule.id, revision, patch, f"cred-{index}")
        else:
            changed = definition(instruction=case.instruction)
            await service.update(who, detail.schedule.id, revision, changed)


async def run_corpus_on_postgres(
    pg_url: str,
    cases: Sequence[CredentialCase],
    benign: Sequence[str],
    *,
    log_text: Callable[[], str],
) -> CorpusReport:
    """``run_corpus`` through the API role on the database at ``pg_url``; the search of
    stored state reads every row of every table of the persistence metadata as text."""
    storage = open_storage(pg_url, pool_size=5)
    admin = storage.factory("trusted")
    who = principal("alice")
    try:
        await seed_durable(admin, [who])
        world = build_world(storage)

        async def dump_database() -> str:
            parts: list[str] = []
            async with admin.engine.connect() as conn:
                for name in sorted(tables_module.metadata.tables):
                    rows = await conn.execute(text(f"SELECT t::text FROM {name} t"))
                    parts.extend(row[0] for row in rows)
            return "\n".join(parts)

        return await run_corpus(
            world, who, cases, benign, dump_database=dump_database, log_text=log_text
        )
    finally:
        await storage.close()
