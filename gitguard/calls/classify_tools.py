"""The rule table of agent tools: what each tool Claude Code and Codex ship does, as data.

Split from :mod:`gitguard.calls.classify` like :mod:`gitguard.calls.classify_rules` (the
shell commands' table); read it top to bottom like a policy. The names are those the
real CLIs offer (Claude Code 2.1.332, Codex 0.171, captured in
fixtures/*/tools_request.json); tests/calls/test_classify.py fails on any captured tool
this table does not know. What replaying a tool means decides its row: a lookup repeats
nothing, a delegation's subagent is guarded call by call, a schedule made twice fires
twice.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gitguard.calls.classify_rules import (
    _EDIT,
    _EMAIL,
    _READS,
    _SCRIPT,
    _UNKNOWN,
    _each,
    _local,
    _read,
    _remote,
    _Rule,
    _words,
)
from gitguard.calls.delegation import is_delegation

_DELEGATES = _read("delegates to a subagent; the subagent's own calls are guarded one by one",
                   "agents")
_LOOKUP = _read("only reads the agent's own state")
_BOOKKEEPING = _read("updates the agent's own plan, tasks or goal")
_TALKS = _read("talks to the user or the agent's host; it changes no file")
_MCP_READ = _read("reads an MCP server's resources", "network")
_WEB = _read("reads the web", "network")
_SCHEDULE_ONE = _remote("schedules a prompt to run later; a repeat schedules it again",
                        "medium", ("schedule",))

_TOOLS: dict[str, _Rule] = {
    # Reads of the workspace: files, searches, language-server lookups, images.
    **_each("Read Grep Glob LS LSP NotebookRead BashOutput BashOutputTool TaskOutput TodoRead "
            "read_file list_files list_dir search search_files grep grep_files glob "
            "view_image", _READS),
    # The agent's own state: tool schemas, agents, tasks, schedules, notifications, goals.
    **_each("ToolSearch tool_search ListAgents list_agents TaskGet TaskList CronList "
            "ReadNotifications WaitForMcpServers get_goal", _LOOKUP),
    # A placeholder Claude Code sends so deferred tools stay loadable; it is never run.
    "DeferredToolPlaceholder": _read("is a placeholder the CLI never runs"),
    **_each("WebSearch WebFetch web_search fetch_url", _WEB),
    **_each("ListMcpResourcesTool ReadMcpResourceTool ReadMcpResourceDirTool ListMcpResources "
            "ReadMcpResource ReadMcpResourceDir list_mcp_resources list_mcp_resource_templates "
            "read_mcp_resource", _MCP_READ),
    # Plans and task lists the agent keeps for itself (TodoWrite and update_plan write the
    # whole list, TaskUpdate sets fields): a repeat writes the same state.
    **_each("TodoWrite TaskUpdate update_plan SetGoal ProposeGoal update_goal", _BOOKKEEPING),
    **_each("TaskCreate create_goal",
            _local("adds to the agent's own task list or goal; a repeat adds it again",
                   effects=("agents",))),
    # Questions, reports and mode switches: the user or the host UI sees them, nothing else.
    **_each("AskUserQuestion request_user_input request_permissions ReportFindings "
            "SendUserMessage Brief SendUserFile SubagentHandback EnterPlanMode ExitPlanMode "
            "EndConversation OfferChromeSetup ShowOnboardingRolePicker ShareOnboardingGuide "
            "propose_skills", _TALKS),
    # Skills load instructions into the turn; one that runs a subagent is guarded like one.
    "Skill": _read("loads a skill's instructions; a skill's subagent is guarded call by call"),
    # Containers of subagents: Claude Code's workflows, Codex's multi_agent_v2 tools (the
    # v1 tools and Agent/Task are `is_delegation`).
    **_each("Workflow followup_task send_message interrupt_agent", _DELEGATES),
    # A message another agent or session acts on: it may be outside this workspace's guard
    # (another local session, a cloud session), so a repeat asks.
    "SendMessage": _local("sends a message another agent or session acts on", "ask",
                          "medium", ("agents",)),
    # Scheduling. A cron job created twice fires twice; a loop has one next wake-up, so
    # setting it again (after a resume, the old process's timer is gone) replaces it.
    "CronCreate": _SCHEDULE_ONE,
    "CronDelete": _read("cancels a scheduled job; a repeat finds it gone", "schedule"),
    "ScheduleWakeup": _local("sets when this loop wakes next; a repeat sets it again",
                             effects=("schedule",)),
    **_each("Edit Write MultiEdit NotebookEdit write_file apply_patch edit_file create_file",
            _EDIT),
    **_each("TaskStop KillShell KillBash",
            _local("stops a background task or shell", effects=("process",))),
    "EnterWorktree": _local("creates or enters a git worktree"),
    # Monitor streams a command's output, judged as the command (COMMAND_TOOLS), or a
    # WebSocket's frames: this row.
    "Monitor": _read("watches a WebSocket", "network"),
    "js_repl": _SCRIPT,
    "PushNotification": _remote("sends a push notification to the user's devices", "low",
                                ("notification",)),
    "SendFeedback": _remote("sends feedback to the CLI's vendor", "low", ("network", "external")),
    "send_email": _EMAIL,
}

# Tools that run a shell command (`command`, `cmd` or `argv` in their input): judged by
# the command; without one, by their row in _TOOLS if they have one.
COMMAND_TOOLS = _words("Bash run_command shell exec bash execute_command run_shell_command "
                       "exec_command shell_command local_shell unified_exec PowerShell Monitor")


@dataclass(frozen=True)
class ByField:
    """A tool whose effect one input field names (`action`, `method`): the rule for its
    value, ``rules[""]`` when the field is absent, ``other`` for any other value. A named
    value is shown in the reason (`Artifact list`) unless the field holds free text."""

    field: str
    rules: Mapping[str, _Rule]
    other: _Rule
    names_value: bool = True

    def rule(self, tool_input: Mapping[str, object]) -> tuple[str, _Rule]:
        value = tool_input.get(self.field)
        key = value if isinstance(value, str) else ""
        return key, self.rules.get(key, self.other)


_CLOUD_READ = _read("reads the user's cloud workspace", "network")
_PUBLISH_PAGE = _local("publishes a page to the user's cloud workspace", "ask", "medium",
                       ("network", "external"))
_PROCESS_INPUT = _local("types into a running command", "ask", "medium", ("process",))

BY_FIELD: dict[str, ByField] = {
    "Artifact": ByField("action", {
        **_each("list read list_types status list_assets read_asset", _CLOUD_READ),
        **_each("watch unwatch pin unpin", _read("marks an artifact", "network")),
        **_each("publish upload_asset", _PUBLISH_PAGE), "": _PUBLISH_PAGE,
        "delete_asset": _local("deletes an artifact's asset", "ask", "medium",
                               ("network", "external"))}, _PUBLISH_PAGE),
    "Projects": ByField("method", {
        **_each("project_info project_read project_search project_memory_list "
                "project_memory_read", _CLOUD_READ),
        "project_write": _PUBLISH_PAGE,
        "project_delete": _local("deletes a project document", "ask", "high",
                                 ("network", "external"))}, _CLOUD_READ),
    "RemoteTrigger": ByField("action", {
        **_each("list get list_runs get_run_log", _read("reads remote triggers", "network")),
        "update": _local("changes a remote trigger", "ask", "medium", ("network", "external")),
        **_each("create create_webhook_trigger", _remote("creates a remote trigger")),
        "run": _remote("runs a remote agent")}, _remote("changes remote triggers")),
    "ClaudeDesign": ByField("operation", {"list": _read("lists design operations", "network")},
                            _remote("runs a design operation on a remote service", "medium")),
    "ExitWorktree": ByField("action", {
        "keep": _local("leaves the worktree and keeps it"),
        "remove": _local("removes the worktree and its branch", "ask", "high")},
        _UNKNOWN),
    # Codex's write_stdin: no characters only polls the running command's output.
    "write_stdin": ByField("chars", {"": _read("polls a running command's output")},
                           _PROCESS_INPUT, names_value=False),
}

# Codex prefixes a namespaced tool's hook name with its namespace: the multi-agent tools
# arrive as `multi_agent_v1wait_agent` (and `spawn_agent` bare), multi_agent_v2's
# namespace is `collaboration`.
_NAMESPACE = re.compile(r"^(?:multi_agent_v\d+|collaboration)(?:__|[.:/])?")


def tool_key(tool: str) -> str:
    """The table's name for a hook's tool name: a Codex namespace prefix is dropped when
    what follows is a tool the table knows."""
    bare = _NAMESPACE.sub("", tool, count=1)
    if bare != tool and (bare in _TOOLS or bare in BY_FIELD or is_delegation(bare)):
        return bare
    return tool


UNKNOWN_TOOL = _Rule(_UNKNOWN.idempotency, _UNKNOWN.replay, _UNKNOWN.risk, _UNKNOWN.effects,
                     "is not a known tool")


def is_unknown_tool(reason: str) -> bool:
    """Whether a ledger entry's classification reason is the unknown-tool default (a
    project override's reason names its table instead)."""
    return reason.startswith("`") and reason.endswith(
        f"` {UNKNOWN_TOOL.what} ({UNKNOWN_TOOL.idempotency})")
