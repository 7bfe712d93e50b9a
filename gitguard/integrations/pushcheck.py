"""The pre-push check, standard library only: `gitguard.cli.entry` answers a pre-push hook with
it before anything else is imported (no daemon, no store, no pygit2 needed to read a ref
list), and `git_hooks.handle` uses the same function."""

from __future__ import annotations

from collections.abc import Sequence

from gitguard.errors import EXIT_REFUSED

HIDDEN_PREFIX = "refs/gitguard/"


def check_push(args: Sequence[str], stdin: bytes) -> tuple[int, str]:
    """Refuse a push whose ref list names refs/gitguard/* (deleting one remotely is fine)."""
    refused: list[str] = []
    for line in stdin.decode(errors="replace").splitlines():
        fields = line.split()
        if len(fields) != 4:
            continue
        local_ref, local_oid, remote_ref, _ = fields
        deleting = set(local_oid) == {"0"}
        if local_ref.startswith(HIDDEN_PREFIX) or (remote_ref.startswith(HIDDEN_PREFIX)
                                                   and not deleting):
            refused.append(local_ref if local_ref.startswith(HIDDEN_PREFIX) else remote_ref)
    if not refused:
        return 0, ""
    remote = args[0] if args else "the remote"
    more = f" and {len(refused) - 1} more" if len(refused) > 1 else ""
    return EXIT_REFUSED, (
        f"gitguard: refusing to push {refused[0]}{more} to {remote}: refs/gitguard/* hold "
        f"gitguard's private snapshots of your workspace, and `git push --mirror` sends every "
        f"ref. Nothing was pushed. Push branches and tags instead: "
        f"git push {remote} --all && git push {remote} --tags")
