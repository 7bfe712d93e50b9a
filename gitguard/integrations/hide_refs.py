"""`gitguard refs hide|unhide`: the user's opt-in to hide refs/gitguard from git's servers.

`transfer.hideRefs = refs/gitguard` makes upload-pack (clone, fetch, `clone --mirror`,
`fetch '+refs/*:refs/*'`) and receive-pack leave those refs out of what they advertise,
so another repository cloning or fetching from this one never gets them. It changes the
user's git config, so only the user's explicit `refs hide` sets it (DESIGN.md invariant 1),
and `refs unhide` takes out exactly that value again. It does nothing for what is sent
from here: `push --mirror` is the pre-push hook's to refuse, and `bundle create --all`
reads refs directly.
"""

from __future__ import annotations

from gitguard.git.commands import run_git
from gitguard.workspace import Workspace

KEY = "transfer.hideRefs"
VALUE = "refs/gitguard"


def _config(ws: Workspace, *args: str, check: bool = True) -> list[str]:
    proc = run_git(["config", "--local", *args], git_dir=ws.git_dir, check=check)
    return proc.stdout.decode(errors="surrogateescape").splitlines()


def hidden(ws: Workspace) -> bool:
    return VALUE in _config(ws, "--get-all", KEY, check=False)


def hide(ws: Workspace) -> bool:
    """Add the value unless it is there. True when the config changed."""
    if hidden(ws):
        return False
    _config(ws, "--add", KEY, VALUE)
    return True


def unhide(ws: Workspace) -> bool:
    """Remove that value only (other hideRefs values stay). True when the config changed."""
    if not hidden(ws):
        return False
    _config(ws, "--fixed-value", "--unset-all", KEY, VALUE)
    if not _config(ws, "--get-regexp", r"^transfer\.", check=False):
        # git leaves an empty [transfer] header behind; `hide` may have written it
        _config(ws, "--remove-section", "transfer", check=False)
    return True
