"""The check a `conflicts resolve --merge` result passes before it is written.

One merge step takes an agent's change out of the user's file: `git merge-file --diff3`
with the agent's version as the ancestor, the user's file as ours and the file as the
agent found it as theirs. Its result is proved against the three versions with a line
diff of its own (libgit2's xdiff, gitguard.git.merge.line_hunks), not taken on trust:

- an agent hunk (agent -> before) that no user hunk (agent -> user) overlaps or touches
  is a *clean site*: the user's file must show the text from before the agent there;
- every other line of the result is the user's file, line for line, in order; a marked
  region's "ours" side must be the user's text unchanged (an agent hunk a user hunk
  touches may only be left as the user's text, in a region or not).

So every line the user added or changed is there, a line the user deleted comes back
only inside a marked region, and nothing else moves. A result that fails is refused
(MergeRefused, exit 5): the file is not written and the conflict stays pending.
"""

from __future__ import annotations

from dataclasses import dataclass

from gitguard.errors import MergeRefused
from gitguard.git.merge import Hunk, line_hunks, lines

MARKER = 7     # the length of git's <<<<<<< ||||||| ======= >>>>>>> markers


@dataclass(frozen=True)
class Site:
    """Where a clean agent hunk sits in the user's file: user[start:end] is what the agent
    wrote (untouched by the user), `before` the lines that were there before it."""
    start: int
    end: int
    before: list[bytes]


@dataclass(frozen=True)
class Region:
    """A marked conflict region of the result: its "ours" side (the user's text)."""
    ours: list[bytes]


def _independent(a: Hunk, b: Hunk) -> bool:
    """xdiff's merge rule: changes that overlap or touch (no unchanged line between
    them) conflict; others merge."""
    return a.old_end < b.old or b.old_end < a.old


def clean_sites(agent: bytes, user: bytes, before: bytes) -> list[Site]:
    """The agent hunks no user hunk touches, placed in the user's file."""
    user_hunks = line_hunks(agent, user)
    old_lines = lines(before)
    sites: list[Site] = []
    for hunk in line_hunks(agent, before):
        if not all(_independent(hunk, u) for u in user_hunks):
            continue
        # lines the user inserted or removed above it shift it
        shift = sum((u.new_end - u.new) - (u.old_end - u.old) for u in user_hunks
                    if u.old_end < hunk.old)
        start = hunk.old + shift
        sites.append(Site(start, start + hunk.old_end - hunk.old,
                          old_lines[hunk.new:hunk.new_end]))
    return sites


def _parse(merged: bytes, labels: tuple[str, str, str]) -> list[bytes | Region]:
    """The result's lines, each marked region as one Region (its "ours" side)."""
    start, middle, end = (f"{sign * MARKER} {label}".encode()
                          for sign, label in zip("<|>", labels, strict=True))
    items: list[bytes | Region] = []
    region: list[bytes] | None = None
    side = ""
    for line in lines(merged):
        bare = line.rstrip(b"\n").removesuffix(b"\r")
        if region is None:
            if bare == start:
                region, side = [], "ours"
            else:
                items.append(line)
        elif side == "ours" and bare == middle:
            side = "base"
        elif side == "base" and bare == b"=" * MARKER:
            side = "theirs"
        elif side == "theirs" and bare == end:
            items.append(Region(region))
            region = None
        elif side == "ours":
            region.append(line)
    if region is not None:
        raise MergeRefused("the merge left a conflict region without its end marker",
                           HINT)
    return items


def _same_text(side: list[bytes], user: list[bytes], at: int) -> bool:
    """A region's side is the user's lines from `at`; git ends a last line that has no
    line end with one inside a region."""
    mine = user[at:at + len(side)]
    if mine == side:
        return True
    return (len(mine) == len(side) > 0 and at + len(side) == len(user)
            and mine[:-1] == side[:-1] and not mine[-1].endswith(b"\n")
            and side[-1] in (mine[-1] + b"\n", mine[-1] + b"\r\n"))


HINT = ("the file was not written and the conflict stays pending; look at it with "
         "`gitguard conflicts show PATH`, then --keep-user, --take-checkpoint or edit it "
         "yourself")


def prove(agent: bytes, user: bytes, before: bytes, merged: bytes,
          labels: tuple[str, str, str], regions: int) -> None:
    """Raise MergeRefused unless `merged` is `user` with each clean site's agent lines
    replaced by the lines from before the agent, and otherwise the user's lines in
    order (marked regions holding the user's text as their "ours" side)."""
    mine = lines(user)
    items = _parse(merged, labels)
    found = sum(isinstance(i, Region) for i in items)
    if found != regions:
        raise MergeRefused(f"the merge reported {regions} conflict region(s) and marked "
                           f"{found}: its result cannot be checked", HINT)
    sites = clean_sites(agent, user, before)
    at = 0          # in the user's lines
    pos = 0         # in the result's items
    while True:
        while sites and sites[0].start < at:
            sites.pop(0)           # inside a marked region: the user decides there
        item = items[pos] if pos < len(items) else None
        if isinstance(item, Region):
            if not _same_text(item.ours, mine, at):
                raise MergeRefused(f"a marked region does not hold your lines from line "
                                   f"{at + 1} as they are", HINT)
            at, pos = at + len(item.ours), pos + 1
            continue
        if sites and sites[0].start == at:
            site = sites.pop(0)
            if items[pos:pos + len(site.before)] != site.before:
                raise MergeRefused(f"the merge did not put back what was there before the "
                                   f"agent at line {at + 1}", HINT)
            at, pos = site.end, pos + len(site.before)
            continue
        if item is None:
            break
        if at >= len(mine) or item != mine[at]:
            raise MergeRefused(f"the merge changed your line {at + 1}, which no agent hunk "
                               "it removes covers", HINT)
        at, pos = at + 1, pos + 1
    if at != len(mine) or sites:
        raise MergeRefused(f"the merge dropped your lines from line {at + 1} on", HINT)
