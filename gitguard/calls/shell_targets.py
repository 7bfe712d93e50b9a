"""What a shell command line can have written, read from the command (DESIGN.md, Attribution).

A shell call's window claims only what the command can have written: output
redirections, `tee`, `sed -i`, `rm`/`mkdir`/`touch`/`truncate`/`chmod` operands, `sort -o`,
`cp`/`mv`/`git mv` operands (a move's source and destination; a copy's destination),
`git checkout -- PATHS` and `git restore` paths, and the files of a patch Codex applies
from the shell (`apply_patch <<'EOF'`). Those are the call's declared paths (a
path exactly one open call declared is that call's, and another call's patches leave it
out), so parallel shell calls each own their own writes, and a file the user saves while
the command runs stays the user's. A command that writes where nobody can tell from its
words (a build, an installer, a test runner, a script; a recursive `cp`, `ln`, a glob
the shell expands) gives None: its window keeps claiming what changed in it, on window
confidence.

The words cannot tell whether a `cp`/`mv` destination is a directory: both the
destination and the source's name inside it are declared (one of them is written).
`moved_paths` gives the (source, destination) pairs of the moves a line names, so a
rollback can undo a move as one change of two paths (rollback/moves.py).

Pure and cheap (it runs at every shell call's begin): it uses the classifier's parser,
never raises, and resolves each target against the directory the line starts in,
following `cd` between commands.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable

from gitguard.calls.shell_parse import SimpleCommand, split_argv, split_commands


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


# Programs that write nothing but through their redirections.
_QUIET = _words("""
    echo printf cat ls pwd true false test [ grep egrep fgrep rg ag head tail wc uniq
    cut tr diff cmp file stat which type date printenv id whoami uname
    basename dirname realpath readlink sleep seq jq less more du df hostname
    exit : export unset set shift wait
""")
# Options through which an otherwise quiet program writes or runs something.
_FIND_ACTIONS = _words("-delete -exec -execdir -ok -okdir -fprint -fprint0 -fprintf -fls")
_GIT_READS = _words("status diff log show blame branch rev-parse ls-files grep describe "
                    "shortlog reflog remote config")
_NULL = ("/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty")
_GLOB = frozenset("*?[")
# cp/mv options that take a value, and those that make a backup of what they replace.
_COPY_VALUES = frozenset({"-t", "--target-directory", "-S", "--suffix"})
# Codex runs a patch the model sends through its shell tool itself, as its apply_patch
# tool (its own parser accepts `[cd DIR &&] apply_patch <<'EOF' ... EOF`, and the argv
# form `["apply_patch", PATCH]`): the command writes exactly the files the patch names.
_SHELL_PATCH = re.compile(
    r"""\A\s*(?:cd\s+(?P<dir>'[^']*'|"[^"]*"|[^\s'"&;|]+)\s*&&\s*)?(?:apply_patch|applypatch)"""
    r"""\s+<<-?\s*(?P<q>['"]?)(?P<tag>\w+)(?P=q)[ \t]*\n(?P<body>.*?)\n(?P=tag)\s*\Z""",
    re.DOTALL)
PATCH_PATHS = re.compile(r"^\*\*\* (?:Add File|Update File|Delete File|Move to): (.+)$",
                         re.MULTILINE)


def written_paths(command: str | list[str], cwd: str) -> tuple[str, ...] | None:
    """Absolute paths of the files the command line can have written (created, changed,
    removed), or None when that cannot be told: an unknown program, or one that may act
    on a whole directory (a recursive `rm`/`chmod`/`cp`, `ln`), whose files no list of
    names covers, or a word the shell expands (a glob). It reads words only, never the
    disk, so the answer is the same at a call's begin and end."""
    patch = shell_patch(command)
    if patch is not None:
        here = _at(cwd, patch[0]) if patch[0] else cwd
        return tuple(dict.fromkeys(_at(here, p.strip()) for p in PATCH_PATHS.findall(patch[1])))
    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    if parsed.unparsable:
        return None
    found: list[str] = []
    here = cwd
    for cmd in parsed.commands:
        found += [_at(here, w) for w in cmd.writes if w not in _NULL and not w.startswith("&")]
        if not cmd.argv:
            continue
        if os.path.basename(cmd.argv[0]) == "cd":
            here = _at(here, cmd.argv[1]) if len(cmd.argv) > 1 else here
            continue
        targets = _targets(cmd)
        if targets is None or any(_GLOB & set(t) for t in targets):
            return None
        found += [_at(here, t) for t in targets]
    return tuple(dict.fromkeys(found))


def moved_paths(command: str | list[str], cwd: str) -> tuple[tuple[str, str], ...]:
    """The (source, destination) pairs of the files `mv` and `git mv` in the line move,
    as absolute paths. A destination the words cannot tell from a directory gives two
    pairs (to it, and to the source's name inside it): the call's patches say which one
    the move wrote. Empty when the line names no move or cannot be read."""
    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    if parsed.unparsable:
        return ()
    pairs: list[tuple[str, str]] = []
    here = cwd
    for cmd in parsed.commands:
        if not cmd.argv:
            continue
        name, args = os.path.basename(cmd.argv[0]), list(cmd.argv[1:])
        if name == "cd":
            here = _at(here, args[0]) if args else here
            continue
        if name == "git" and args[:1] == ["mv"]:
            name, args = "mv", args[1:]
        if name != "mv":
            continue
        for source, dests in _copies(args) or ():
            if _GLOB & set(source) or any(_GLOB & set(d) for d in dests):
                continue
            pairs += [(_at(here, source), _at(here, d)) for d in dests]
    return tuple(dict.fromkeys(pairs))
def shell_patch(command: str | list[str]) -> tuple[str | None, str] | None:
    """(the directory it `cd`s to, the patch text) when the command is a patch Codex
    applies itself, else None."""
    if isinstance(command, list):
        if len(command) == 2 and command[0] in ("apply_patch", "applypatch"):
            return None, command[1]
        return None
    match = _SHELL_PATCH.match(command)
    if match is None or "*** Begin Patch" not in match["body"]:
        return None
    where = match["dir"]
    return (where[1:-1] if where and where[0] in "'\"" else where), match["body"]


def _at(base: str, path: str) -> str:
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(base, path))


def _operands(args: Iterable[str], takes_value: frozenset[str] = frozenset()) -> list[str]:
    """The non-option words (after `--`, every word), skipping option values it knows."""
    out: list[str] = []
    skip = False
    options = True
    for arg in args:
        if skip:
            skip = False
        elif options and arg == "--":
            options = False
        elif options and arg.startswith("-") and arg != "-":
            skip = arg in takes_value
        else:
            out.append(arg)
    return out


def _targets(cmd: SimpleCommand) -> list[str] | None:
    """The program's own write targets (redirections aside); None: unpredictable."""
    name, args = os.path.basename(cmd.argv[0]), list(cmd.argv[1:])
    if name in _QUIET:
        return []
    if name == "find":
        return None if _FIND_ACTIONS & set(args) else []
    if name == "sort":
        outputs = [args[i + 1] for i, a in enumerate(args[:-1]) if a in ("-o", "--output")]
        return outputs + [a.split("=", 1)[1] for a in args if a.startswith("--output=")]
    if any(a.startswith("-") and not a.startswith("--") and ("r" in a or "R" in a)
           for a in args) and name in ("rm", "cp", "chmod") or "--recursive" in args:
        return None                     # a whole directory: no list of names covers it
    if name in ("cp", "mv"):
        copies = _copies(args)
        if copies is None:
            return None
        moved = [source for source, _ in copies] if name == "mv" else []
        return moved + [d for _, dests in copies for d in dests]
    if name == "tee":
        return _operands(args)
    if name in ("touch", "mkdir", "rm", "rmdir", "unlink", "truncate", "chmod"):
        operands = _operands(args, frozenset({"-s", "--size", "-m", "--mode", "-r",
                                              "--reference", "-d", "--date", "-t"}))
        return operands[1:] if name == "chmod" else operands
    if name == "sed":
        return _sed_targets(args)
    if name == "git" and args:
        return _git_targets(args)
    return None


def _copies(args: list[str]) -> list[tuple[str, list[str]]] | None:
    """Each source of a `cp`/`mv` with the paths it may land on; None when a backup or a
    link the words cannot place may be written too."""
    if any(a in ("--link", "--symbolic-link", "--archive") or a.startswith("--backup")
           or (a.startswith("-") and not a.startswith("--") and set("blsa") & set(a[1:]))
           for a in args):
        return None
    operands = _operands(args, _COPY_VALUES)
    directory = next((args[i + 1] for i, a in enumerate(args[:-1])
                      if a in ("-t", "--target-directory")), None)
    directory = next((a.split("=", 1)[1] for a in args
                      if a.startswith("--target-directory=")), directory)
    if directory is not None:
        return [(s, [os.path.join(directory, os.path.basename(s.rstrip("/")))])
                for s in operands]
    if len(operands) < 2:
        return []                           # an error: nothing is written
    sources, dest = operands[:-1], operands[-1]
    whole = "-T" in args or "--no-target-directory" in args
    into = len(sources) > 1 or dest.endswith("/")
    found: list[tuple[str, list[str]]] = []
    for source in sources:
        inside = os.path.join(dest, os.path.basename(source.rstrip("/")))
        found.append((source, [dest] if whole else [inside] if into else [dest, inside]))
    return found


def _sed_targets(args: list[str]) -> list[str] | None:
    in_place = any(a == "-i" or a.startswith(("-i", "--in-place")) or
                   (a.startswith("-") and not a.startswith("--") and "i" in a[1:])
                   for a in args if a.startswith("-"))
    if not in_place:
        return []                           # sed without -i writes only to stdout
    scripted = any(a in ("-e", "-f", "--expression", "--file") for a in args)
    operands = _operands(args, frozenset({"-e", "-f", "--expression", "--file", "-l"}))
    files = operands if scripted else operands[1:]
    suffixes = [a[2:] for a in args if a.startswith("-i") and len(a) > 2]
    suffixes += [a.split("=", 1)[1] for a in args if a.startswith("--in-place=")]
    return files + [f + s for f in files for s in suffixes if "*" not in s]


def _git_targets(args: list[str]) -> list[str] | None:
    sub, rest = args[0], args[1:]
    if sub in _GIT_READS:
        return []
    if sub == "mv":
        copies = _copies([a for a in rest if a not in ("-f", "-k", "-v", "--force",
                                                     "--verbose", "-n", "--dry-run")])
        if copies is None:
            return None
        return [s for s, _ in copies] + [d for _, dests in copies for d in dests]
    if sub in ("checkout", "restore") and "--" in rest:
        return rest[rest.index("--") + 1:]
    if sub == "restore":
        return _operands(rest, frozenset({"-s", "--source"}))
    if sub in ("add", "commit", "fetch"):
        return []                           # the index and .git only, not the work tree
    return None
