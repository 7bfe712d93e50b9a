"""Classification of tool calls and shell commands: a table of real command lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitguard.calls.classify import (
    Classification,
    ToolPolicy,
    classify_call,
    classify_command,
    is_unknown_tool,
)
from gitguard.calls.shell_parse import split_argv, split_commands


class Row(NamedTuple):
    command: str
    idempotency: str
    replay: str
    risk: str | None = None  # checked only where it matters
    names: str | None = None  # a part of the line the reason must name


ROWS: list[Row] = [
    # Read-only commands.
    Row("ls", "idempotent", "auto", "low"),
    Row("ls -la src/", "idempotent", "auto", "low"),
    Row("cat x", "idempotent", "auto", "low"),
    Row("head -n 20 README.md", "idempotent", "auto"),
    Row("tail -f log.txt", "idempotent", "auto"),
    Row("wc -l *.py", "idempotent", "auto"),
    Row("grep -rn TODO src", "idempotent", "auto"),
    Row("rg foo", "idempotent", "auto", "low"),
    Row("find . -name x", "idempotent", "auto", "low"),
    Row("git status", "idempotent", "auto", "low"),
    Row("git log", "idempotent", "auto", "low"),
    Row("git log --oneline -5", "idempotent", "auto"),
    Row("git diff HEAD~1", "idempotent", "auto"),
    Row("git show HEAD:README.md", "idempotent", "auto"),
    Row("git branch", "idempotent", "auto"),
    Row("git branch -a", "idempotent", "auto"),
    Row("git -C sub status", "idempotent", "auto"),
    Row("pwd", "idempotent", "auto"),
    Row("echo hello", "idempotent", "auto"),
    Row("which python3", "idempotent", "auto"),
    Row("stat setup.py", "idempotent", "auto"),
    Row("du -sh .", "idempotent", "auto"),
    Row("tree -L 2", "idempotent", "auto"),
    Row("jq .name package.json", "idempotent", "auto"),
    Row("sed -n 1,20p file.py", "idempotent", "auto"),
    Row("git status; ls", "idempotent", "auto", "low"),
    Row("ls | sort | uniq -c", "idempotent", "auto"),
    Row("ls 2>/dev/null", "idempotent", "auto"),
    Row("command -v git", "idempotent", "auto"),
    Row("npm --version", "idempotent", "auto"),
    # Quoted text is an argument, not a command.
    Row('echo "npm publish"', "idempotent", "auto", "low"),
    Row("echo 'a && npm publish'", "idempotent", "auto", "low"),
    Row("grep -r 'git push' docs", "idempotent", "auto"),
    Row("echo '$(git push)'", "idempotent", "auto"),
    Row("ls # && npm publish", "idempotent", "auto"),
    Row('cat <<EOF\nnpm publish\nEOF', "idempotent", "auto"),
    # Tests and builds: they write output, repeating them is safe.
    Row("pytest", "conditional", "auto", "low"),
    Row("pytest -q tests/test_release.py", "conditional", "auto"),
    Row("python -m pytest -x", "conditional", "auto"),
    Row("npm test", "conditional", "auto"),
    Row("npm run build", "conditional", "auto"),
    Row("yarn lint", "conditional", "auto"),
    Row("make", "conditional", "auto"),
    Row("make -j4 all", "conditional", "auto"),
    Row("cargo build --release", "conditional", "auto"),
    Row("cargo test", "conditional", "auto"),
    Row("go test ./...", "conditional", "auto"),
    Row("tsc --noEmit", "conditional", "auto"),
    Row("npx tsc -p .", "conditional", "auto"),
    Row("uv run pytest", "conditional", "auto"),
    # Local writes.
    Row("npm install", "conditional", "auto"),
    Row("pip install x", "conditional", "auto"),
    Row("python3 -m pip install -r requirements.txt", "conditional", "auto"),
    Row("git add -A", "conditional", "auto"),
    Row("git commit -m x", "conditional", "ask"),
    Row("git checkout main", "conditional", "ask"),
    Row("git reset --hard HEAD~1", "conditional", "ask", "high"),
    Row("git clean -fdx", "conditional", "ask", "high"),
    Row("git clean -n", "idempotent", "auto"),
    Row("git branch feature", "conditional", "auto"),
    Row("git branch -D feature", "conditional", "ask"),
    Row("touch a.txt", "conditional", "auto", "low"),
    Row("mkdir -p build/out", "conditional", "auto", "low"),
    Row("cp a b", "conditional", "auto"),
    Row("mv a b", "conditional", "ask"),
    Row("rm x", "conditional", "ask", "medium"),
    Row("rm -rf build", "conditional", "ask", "high"),
    Row("rm -r -f node_modules", "conditional", "ask", "high"),
    Row("rm -rf /", "conditional", "never", "critical"),
    Row("sed -i s/a/b/ f", "conditional", "auto", "medium"),
    Row("sed -i.bak 's/a/b/' f", "conditional", "auto", "medium"),
    Row("find . -delete", "conditional", "ask"),
    Row("find . -name '*.pyc' -exec rm {} \\;", "conditional", "ask", names="rm {}"),
    Row("echo hi > out.txt", "conditional", "auto", "low", names="out.txt"),
    Row("cat a >> b", "conditional", "auto"),
    Row("wget https://example.com/f.tgz", "conditional", "auto"),
    # Remote and external effects.
    Row("npm publish", "non_idempotent", "never", "critical", "npm publish"),
    Row("yarn npm publish", "non_idempotent", "never", "critical"),
    Row("twine upload dist/*", "non_idempotent", "never", "critical", "twine upload"),
    Row("cargo publish", "non_idempotent", "never", "critical"),
    Row("poetry publish --build", "non_idempotent", "never", "critical"),
    Row("git push", "non_idempotent", "never", "high", "git push"),
    Row("git push origin main", "non_idempotent", "never", "high", "git push origin main"),
    Row("git push --force origin main", "non_idempotent", "never", "critical"),
    Row("git -C sub push -f", "non_idempotent", "never", "critical"),
    Row("curl -X POST https://x", "non_idempotent", "ask", names="curl -X POST"),
    Row("curl -XDELETE https://x/1", "non_idempotent", "ask"),
    Row("curl -d a=1 https://x", "non_idempotent", "ask"),
    Row("curl -sd a=1 https://x", "non_idempotent", "ask"),
    Row("curl -XGET https://x", "idempotent", "auto"),
    Row("curl -F file=@a.txt https://x", "non_idempotent", "ask"),
    Row("curl https://x", "idempotent", "auto", "low"),
    Row("curl -sSL -o out.json https://x", "idempotent", "auto"),
    Row("curl -G -d q=1 https://x", "idempotent", "auto"),
    Row("wget --post-data a=1 https://x", "non_idempotent", "ask"),
    Row("http POST https://x a=1", "non_idempotent", "ask"),
    Row("kubectl apply -f x", "non_idempotent", "ask", "high"),
    Row("kubectl -n prod delete pod web-1", "non_idempotent", "ask"),
    Row("kubectl get pods", "idempotent", "auto"),
    Row("terraform apply", "non_idempotent", "ask"),
    Row("terraform destroy -auto-approve", "non_idempotent", "ask", "critical"),
    Row("terraform plan", "idempotent", "auto"),
    Row("helm upgrade --install web ./chart", "non_idempotent", "ask"),
    Row("gh issue create --title x", "non_idempotent", "ask"),
    Row("gh pr merge 12 --squash", "non_idempotent", "ask", "high"),
    Row("gh pr list", "idempotent", "auto"),
    Row("gh api repos/o/r/issues", "idempotent", "auto"),
    Row("gh api -X POST repos/o/r/issues", "non_idempotent", "ask"),
    Row("gh release create v1.0", "non_idempotent", "never", "critical"),
    Row("docker push img", "non_idempotent", "never", "critical"),
    Row("docker build -t img .", "conditional", "auto"),
    Row("aws s3 ls", "idempotent", "auto"),
    Row("aws s3 cp a.txt s3://bucket/a.txt", "non_idempotent", "ask"),
    Row("aws sts get-caller-identity", "idempotent", "auto"),
    Row("gcloud run deploy web --image x", "non_idempotent", "ask"),
    Row("gcloud compute instances list", "idempotent", "auto"),
    Row('psql -c "DELETE FROM t"', "non_idempotent", "ask", "high"),
    Row('psql -c "SELECT 1"', "idempotent", "auto", "low"),
    Row("psql -c \"SELECT * FROM t WHERE note = 'drop table'\"", "idempotent", "auto"),
    Row('psql -d app -c "DROP TABLE users"', "non_idempotent", "ask", "critical"),
    Row('mysql -e "INSERT INTO t VALUES (1)"', "non_idempotent", "ask"),
    Row('sqlite3 app.db "UPDATE t SET a = 1"', "non_idempotent", "ask"),
    Row("sqlite3 app.db .tables", "idempotent", "auto"),
    Row("psql app <<EOF\nDELETE FROM t;\nEOF", "non_idempotent", "ask"),
    Row("ssh host cmd", "non_idempotent", "ask", names="ssh host cmd"),
    Row("ssh -p 2222 deploy@host 'systemctl restart web'", "non_idempotent", "ask"),
    Row("scp build.tgz host:/srv/", "non_idempotent", "ask"),
    Row("rsync -av dist/ deploy@host:/srv/www/", "non_idempotent", "ask"),
    Row("rsync -av host:/srv/logs/ logs/", "conditional", "auto"),
    Row("sendmail ops@example.com < msg.txt", "non_idempotent", "never"),
    Row("echo body | mail -s hi ops@example.com", "non_idempotent", "never"),
    Row("make deploy", "non_idempotent", "ask", names="make deploy"),
    Row("npm run release", "non_idempotent", "ask"),
    # Unknown commands are neither trusted nor refused.
    Row("frobnicate --all", "conditional", "ask", "medium", "frobnicate"),
    Row("./scripts/setup.sh", "conditional", "ask", "medium"),
    Row("python manage.py migrate", "conditional", "ask"),
    # Tricky forms: the riskiest simple command anywhere in the line decides.
    Row("ls && npm publish", "non_idempotent", "never", "critical", "npm publish"),
    Row('sh -c "git push"', "non_idempotent", "never", "high", "git push"),
    Row("bash -c 'ls; twine upload x'", "non_idempotent", "never", "critical", "twine upload"),
    Row("bash -lc 'cd app && npm publish'", "non_idempotent", "never", names="npm publish"),
    Row("FOO=1 sudo rm x", "conditional", "ask", "high", "rm x"),
    Row("sudo -u deploy -E npm publish", "non_idempotent", "never", names="npm publish"),
    Row("env -i PATH=/bin nohup nice -n 5 git push", "non_idempotent", "never", names="git push"),
    Row("echo hi | xargs rm", "conditional", "ask", names="rm"),
    Row("git ls-files | xargs -I{} sh -c 'git push'", "non_idempotent", "never"),
    Row("(cd sub && npm publish)", "non_idempotent", "never", "critical", "npm publish"),
    Row("{ ls; npm publish; }", "non_idempotent", "never", names="npm publish"),
    Row("echo $(git push)", "non_idempotent", "never", names="git push"),
    Row('echo "$(git push)"', "non_idempotent", "never", names="git push"),
    Row("echo `npm publish`", "non_idempotent", "never", names="npm publish"),
    Row("timeout 10 npm publish", "non_idempotent", "never", "critical", "npm publish"),
    Row("eval 'git push origin main'", "non_idempotent", "never", names="git push"),
    Row("ls\ngit push", "non_idempotent", "never", names="git push"),
    Row("ls || git push &", "non_idempotent", "never"),
    Row("if true; then npm publish; fi", "non_idempotent", "never", names="npm publish"),
    Row("for f in a b; do rm $f; done", "conditional", "ask", names="rm"),
    Row("bash <<'EOF'\ngit push\nEOF", "non_idempotent", "never", names="git push"),
    Row("\\rm -rf build", "conditional", "ask", "high"),
    Row("/usr/bin/git push", "non_idempotent", "never"),
    Row("npm --registry https://r.example publish", "non_idempotent", "never"),
    Row("bash <<< 'git push'", "non_idempotent", "never", names="git push"),
    # How Claude Code writes commit messages: a here-document inside $( ), one apostrophe.
    Row("git commit -m \"$(cat <<'EOF'\nFix the parser's bug\nEOF\n)\"", "conditional", "ask",
        "medium", "git commit"),
    # Lines that cannot be read completely are never trusted.
    Row('echo "oops', "conditional", "ask", "medium"),
    Row("echo 'unclosed && npm publish", "conditional", "ask"),
    Row("echo $(git push", "non_idempotent", "never"),
    # Nothing to run.
    Row("", "idempotent", "auto", "low"),
    Row("   # just a comment", "idempotent", "auto"),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.command[:40] or "<empty>" for r in ROWS])
def test_command_table(row: Row) -> None:
    got = classify_command(row.command)
    assert (got.idempotency, got.replay_policy) == (row.idempotency, row.replay)
    if row.risk is not None:
        assert got.risk_level == row.risk
    assert got.reason
    if row.names is not None:
        assert row.names in got.reason


def test_table_is_large_enough() -> None:
    assert len(ROWS) >= 70
    assert len({r.command for r in ROWS}) == len(ROWS), "duplicate rows hide nothing but noise"


def test_side_effects_name_the_outside_world() -> None:
    assert classify_command("npm publish").side_effects == ("network", "publish")
    assert "vcs_remote" in classify_command("git push").side_effects
    assert classify_command("curl https://x").side_effects == ("network",)
    assert classify_command('psql -c "DELETE FROM t"').side_effects == ("database",)
    assert classify_command("sendmail a@b.c").side_effects == ("email",)
    assert classify_command("rm -rf build").side_effects == ("filesystem",)
    assert classify_command("ls").side_effects == ()


def test_each_dimension_takes_its_riskiest_value() -> None:
    # rm -rf is the riskiest (ask/high); curl still adds its network effect.
    got = classify_command("curl https://x && rm -rf build")
    assert (got.idempotency, got.replay_policy, got.risk_level) == ("conditional", "ask", "high")
    assert set(got.side_effects) == {"network", "filesystem"}
    assert "rm -rf build" in got.reason


def test_sudo_raises_the_risk_of_a_write_only() -> None:
    assert classify_command("sudo rm x").risk_level == "high"
    assert "sudo" in classify_command("sudo rm x").reason
    assert classify_command("sudo ls /root").risk_level == "low"


def test_argv_list_is_not_resplit() -> None:
    # As argv, "a && npm publish" is one argument to echo; no shell will split it.
    assert classify_command(["echo", "a && npm publish"]).idempotency == "idempotent"
    assert classify_command(["npm", "publish"]).replay_policy == "never"
    assert classify_command(["sh", "-c", "ls && git push"]).replay_policy == "never"
    assert classify_command(["sudo", "rm", "-rf", "build"]).risk_level == "critical"
    assert classify_command([]).idempotency == "idempotent"


# --- the splitter on its own ---------------------------------------------------------------


def test_split_keeps_quoted_words_whole() -> None:
    parsed = split_commands("git commit -m 'fix: a && b' && echo \"x | y\"")
    assert [c.argv for c in parsed.commands] == [
        ("git", "commit", "-m", "fix: a && b"),
        ("echo", "x | y"),
    ]
    assert not parsed.unparsable


def test_split_strips_wrappers_and_remembers_them() -> None:
    (cmd,) = split_commands("FOO=1 BAR='x y' sudo -u bob timeout -s KILL 5 make test").commands
    assert cmd.argv == ("make", "test")
    assert cmd.wrappers == ("sudo", "timeout")


def test_split_reads_redirections_and_heredocs() -> None:
    line = "cat <<'EOF' > notes.txt 2>&1\nhello\nEOF\nls >/dev/null"
    first, second = split_commands(line).commands
    assert first.argv == ("cat",) and first.writes == ("notes.txt",) and first.stdin == "hello"
    assert second.argv == ("ls",) and second.writes == ()


def test_split_flags_unbalanced_input() -> None:
    parsed = split_commands('echo "oops')
    assert parsed.unparsable
    assert parsed.commands[0].argv == ("echo", "oops")


def test_split_reads_a_commit_message_heredoc_inside_a_substitution() -> None:
    line = "git commit -m \"$(cat <<'EOF'\nIt's done\nEOF\n)\" && git push"
    parsed = split_commands(line)
    assert not parsed.unparsable
    assert [c.argv[:2] for c in parsed.commands] == [("git", "commit"), ("git", "push"), ("cat",)]
    assert parsed.commands[2].stdin == "It's done"


def test_split_argv_runs_the_shell_script() -> None:
    parsed = split_argv(["bash", "-c", "ls; git push"])
    assert [c.argv for c in parsed.commands] == [("ls",), ("git", "push")]


def test_split_skips_case_patterns_and_function_headers() -> None:
    parsed = split_commands("case $x in a) ls;; b) pwd;; esac; f() { true; }")
    assert [c.argv for c in parsed.commands] == [("ls",), ("pwd",), ("true",)]


# --- tool calls ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "expected"),
    [
        ("Read", ("idempotent", "auto", "low")),
        ("Grep", ("idempotent", "auto", "low")),
        ("Glob", ("idempotent", "auto", "low")),
        ("LS", ("idempotent", "auto", "low")),
        ("WebSearch", ("idempotent", "auto", "low")),
        ("WebFetch", ("idempotent", "auto", "low")),
        ("TodoWrite", ("idempotent", "auto", "low")),
        ("Edit", ("conditional", "auto", "medium")),
        ("Write", ("conditional", "auto", "medium")),
        ("MultiEdit", ("conditional", "auto", "medium")),
        ("NotebookEdit", ("conditional", "auto", "medium")),
        ("read_file", ("idempotent", "auto", "low")),
        ("list_files", ("idempotent", "auto", "low")),
        ("search", ("idempotent", "auto", "low")),
        ("write_file", ("conditional", "auto", "medium")),
        ("apply_patch", ("conditional", "auto", "medium")),
        ("edit_file", ("conditional", "auto", "medium")),
        ("send_email", ("non_idempotent", "never", "high")),
        ("mcp__github__create_issue", ("non_idempotent", "ask", "high")),
        ("mcp__slack__post", ("non_idempotent", "ask", "high")),
        ("some_new_tool", ("conditional", "ask", "medium")),
    ],
)
def test_tool_defaults(tool: str, expected: tuple[str, str, str]) -> None:
    got = classify_call(tool, {"path": "a.py"})
    assert (got.idempotency, got.replay_policy, got.risk_level) == expected
    assert tool in got.reason


def test_a_patch_codex_applies_from_the_shell_is_classified_as_its_apply_patch() -> None:
    patch = "*** Begin Patch\n*** Update File: a.py\n@@\n-x\n+y\n*** End Patch\n"
    tool = classify_call("apply_patch", {"command": patch})
    for shell in ({"command": f"apply_patch <<'EOF'\n{patch}EOF\n"},
                  {"cmd": f"cd src && apply_patch <<'EOF'\n{patch}EOF"}):
        got = classify_call("Bash", shell)
        assert (got.idempotency, got.replay_policy, got.risk_level, got.side_effects) == (
            tool.idempotency, tool.replay_policy, tool.risk_level, tool.side_effects)
        assert "apply_patch" in got.reason
    # anything more than the patch is judged as a command line
    more = classify_call("Bash", {"command": f"apply_patch <<'EOF'\n{patch}EOF\nmake"})
    assert more.replay_policy == "ask", more


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _offered(agent: str) -> list[str]:
    """Every tool name in a captured tools fixture (fixtures/AGENT/tools_request.json,
    rewritten by `GITGUARD_E2E_CAPTURE=1 make e2e`), a Codex namespace's tools both bare
    and as its hooks name them (`multi_agent_v1wait_agent`)."""
    fixture = json.loads((FIXTURES / agent / "tools_request.json").read_text())
    lists: list[list[dict[str, Any]]] = [fixture.get("request", []), fixture.get("loaded", []),
                                         *fixture.get("requests", {}).values()]
    names = set(fixture.get("cliTools", []))
    for tools in lists:
        for tool in tools:
            if tool.get("type") == "namespace":
                names |= {n for t in tool["tools"]
                          for n in (t["name"], tool["name"] + t["name"])}
            else:
                names.add(tool.get("name") or tool["type"])   # hosted tools: web_search
    assert len(names) > 15, names
    return sorted(names)


@pytest.mark.parametrize("agent", ["claude_code", "codex"])
def test_every_tool_the_real_clis_offer_is_classified(agent: str) -> None:
    unknown = [n for n in _offered(agent) if is_unknown_tool(classify_call(n, {}).reason)]
    assert not unknown, (f"{agent} offers tools gitguard does not classify: {unknown}; "
                         "add them to gitguard/calls/classify_tools.py by what they do")


def test_an_unknown_tool_keeps_the_safe_default_and_is_named_unknown() -> None:
    got = classify_call("FrobnicateRemote", {})
    assert (got.idempotency, got.replay_policy) == ("conditional", "ask")
    assert is_unknown_tool(got.reason)
    overridden = classify_call("FrobnicateRemote", {}, {"Frob*": ToolPolicy("idempotent")})
    assert not is_unknown_tool(overridden.reason)      # the project says what it does
    assert not is_unknown_tool(classify_call("Read", {}).reason)


@pytest.mark.parametrize("tool", ["Agent", "Task", "spawn_agent", "multi_agent_v1wait_agent",
                                  "multi_agent_v1close_agent", "send_input", "resume_agent",
                                  "Workflow", "collaborationfollowup_task"])
def test_a_delegation_is_a_container_and_relaunching_it_is_no_replay(tool: str) -> None:
    got = classify_call(tool, {"prompt": "refactor", "subagent_type": "general-purpose"})
    assert (got.idempotency, got.replay_policy, got.risk_level) == ("idempotent", "auto", "low")
    assert "subagent's own calls are guarded one by one" in got.reason


@pytest.mark.parametrize(
    ("tool", "tool_input", "expected"),
    [
        # Lookups of the agent's own state, and its bookkeeping.
        ("ToolSearch", {"query": "select:CronCreate"}, ("idempotent", "auto", "low")),
        ("ListAgents", {}, ("idempotent", "auto", "low")),
        ("TaskGet", {"taskId": "1"}, ("idempotent", "auto", "low")),
        ("TaskList", {}, ("idempotent", "auto", "low")),
        ("TaskUpdate", {"taskId": "1", "status": "completed"}, ("idempotent", "auto", "low")),
        ("TaskCreate", {"subject": "x"}, ("conditional", "auto", "low")),
        ("update_plan", {"plan": []}, ("idempotent", "auto", "low")),
        ("Skill", {"skill": "verify"}, ("idempotent", "auto", "low")),
        # Scheduling: a cron job made twice fires twice; a loop has one next wake-up.
        ("CronCreate", {"cron": "7 * * * *", "prompt": "check CI"},
         ("non_idempotent", "ask", "medium")),
        ("CronDelete", {"id": "j1"}, ("idempotent", "auto", "low")),
        ("ScheduleWakeup", {"delaySeconds": 1200}, ("conditional", "auto", "low")),
        # Messages other agents act on, notifications.
        ("SendMessage", {"to": "worker", "message": "go"}, ("conditional", "ask", "medium")),
        ("PushNotification", {"message": "done"}, ("non_idempotent", "ask", "low")),
        # Web and MCP: MCP tools carry no annotations in either CLI's payload (captured).
        ("WebFetch", {"url": "https://example.com"}, ("idempotent", "auto", "low")),
        ("web_search", {}, ("idempotent", "auto", "low")),
        ("ReadMcpResourceTool", {"uri": "x"}, ("idempotent", "auto", "low")),
        ("list_mcp_resources", {}, ("idempotent", "auto", "low")),
        ("mcp__gg__lookup", {"word": "x"}, ("non_idempotent", "ask", "high")),
        # Tools whose input names the action.
        ("ExitWorktree", {"action": "keep"}, ("conditional", "auto", "low")),
        ("ExitWorktree", {"action": "remove"}, ("conditional", "ask", "high")),
        ("Artifact", {"action": "list"}, ("idempotent", "auto", "low")),
        ("Artifact", {"file_path": "report.html"}, ("conditional", "ask", "medium")),
        ("RemoteTrigger", {"action": "run", "trigger_id": "t"},
         ("non_idempotent", "ask", "high")),
        ("Projects", {"method": "project_read", "path": "a"}, ("idempotent", "auto", "low")),
        ("write_stdin", {"session_id": 3}, ("idempotent", "auto", "low")),
        ("write_stdin", {"session_id": 3, "chars": "y\n"}, ("conditional", "ask", "medium")),
        # Shells: by their command.
        ("exec_command", {"cmd": "git status"}, ("idempotent", "auto", "low")),
        ("exec_command", {"cmd": "npm publish"}, ("non_idempotent", "never", "critical")),
        ("Monitor", {"command": "tail -f app.log", "timeout_ms": 1000},
         ("idempotent", "auto", "low")),
        ("Monitor", {"ws": {"url": "wss://x"}, "timeout_ms": 1000}, ("idempotent", "auto", "low")),
    ],
)
def test_agent_tools_are_classified_by_what_they_do(
    tool: str, tool_input: dict[str, object], expected: tuple[str, str, str]
) -> None:
    got = classify_call(tool, tool_input)
    assert (got.idempotency, got.replay_policy, got.risk_level) == expected, got.reason


def test_a_typed_text_never_shows_in_the_reason() -> None:
    assert "hunter2" not in classify_call("write_stdin", {"chars": "hunter2"}).reason
    assert "`Artifact list`" in classify_call("Artifact", {"action": "list"}).reason


def test_edits_are_conditional_on_the_base_hash() -> None:
    got = classify_call("Edit", {"file_path": "a.py", "old_string": "a", "new_string": "b"})
    assert got.side_effects == ("filesystem",)
    assert "base hash" in got.reason


def test_mcp_and_email_name_their_effects() -> None:
    assert classify_call("mcp__github__create_issue", {}).side_effects == ("external",)
    assert classify_call("send_email", {"to": "a@b.c"}).side_effects == ("email",)


@pytest.mark.parametrize(
    ("tool", "tool_input", "replay", "names"),
    [
        ("Bash", {"command": "ls -la"}, "auto", "ls -la"),
        ("Bash", {"command": "cd app && npm publish"}, "never", "npm publish"),
        ("run_command", {"command": "git status"}, "auto", "git status"),
        ("run_command", {"command": ["git", "push", "origin", "main"]}, "never", "git push"),
        ("shell", {"cmd": "rm -rf build"}, "ask", "rm -rf build"),
        ("exec", {"argv": ["twine", "upload", "dist/x.whl"]}, "never", "twine upload"),
        ("exec", {"argv": ["echo", "npm publish"]}, "auto", "echo"),
    ],
)
def test_command_tools_classify_their_command(
    tool: str, tool_input: dict[str, object], replay: str, names: str
) -> None:
    got = classify_call(tool, tool_input)
    assert got.replay_policy == replay
    assert names in got.reason


def test_command_tool_without_a_command_is_asked_about() -> None:
    got = classify_call("Bash", {"description": "no command here"})
    assert (got.idempotency, got.replay_policy) == ("conditional", "ask")
    assert classify_call("run_command", {"command": 42}).replay_policy == "ask"


def test_exact_override_replaces_only_the_fields_it_sets() -> None:
    overrides = {"send_email": ToolPolicy(replay_policy="ask")}
    got = classify_call("send_email", {"to": "a@b.c"}, overrides)
    assert got.replay_policy == "ask"
    assert (got.idempotency, got.risk_level, got.side_effects) == (
        "non_idempotent", "high", ("email",))
    assert "project override in .gitguard.toml" in got.reason


def test_glob_override_and_the_most_specific_pattern_wins() -> None:
    overrides = {
        "mcp__*": ToolPolicy(risk_level="critical"),
        "mcp__github__*": ToolPolicy(idempotency="idempotent", replay_policy="auto",
                                     risk_level="low", side_effects=("network",)),
    }
    got = classify_call("mcp__github__get_issue", {}, overrides)
    assert (got.idempotency, got.replay_policy, got.risk_level) == ("idempotent", "auto", "low")
    assert got.side_effects == ("network",)
    assert "mcp__github__*" in got.reason
    other = classify_call("mcp__slack__post", {}, overrides)
    assert (other.idempotency, other.risk_level) == ("non_idempotent", "critical")


def test_exact_name_beats_a_glob_and_unmatched_tools_keep_defaults() -> None:
    overrides = {"mcp__*": ToolPolicy(replay_policy="never"),
                 "mcp__db__query": ToolPolicy(idempotency="idempotent")}
    got = classify_call("mcp__db__query", {}, overrides)
    assert (got.idempotency, got.replay_policy) == ("idempotent", "ask")
    assert classify_call("Read", {}, overrides) == classify_call("Read", {})


def test_bash_override_applies_over_the_command() -> None:
    overrides = {"Bash": ToolPolicy(replay_policy="never")}
    got = classify_call("Bash", {"command": "ls"}, overrides)
    assert (got.idempotency, got.replay_policy) == ("idempotent", "never")
    assert "`ls`" in got.reason


# --- robustness ----------------------------------------------------------------------------

# Pieces of shell syntax, so the generator reaches quoting, nesting and here-documents often.
_SHELLISH = st.lists(
    st.sampled_from([*"ab $()`'\"\\|&;<>{}#=\n\t-*~", "sh -c ", "EOF", "<<", "sudo ", "xargs ",
                     "find -exec ", "eval ", "case ", "esac", ";;", "$((", "FOO=1 "]),
    max_size=60,
).map("".join)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=200), _SHELLISH))
def test_classify_command_never_raises(line: str) -> None:
    got = classify_command(line)
    assert isinstance(got, Classification)
    assert got.reason


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=8))
def test_classify_argv_never_raises(argv: list[str]) -> None:
    assert classify_command(argv).reason


def test_deep_nesting_is_cut_off_not_a_crash() -> None:
    got = classify_command("echo " + "$(" * 500 + "ls" + ")" * 500)
    assert got.reason
    assert classify_command("find . -exec " * 2000).reason
    assert classify_command("sh -c " * 300 + "ls").reason
