"""The no-daemon scan: `git status` against gitguard's private stat index.

The stat index is a private index file, seeded from a byte copy of the user's index
so its first scan re-hashes only what is dirty; it keeps git's untracked cache, so a
scan stats unchanged directories instead of reading them. The very first snapshot
scans the user's index itself, read-only (`first_scan`), and the copy is made at the
scan after it. The user's `.git/index` is only ever read. (Split out of snapshotter.py,
which builds and records the trees.)
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gitguard import faults
from gitguard.git.commands import run_git
from gitguard.git.objects import NOTHING_THERE
from gitguard.settings import Settings
from gitguard.snapshot import prescan
from gitguard.storage import durable
from gitguard.storage.store import Store
from gitguard.workspace import Workspace

# Settings for every git command on the private stat index (never the user's index).
# index.skipHash=false: `feature.manyFiles` turns skipHash on in git >= 2.40, and an index
# written without its checksum would send stat_tree (keyed to that checksum) the slow way
# at every scan. Older git ignores the unknown key.
_PRIVATE_INDEX_CONFIG = ("-c", "core.untrackedCache=true", "-c", "index.skipHash=false")

# An lstat failing with these finds nothing there: gone, below a file, or a name longer
# than the file system holds (an agent's 300-byte name: no file can have it).



class StatScan:
    """What changed since the stat index was last brought up to date (Snapshotter's base)."""

    store: Store
    ws: Workspace
    settings: Settings
    # Set while the first snapshot scans against the user's own index (`first_scan`): git
    # then only reads it (no optional locks, no untracked cache to write) and reports
    # submodules' commits, which that snapshot's tree takes from the index.
    _read_only_index: Path | None = None
    # The untracked directories the last scan's first status collapsed (`?? dir/`), each
    # listed by a second, narrower status (`stat_tree.settle` keeps them from staying so).
    untracked_dirs: tuple[bytes, ...] = ()

    def _git(self, args: list[str], stdin: bytes | None = None, write_back: bool = False
             ) -> bytes:
        # The stat index is ours: git may keep its untracked cache (directory stat data, so
        # an unchanged directory is not read again) and refreshed stat data in it.
        # `write_back` lets `git status` write them (its "optional" index write).
        if self._read_only_index is not None:
            return run_git(args, git_dir=self.ws.git_dir, work_tree=self.ws.root,
                           env={"GIT_INDEX_FILE": str(self._read_only_index)},
                           stdin=stdin).stdout
        env = {"GIT_INDEX_FILE": str(self.store.stat_index)}
        if write_back:
            env["GIT_OPTIONAL_LOCKS"] = "1"
        return run_git([*_PRIVATE_INDEX_CONFIG, *args], git_dir=self.ws.git_dir,
                       work_tree=self.ws.root, env=env, stdin=stdin).stdout

    def _seed_stat_cache(self) -> None:
        if self.store.stat_index.exists():
            return
        user_index = self.ws.user_index
        if user_index is not None and user_index.is_file():
            # A byte copy: git then trusts the user's stat data and re-hashes only dirty files.
            # The copy keeps the original's mtime: git treats an entry as racily clean (and
            # compares content) when its mtime is not older than the index file's, so a copy
            # stamped "now" would trust a same-size edit made in the second of the user's
            # last index write. The mtime is taken before the bytes: never newer than them.
            # Not fsynced: git rewrites this file on every later scan without an fsync
            # (an index is not in git's core.fsync default), so one here would buy nothing
            # and costs a synchronous write of the whole index (11 MB at 100k files).
            before = user_index.stat()
            target = self.store.stat_index
            for stale in target.parent.glob(f".{target.name}.*.tmp*"):
                stale.unlink(missing_ok=True)       # a seed killed before its rename
            tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, durable.FILE_MODE)
            try:
                with os.fdopen(fd, "wb") as fh:
                    fh.write(user_index.read_bytes())
                os.utime(tmp, ns=(before.st_atime_ns, before.st_mtime_ns))
                self._seed_as_v4(tmp)
                os.replace(tmp, target)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

    def _seed_as_v4(self, copy: Path) -> None:
        """The seed copy rewritten as a v4 index when it is not one (the user's is usually
        v2): v4 prefix-compresses the paths, 11.15 -> 7.81 MB at 100k files, and every
        later scan's `git status` reads (and may rewrite) the whole stat index. The entries
        and their stat data stay as they are, so the lag state of the user's index (a first
        snapshot's, `stat_tree`) is re-keyed to the new checksum. git's own write keeps the
        racy-clean rule: an entry not older than the copy's (preserved) mtime is smudged."""
        try:
            with open(copy, "rb") as fh:
                header = fh.read(8)
        except FileNotFoundError:
            return
        if header[:4] != b"DIRC" or header[4:8] == b"\0\0\0\x04":
            return
        from gitguard.snapshot import stat_tree

        copied = stat_tree.index_checksum(copy)
        faults.point("stat.after_copy")
        proc = run_git([*_PRIVATE_INDEX_CONFIG, "update-index", "--index-version", "4"],
                       git_dir=self.ws.git_dir, work_tree=self.ws.root,
                       env={"GIT_INDEX_FILE": str(copy)}, check=False)
        if proc.returncode != 0:
            return      # git left the copy as it was (it writes through a lock file)
        self._keep_private(copy)            # git's lock file has the umask's mode
        faults.point("stat.after_convert")
        if copied is not None:
            stat_tree.rekey(self.store.root, copied, copy)
        faults.point("stat.after_rekey")

    def scan(self) -> tuple[list[bytes], list[str]]:
        """Paths changed since the last snapshot, and what was left out (big files, dep dirs).

        Untracked directories come back collapsed (`-unormal`), so git never walks a new
        node_modules: a collapsed directory named like a dependency or build directory is
        left out whole; the others are listed file by file in a second, narrower call.
        """
        self._seed_stat_cache()
        # `gitguard resume` with no daemon may have started this very status before its
        # imports (gitguard.snapshot.prescan): its output, when it still holds for this index.
        early = prescan.take(self.ws.git_dir, self.ws.root, self.store.stat_index)
        out = early if early is not None else self._status("--untracked-files=normal")
        return self._scan_from(out)

    def _scan_from(self, out: bytes) -> tuple[list[bytes], list[str]]:
        """`scan` from the output of its first status (`--untracked-files=normal`)."""
        changed, skipped, new_dirs = self._parse_status(out)
        self.untracked_dirs = tuple(new_dirs)
        # A tracked file that became a directory: `-unormal` shows only the deletion, never
        # the untracked directory in its place, so list that directory explicitly.
        root = os.fsencode(self.ws.root)
        for path in changed:
            full = os.path.join(root, path)
            if os.path.isdir(full) and not os.path.islink(full) and path + b"/" not in new_dirs:
                new_dirs.append(path + b"/")
        for start in range(0, len(new_dirs), 64):
            chunk = new_dirs[start:start + 64]
            excludes = [f":(exclude,glob){_glob_escape(d)}**/{_glob_escape(n)}/**"
                        for d in chunk for n in self.settings.skip_dirs]
            inner = self._status("--untracked-files=all", "--",
                                 *(":(literal)" + os.fsdecode(d) for d in chunk), *excludes)
            more, more_skipped, _ = self._parse_status(inner)
            changed += more
            skipped += more_skipped + self._nested_skip_dirs(chunk)
        return changed, skipped

    def _status(self, *args: str) -> bytes:
        submodules = "dirty" if self._read_only_index is not None else "all"
        return self._git(["status", "--porcelain=v2", "-z", "--no-renames",
                          f"--ignore-submodules={submodules}", *args], write_back=True)

    def _parse_status(self, out: bytes) -> tuple[list[bytes], list[str], list[bytes]]:
        changed: list[bytes] = []
        skipped: list[str] = []
        new_dirs: list[bytes] = []
        tokens = iter(out.split(b"\0"))
        for token in tokens:
            if not token:
                continue
            kind = token[:1]
            if kind == b"1":
                fields = token.split(b" ", 8)
                if fields[1][1:2] != b".":
                    changed.append(fields[8])
            elif kind == b"2":
                fields = token.split(b" ", 9)
                changed.append(fields[9])
                changed.append(next(tokens, b""))
            elif kind == b"u":
                changed.append(token.split(b" ", 10)[10])
            elif kind == b"?":
                path = token[2:]
                if path.endswith(b"/") and not self._is_repository(path):
                    name = os.fsdecode(path.rstrip(b"/").rsplit(b"/", 1)[-1])
                    if name in self.settings.skip_dirs:
                        skipped.append(os.fsdecode(path))
                    else:
                        new_dirs.append(path)
                elif self._too_large(path):
                    skipped.append(os.fsdecode(path))
                else:
                    changed.append(path)
        return changed, skipped, new_dirs

    def _is_repository(self, path: bytes) -> bool:
        # git shows a nested repository as one untracked entry even with -uall; keep the
        # core's handling of it (update-index records it) instead of walking into it.
        return os.path.exists(os.path.join(os.fsencode(self.ws.root), path, b".git"))

    def _nested_skip_dirs(self, new_dirs: list[bytes]) -> list[str]:
        """Dependency dirs inside new directories, which the narrow call excluded: found by
        walking those directories (never into a dependency dir or a nested repository),
        then listed as git shows them."""
        names = {os.fsencode(n) for n in self.settings.skip_dirs}
        root = os.fsencode(self.ws.root)
        found: list[bytes] = []
        for new in new_dirs:
            for top, dirs, _ in os.walk(os.path.join(root, new)):
                here = os.path.relpath(top, root) + b"/"
                found += [here + d + b"/" for d in dirs if d in names]
                dirs[:] = [d for d in dirs if d not in names
                           and not os.path.lexists(os.path.join(top, d, b".git"))]
        if not found:
            return []
        # git's own answer, as for the top level: one it ignores, or that holds nothing to
        # show (empty, or only ignored files), is not listed.
        out = self._status("--untracked-files=normal", "--",
                           *(":(literal)" + os.fsdecode(p) for p in found))
        return self._parse_status(out)[1]

    def _too_large(self, path: bytes) -> bool:
        try:
            info = os.lstat(os.path.join(os.fsencode(self.ws.root), path))
        except OSError:
            return False
        return stat.S_ISREG(info.st_mode) and info.st_size > self.settings.untracked_size_cap

    def _to_v4(self) -> tuple[str, ...]:
        """`--index-version 4` while the stat index is in another format (a seed copies the
        user's index, usually v2): v4 prefix-compresses the paths, 11.2 -> 7.8 MB at 100k
        files, so every later read, write and checksum of it is a third smaller. It rides
        on an update-index that runs anyway: no process of its own."""
        try:
            with open(self.store.stat_index, "rb") as fh:
                header = fh.read(8)
        except OSError:
            return ()
        return () if header == b"DIRC\0\0\0\x04" else ("--index-version", "4")

    def _sizes(self, paths: list[bytes]) -> int:
        root = os.fsencode(self.ws.root)
        total = 0
        for path in paths:
            try:
                total += os.lstat(os.path.join(root, path)).st_size
            except OSError:
                continue
        return total

    @staticmethod
    def _keep_private(path: Path) -> None:
        # git rewrites its index through a lock file created with the umask's mode (0644);
        # the stat cache lists the user's paths, so it stays 0600 like every store file.
        try:
            if stat.S_IMODE(os.stat(path).st_mode) != durable.FILE_MODE:
                os.chmod(path, durable.FILE_MODE)
        except FileNotFoundError:
            pass


def _glob_escape(text: str | bytes) -> str:
    raw = os.fsdecode(text)
    return "".join("\\" + c if c in "*?[]\\" else c for c in raw)


def lstat_inside(root: bytes, parts: list[bytes]) -> os.stat_result | None:
    """The path's own lstat; None when it is gone or lies below a non-directory (git does
    not look through a symlinked directory). Other errors (a permission) are raised."""
    here = root
    for part in parts[:-1]:
        here = os.path.join(here, part)
        try:
            if not stat.S_ISDIR(os.lstat(here).st_mode):
                return None
        except OSError as exc:
            if exc.errno in NOTHING_THERE:
                return None
            raise
    try:
        return os.lstat(os.path.join(here, parts[-1]))
    except OSError as exc:
        if exc.errno in NOTHING_THERE:
            return None
        raise


def gone_path(root: bytes, rel: bytes) -> bool:
    """True when `rel` no longer names a file: missing, below a non-directory, or out of
    reach."""
    try:
        return lstat_inside(root, rel.rstrip(b"/").split(b"/")) is None
    except OSError:
        return True


