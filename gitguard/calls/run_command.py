"""`gitguard run -- CMD ...`: one command as one ledgered call.

The call is classified by its command line (`npm publish` is never replayed), begun
(durable before the command starts), the command's stdout and stderr pass through
unchanged while a copy of each is kept and stored as an artifact once the command
ends (redacted like every result, sealed when encryption is on, 0600), signals sent to
gitguard reach the command, and its exit status becomes gitguard's. The child knows
its call: GITGUARD_CALL_ID and GITGUARD_SESSION are set in its environment, so the
git hooks attribute a `git checkout` it runs to this call, not to the user.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gitguard.calls.classify import classify_command
from gitguard.errors import GitguardError
from gitguard.models import ToolLedgerEntry

if TYPE_CHECKING:
    from gitguard.guard_context import GuardContext

DEFAULT_TOOL = "run_command"
FORWARDED = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1,
             signal.SIGUSR2)
TAIL = 4096
CHUNK = 65536
# What of each stream the artifact keeps: its first and its last KEPT / 2 bytes. The
# terminal gets every byte; the copy waits in memory until the command ends (see _Tee),
# so a command that prints gigabytes must not make gitguard hold them all.
KEPT = 16 * 1024 * 1024


@dataclass(frozen=True)
class Ran:
    exit_code: int
    entry: ToolLedgerEntry


def _executable(argv0: str, cwd: Path) -> bool:
    if "/" in argv0:
        path = Path(argv0) if Path(argv0).is_absolute() else cwd / argv0
        return path.is_file() and os.access(path, os.X_OK)
    return shutil.which(argv0) is not None


class _Tee(threading.Thread):
    """Copies one pipe to the terminal and keeps a copy in memory for the artifact.

    The copy is stored only when the command has ended: a secret it printed is redacted
    from the whole stream at once (a chunk boundary could split it), and nothing of it
    reaches the disk unredacted. An artifact file written as the output arrived was
    0644 and held every token in plain text."""

    def __init__(self, source: IO[bytes], sink: IO[bytes], name: str) -> None:
        super().__init__(daemon=True)
        self.source, self.sink, self.name = source, sink, name
        self.head = bytearray()      # the first KEPT / 2 bytes
        # The last KEPT / 2 bytes after the head, a ring made once the head is full: no
        # allocation per read. (A bytes object per read, kept then dropped, let malloc's
        # heap grow with the whole output under load: 311 MB for 256 MB printed.)
        self.ring = bytearray()
        self.at = 0                  # where the ring's next byte goes
        self.ring_used = 0
        self.size = 0

    @property
    def copy(self) -> bytes:
        """What the artifact stores: the whole stream, or its head and tail around a line
        that says how many bytes were left out (cut at line ends, so a token on one line
        is never cut in two)."""
        if self.ring_used < len(self.ring) or not self.ring:
            tail = bytes(self.ring[:self.ring_used])
        else:
            tail = bytes(self.ring[self.at:]) + bytes(self.ring[:self.at])
        if len(self.head) + len(tail) == self.size:           # nothing dropped
            return bytes(self.head) + tail
        head = self.head[:self.head.rfind(b"\n") + 1] or self.head
        tail = tail[tail.find(b"\n") + 1:] or tail
        left = self.size - len(head) - len(tail)
        return bytes(head) + f"[gitguard: {left} bytes left out]\n".encode() + tail

    def _keep(self, data: memoryview) -> None:
        half = KEPT // 2
        self.size += len(data)
        room = half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if not self.ring:
            self.ring = bytearray(half)
        data = data[-half:]
        end = self.at + len(data)
        if end <= half:
            self.ring[self.at:end] = data
        else:
            first = half - self.at
            self.ring[self.at:] = data[:first]
            self.ring[:end - half] = data[first:]
        self.at = end % half
        self.ring_used = min(half, self.ring_used + len(data))

    def run(self) -> None:
        passing = True
        fd = self.source.fileno()
        buffer = bytearray(CHUNK)
        view = memoryview(buffer)
        while n := os.readv(fd, [buffer]):
            data = view[:n]
            self._keep(data)
            if passing:
                try:
                    self.sink.write(data)
                    self.sink.flush()
                except OSError:  # our reader went away (`| head`): keep recording
                    passing = False


@contextmanager
def _forward_signals(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """While the command runs, a signal sent to gitguard goes to the command instead."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def forward(signum: int, _frame: Any) -> None:
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in FORWARDED}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _exit_code(returncode: int) -> tuple[int, str]:
    if returncode < 0:
        name = signal.Signals(-returncode).name
        return 128 - returncode, f"killed by {name}"
    return returncode, f"exit code {returncode}"


def run(guard: GuardContext, argv: Sequence[str], *, stdout: IO[bytes], stderr: IO[bytes],
        cwd: Path | None = None, tool: str = DEFAULT_TOOL, step_id: str | None = None,
        session_id: str | None = None, confirm: bool = False,
        force_replay: bool = False) -> Ran:
    if not argv:
        raise GitguardError("gitguard run needs a command", "for example: gitguard run -- npm test")
    cwd = (cwd or Path.cwd()).resolve()
    if not _executable(argv[0], cwd):
        raise GitguardError(f"command not found: {argv[0]}",
                            "check the spelling, or give the program's path")
    tool_input = {"argv": list(argv), "cwd": os.path.relpath(cwd, guard.ws.root)}
    explicit: dict[str, Any] = {}
    if tool != DEFAULT_TOOL and tool not in guard.settings.tools:
        # A name of the caller's choosing: still judged by the command line it runs.
        cls = classify_command(list(argv))
        explicit = {"idempotency": cls.idempotency, "replay": cls.replay_policy,
                    "risk": cls.risk_level, "side_effects": cls.side_effects}
    entry = guard.begin_call(tool, tool_input, step_id=step_id, session_id=session_id,
                             confirm=confirm, force_replay=force_replay, **explicit)
    call_id = entry.call_id
    env = {**os.environ, "GITGUARD_CALL_ID": call_id, "GITGUARD_SESSION": entry.session_id}
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd, env=env, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
    except OSError as exc:
        failed = guard.end_call(call_id, "failed", f"could not start {argv[0]}: {exc.strerror}")
        return Ran(126 if isinstance(exc, PermissionError) else 127, failed)
    assert proc.stdout is not None and proc.stderr is not None
    tees = [_Tee(proc.stdout, stdout, f"stdout_{call_id}.txt"),
            _Tee(proc.stderr, stderr, f"stderr_{call_id}.txt")]
    with _forward_signals(proc):
        for tee in tees:
            tee.start()
        returncode = proc.wait()
        for tee in tees:
            tee.join()
    code, how = _exit_code(returncode)
    out, err = tees
    store = guard.store
    stored = [store.privacy.redact_bytes(tee.copy) for tee in tees]
    for tee, data in zip(tees, stored, strict=True):
        store.write_artifact(tee.name, data, sync_dir=False)
    store.sync_artifacts()      # durable before end_call's record names them
    # The tails come last but one, so the ledger's error summary shows stderr's last lines.
    # Cut from the redacted streams: a tail cut first could start inside a token whose
    # prefix (what the redactor recognises) it left out.
    result = (f"stdout: artifacts/{out.name} ({out.size} bytes), stderr: "
              f"artifacts/{err.name} ({err.size} bytes)\n"
              + b"".join(data[-TAIL:] for data in stored).decode(errors="replace")
              + f"\n{how}\n")
    finished = guard.end_call(call_id, "succeeded" if returncode == 0 else "failed", result)
    return Ran(code, finished)
