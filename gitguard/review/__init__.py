"""What a person reads after an agent session: the timeline page and its data."""
