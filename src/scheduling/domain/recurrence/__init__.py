"""The pure recurrence calculator: civil-time resolution, calendar arithmetic, bounded look-ups."""
