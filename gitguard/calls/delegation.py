"""Delegations: the tools that hand work to a subagent (stdlib only, no rule tables).

Classification (`calls.classify_tools`) and the call lifecycle (through `calls.tools`)
need the same answer; this module is imported by both and imports neither.
"""

from __future__ import annotations

# Tools that hand work to a subagent (Claude Code's Agent and Task; Codex's multi-agent
# tools, whose hook names may carry a prefix such as `multi_agent_v1`). A delegation is a
# container: it owns no file change and opens no attribution window (its subagent's own
# calls do both), and launching it again is no replay: those calls are guarded one by one.
DELEGATION_TOOLS = frozenset({"Agent", "Task", "Workflow"})
DELEGATION_SUFFIXES = ("spawn_agent", "send_input", "resume_agent", "wait_agent",
                       "close_agent", "followup_task", "send_message", "interrupt_agent")


def is_delegation(tool: str) -> bool:
    return tool in DELEGATION_TOOLS or tool.endswith(DELEGATION_SUFFIXES)
