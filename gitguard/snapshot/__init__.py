"""Workspace snapshots: the snapshotter, checkpoints, stat scans, the daemon's."""
