"""Durable files and the store: privacy, sealing, redaction, artifacts, the trace log."""
