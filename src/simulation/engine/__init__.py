"""The simulator's engine: virtual clock, seeded ids, the interleaver, faults,
histories and their checkers, traces and their store, shrinking, and the ``Simulator``
that runs a ``Scenario`` against a ``DatabaseTarget``. It knows nothing of worlds or
particular scenarios (see ``docs/architecture.md``)."""
