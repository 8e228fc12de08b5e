"""Lifecycle scenarios (gate.schedule.lifecycle_linear under the simulator)."""
