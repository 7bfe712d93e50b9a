"""The recovery note is a pure function of the facts resume gathered: a table of cases."""

from __future__ import annotations

import pytest

from gitguard.recovery.note import MAX_CHANGED, MAX_DO_NOT_REPEAT, CallFact, NoteFacts, PathFact
from gitguard.recovery.note import render as render_note

APPLY = CallFact("call_13", "apply_patch", "succeeded", "patch src/app.py", "conditional",
                 ("filesystem",))
NPM_TEST = CallFact("call_15", "run_command", "failed", "npm test", "conditional", (),
                    error_summary="2 tests failed | expected 200, got 500")
EMAIL = CallFact("call_16", "send_email", "uncertain", "to: ops@example.com", "non_idempotent",
                 ("email",))

DESIGN_EXAMPLE = """\
System resumed from checkpoint.
Checkpoint: ckpt_20260814_004
Last completed step: step_8.
Tool run_command(call_15) ran `npm test`: failed. Error summary: 2 tests failed | expected 200, got 500.
Tool send_email(call_16) started but its outcome is unknown: it is not idempotent; check the recipient's mailbox before doing anything.
Settle an uncertain call with `gitguard reconcile CALL --status succeeded|failed` once you have checked.
Do not repeat: apply_patch(call_13), run_command(call_15), send_email(call_16).
Plan the next step from these observations.
"""  # noqa: E501

NOTHING_YET = """\
System resumed from checkpoint.
Checkpoint: none (no complete checkpoint; the workspace is as found).
Last completed step: none yet.
Do not repeat: nothing.
Plan the next step from these observations.
"""

WORKSPACE = """\
System resumed from checkpoint.
Checkpoint: ckpt_20260101_002
Skipped checkpoint ckpt_20260101_003: it is corrupt: sha256 mismatch.
Skipped checkpoint file checkpoints/incomplete/ckpt_20260101_004.json: it is incomplete.
Last completed step: step_2.
HEAD moved since the checkpoint: aaaaaaaaaaaa -> bbbbbbbbbbbb.
The branch changed since the checkpoint: main -> (detached).
Changed since the checkpoint: notes.md by the user; src/app.py by call_3 (exact); out.txt by call_4 or the user (ambiguous).
Conflict: src/app.py no longer holds what call_2 wrote; decide whether to keep the current content before continuing on it.
Tool Write(call_2) ran `src/app.py`: succeeded.
Do not repeat: nothing.
Plan the next step from these observations.
"""  # noqa: E501

ODD_CALLS = """\
System resumed from checkpoint.
Checkpoint: ckpt_x
Last completed step: step_1.
3 earlier call(s) finished before these (see `gitguard explain`).
Tool Write(call_5) was planned but never started: it did not run.
Tool Read(call_6) started but its outcome is unknown: it is idempotent; it is safe to run it again.
Tool Bash(call_7) started but its outcome is unknown: it is conditional (safe again only if its effect is absent); check the files it writes (`gitguard status`) before doing anything.
Tool mcp__x__y(call_8) started but its outcome is unknown: it is not idempotent; check the remote service it talks to before doing anything.
Tool Bash(call_9) started but its outcome is unknown: it is not idempotent; check the remote repository (`git ls-remote`) before doing anything.
Tool Bash(call_10) ran: failed.
Settle an uncertain call with `gitguard reconcile CALL --status succeeded|failed` once you have checked.
Do not repeat: Bash(call_9).
Plan the next step from these observations.
"""  # noqa: E501

CASES = [
    ("the DESIGN.md example",
     NoteFacts("ckpt_20260814_004", "step_8", calls=[NPM_TEST, EMAIL],
               do_not_repeat=[APPLY, NPM_TEST, EMAIL]),
     DESIGN_EXAMPLE),
    ("nothing recorded", NoteFacts(None, None), NOTHING_YET),
    ("workspace moved on",
     NoteFacts("ckpt_20260101_002", "step_2",
               calls=[CallFact("call_2", "Write", "succeeded", "src/app.py")],
               changed=[PathFact("notes.md", "user", "window"),
                        PathFact("src/app.py", "call_3", "exact"),
                        PathFact("out.txt", "call_4", "ambiguous")],
               conflicts=[PathFact("src/app.py", "call_2", "exact")],
               head_then="a" * 40, head_now="b" * 40, branch_then="main", branch_now=None,
               skipped=[("checkpoint ckpt_20260101_003", "it is corrupt: sha256 mismatch"),
                        ("checkpoint file checkpoints/incomplete/ckpt_20260101_004.json",
                         "it is incomplete")]),
     WORKSPACE),
    ("never started, idempotent, conditional, mcp, push, no summary",
     NoteFacts("ckpt_x", "step_1", earlier_finished=3, calls=[
         CallFact("call_5", "Write", "failed", "a.txt", never_started=True),
         CallFact("call_6", "Read", "uncertain", "a.txt", "idempotent"),
         CallFact("call_7", "Bash", "uncertain", "make", "conditional", ("filesystem",)),
         CallFact("call_8", "mcp__x__y", "uncertain", "", "non_idempotent", ("external",)),
         CallFact("call_9", "Bash", "uncertain", "git push", "non_idempotent",
                  ("network", "vcs_remote")),
         CallFact("call_10", "Bash", "failed", "")],
               do_not_repeat=[CallFact("call_9", "Bash", "uncertain")]),
     ODD_CALLS),
]


@pytest.mark.parametrize(("facts", "expected"), [(f, e) for _, f, e in CASES],
                         ids=[name for name, _, _ in CASES])
def test_recovery_note(facts: NoteFacts, expected: str) -> None:
    assert render_note(facts) == expected


def test_long_lists_are_cut_to_the_newest() -> None:
    many = [CallFact(f"call_{i}", "Bash", "succeeded", "npm publish", "non_idempotent")
            for i in range(1, 101)]
    changed = [PathFact(f"f{i}.txt", "user", "window") for i in range(MAX_CHANGED + 5)]
    note = render_note(NoteFacts("c", "s", do_not_repeat=many, changed=changed))
    kept = ", ".join(f"Bash(call_{i})" for i in range(101 - MAX_DO_NOT_REPEAT, 101))
    assert f"Do not repeat: {100 - MAX_DO_NOT_REPEAT} earlier call(s) and {kept}.\n" in note
    assert f"f{MAX_CHANGED - 1}.txt by the user; and 5 more.\n" in note
    assert f"f{MAX_CHANGED}.txt" not in note
