"""The replay rule shared by the guard, resume and explain, over every combination."""

from __future__ import annotations

import itertools

import pytest

from gitguard.ledger.replay import blocks, effective_policy, verdict
from gitguard.models import ToolLedgerEntry

STATUSES = ("planned", "approved", "started", "succeeded", "failed", "uncertain")
IDEMPOTENCY = ("idempotent", "conditional", "non_idempotent")
POLICIES = ("auto", "ask", "never")


def entry(status: str, idempotency: str, policy: str) -> ToolLedgerEntry:
    return ToolLedgerEntry.model_validate({
        "callId": "call_1", "stepId": "step_1", "toolName": "Bash", "inputHash": "sha256:x",
        "status": status, "riskLevel": "low", "idempotency": idempotency,
        "replayPolicy": policy, "sessionId": "s1", "plannedAt": "2026-01-01T00:00:00.000Z",
        "classificationReason": "`x` does x (" + idempotency + ")"})


@pytest.mark.parametrize(("status", "idempotency", "policy"),
                         list(itertools.product(STATUSES, IDEMPOTENCY, POLICIES)))
def test_blocks_is_the_verdict(status: str, idempotency: str, policy: str) -> None:
    call = entry(status, idempotency, policy)
    assert blocks(call) == (not verdict(call).replayable)
    may_have_run = status in ("started", "succeeded", "uncertain")
    expected = may_have_run and (policy != "auto" or idempotency == "non_idempotent")
    assert blocks(call) == expected, "invariant 4: non-idempotent is never auto-replayed"


def test_the_stricter_policy_wins() -> None:
    prior = entry("succeeded", "conditional", "never")
    assert effective_policy(prior, "auto") == "never"
    assert effective_policy(entry("succeeded", "non_idempotent", "auto"), "auto") == "ask"
    assert effective_policy(entry("succeeded", "idempotent", "auto"), "ask") == "ask"
    assert verdict(prior).why == ("it succeeded; `x` does x (conditional); replay policy never")
