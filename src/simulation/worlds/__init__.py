"""Worlds: a schedule service, materializer, schedule worker and run worker wired for a
check, a scenario or the soak, with durable principals and an agent seeded, the gate
ceilings, the strict harness and the lifecycle model. Shared by the gate checks, the
simulator's scenarios and the soak; it sits above the engine and the provider and
below the scenarios (see ``docs/architecture.md``)."""
