"""Talking to git and libgit2: commands, filters, trees, packs, patch text, merges."""
