"""What the operator console reads: aggregates and timelines over the stored tables."""
