"""Pure domain values and rules. No I/O, no clock reads, no project imports."""
