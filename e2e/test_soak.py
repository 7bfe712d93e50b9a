"""The randomized session fuzz through the real Claude Code CLI (e2e/soak.py, issue 31).

`make e2e` runs a few seeds (GITGUARD_SOAK_SEEDS, default 0-2); `make soak` hundreds.
A failing seed prints the command that replays it alone.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e import harness, soak
from e2e.modelserver import Server


@pytest.mark.parametrize("seed", soak.seeds_from_env())
def test_a_random_session_then_rollback_and_merge_keep_every_user_line(
        seed: int, tmp_path: Path) -> None:
    with Server() as server:
        files = soak.base_files()
        repo = harness.make_repo(tmp_path, server, daemon=True, files=files)
        try:
            counts = soak.run(seed, repo)
        finally:
            harness.stop(repo)
    soak.log(counts)
    assert not counts.failures, (
        f"seed {seed} failed; reproduce with:\n  {soak.REPRO.format(seed=seed)}\n"
        + "\n".join(counts.failures[:20]))
