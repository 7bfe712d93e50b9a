from __future__ import annotations

import click

# The bodies are shared with the click-free path of a fresh process (gitguard.callcli).
from gitguard.callcli import begin_output, end_output
from gitguard.callcli import read_result as read_result
from gitguard.cli import Ctx, json_option, pass_ctx

IDEMPOTENCY = click.Choice(["idempotent", "conditional", "non_idempotent"])
REPLAY = click.Choice(["auto", "ask", "never"])
RISK = click.Choice(["low", "medium", "high", "critical"])


@click.group()
def call() -> None:
    """Ledger a tool call: `begin` before it runs, `end` after it finishes."""


@call.command("begin")
@click.option("--tool", required=True, help="Tool name, e.g. Bash, Edit, send_email.")
@click.option("--input", "input_text", help="The tool input as JSON.")
@click.option("--input-file", type=click.Path(),
              help="Read the input JSON from a file ('-': stdin).")
@click.option("--step", "step_id", help="The agent step this call belongs to.")
@click.option("--call-id", help="Call id (default: call_N).")
@click.option("--writes", multiple=True, help="A path the call declares it writes (repeatable).")
@click.option("--idempotency", type=IDEMPOTENCY, help="Override the classification.")
@click.option("--replay", type=REPLAY, help="Override the replay policy.")
@click.option("--risk", type=RISK, help="Override the risk level.")
@click.option("--side-effect", "side_effects", multiple=True, help="A side effect (repeatable).")
@click.option("--session", "session_id", help="Agent session (default: the open one).")
@click.option("--confirm", is_flag=True, help="Run a call whose replay policy is `ask` again.")
@click.option("--force-replay", is_flag=True, help="Run a `never` call again (ledgered).")
@json_option
@pass_ctx
def call_begin(ctx: Ctx, tool: str, input_text: str | None, input_file: str | None,
               step_id: str | None, call_id: str | None, writes: tuple[str, ...],
               idempotency: str | None, replay: str | None, risk: str | None,
               side_effects: tuple[str, ...], session_id: str | None, confirm: bool,
               force_replay: bool, as_json: bool) -> None:
    """Record a call as planned, snapshot the workspace, record it started (fsynced).

    Example: gitguard call begin --tool Bash --input '{"command": "npm test"}' --json
    """
    click.echo(begin_output(
        ctx.guard, tool=tool, input_text=input_text, input_file=input_file, step_id=step_id,
        call_id=call_id, writes=writes, idempotency=idempotency, replay=replay, risk=risk,
        side_effects=side_effects, session_id=session_id, confirm=confirm,
        force_replay=force_replay, as_json=as_json))


@call.command("end")
@click.argument("call_id")
@click.option("--status", required=True, type=click.Choice(["succeeded", "failed"]))
@click.option("--result", "result_text", help="The tool's result or error text.")
@click.option("--result-file", type=click.Path(), help="Read the result from a file ('-': stdin).")
@json_option
@pass_ctx
def call_end(ctx: Ctx, call_id: str, status: str, result_text: str | None,
             result_file: str | None, as_json: bool) -> None:
    """Snapshot the workspace and record the call's outcome and file patches.

    Example: gitguard call end call_1 --status failed --result "npm ERR! 2 tests failed"
    """
    click.echo(end_output(ctx.guard, call_id=call_id, status=status, result_text=result_text,
                          result_file=result_file, as_json=as_json))
