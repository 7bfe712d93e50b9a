"""The per-workspace daemon: engine, watcher, socket server, what it answers."""
