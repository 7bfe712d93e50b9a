"""The tool-call ledger: the journal, its fold, segments, repair, sessions, replay."""
