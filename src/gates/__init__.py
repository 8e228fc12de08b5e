"""The gate catalog, the milestone ledger, check binding and the gate runner."""
