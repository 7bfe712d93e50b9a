"""One error boundary (gitguard.error_boundary): an error raised in the daemon reaches the
Python API's caller as the same class, message, hint and exit code it has without a daemon,
a bug in the daemon is a crash log and exit 3 there too, and every error class has its
own stable code on the wire."""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

import pytest

import gitguard
from gitguard import error_boundary, errors
from gitguard.api import Guard
from gitguard.ipc import wire
from tests.helpers.commands import gg
from tests.helpers.daemons import request, running_daemon, store_of


def _all_error_classes() -> list[type[errors.GitguardError]]:
    for info in pkgutil.walk_packages(gitguard.__path__, "gitguard."):
        if not info.name.startswith(("gitguard.demo.run", "gitguard.__main__")):
            importlib.import_module(info.name)
    found, todo = [], [errors.GitguardError]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def test_every_error_class_has_its_own_code_and_crosses_the_wire_unchanged() -> None:
    classes = _all_error_classes()
    assert len(classes) > 5
    for cls in classes:
        assert "code" in cls.__dict__, f"{cls.__name__} names no wire code"
        assert errors.BY_CODE[cls.code] is cls
        answer = error_boundary.to_wire(cls("what went wrong", "how to fix it"))
        assert answer["stderr"] == "Error: what went wrong\nHint: how to fix it\n"
        assert answer["exit"] == cls.exit_code
        back = error_boundary.from_wire(wire.decode(wire.encode(answer)), "a test")
        assert (type(back), back.message, back.hint, back.exit_code) == (
            cls, "what went wrong", "how to fix it", cls.exit_code)
    with pytest.raises(TypeError, match="taken"):
        type("Twin", (errors.GitguardError,), {"code": errors.UnknownId.code})


def _failures(repo: Path) -> list[tuple[type[BaseException], str, str | None, int]]:
    """The same three failing API calls, as the caller sees them."""
    seen = []
    with Guard.open(repo) as guard:
        for attempt in (lambda: guard.end_call("call_404", "succeeded"),
                        lambda: guard.end_call("call_1", "succeeded"),
                        lambda: guard.begin_call("send_email", {"to": "x@y.z"},
                                                 replay="never")):
            with pytest.raises(errors.GitguardError) as raised:
                attempt()
            exc = raised.value
            seen.append((type(exc), exc.message, exc.hint, exc.exit_code))
    return seen


def test_an_error_in_the_daemon_reaches_the_api_as_it_is_without_one(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with Guard.open(repo) as guard:
        done = guard.begin_call("send_email", {"to": "x@y.z"}, replay="never")
        guard.end_call(done.call_id, "succeeded")
    with running_daemon(repo):
        through_daemon = _failures(repo)
        served = request(repo, "status")["result"]["requests"]["recent"]
    assert len([r for r in served if r["op"].startswith("api.")]) == 3, served
    assert through_daemon == _failures(repo)
    assert [(c, code) for c, _, _, code in through_daemon] == [
        (errors.UnknownId, 1), (errors.IllegalTransition, 1), (errors.ReplayRefused, 4)]


def test_a_bug_in_the_daemon_is_a_crash_log_and_exit_3_for_every_client(repo: Path) -> None:
    gg(repo, "init", "--no-hooks", "--no-daemon")
    with running_daemon(repo):
        # a request no gitguard client sends: end_call() gets an argument it does not take
        answer = request(repo, "api.end_call", kwargs={"no_such_argument": 1},
                         cwd=str(repo), env={})
    assert answer["exit"] == 3 and answer["error"]["code"] == "internal"
    assert answer["stderr"].startswith("Error: internal error: TypeError: ")
    raised = error_boundary.from_wire(answer, "api.end_call")
    assert isinstance(raised, errors.InternalError) and raised.exit_code == 3
    assert raised.hint is not None and raised.hint.startswith("this is a bug in gitguard; "
                                                              "the crash log is ")
    log = Path(raised.hint.rsplit(" ", 1)[1])
    assert log.parent == store_of(repo) and "no_such_argument" in log.read_text()
