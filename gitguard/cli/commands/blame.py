from __future__ import annotations

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx


@click.command()
@click.argument("file", metavar="FILE")
@json_option
@pass_ctx
def blame(ctx: Ctx, file: str, as_json: bool) -> None:
    """Who wrote each line of FILE as it is now: a call, you, or a commit.

    A line blamed on a call is one that `rollback-files --to` that call's pre
    checkpoint takes out (the command is listed under the lines), unless a later
    call or you rewrote it. `~` marks a command's change the command's words did not
    name; `or you?` a change no one surely made (rollback keeps it as yours). Lines
    older than gitguard's first kept checkpoint are named by `git blame` of HEAD;
    a commit you made keeps the calls' lines theirs. Nothing is written.

    \b
    Examples:
      gitguard blame src/app.py
      gitguard blame src/app.py --json
    """
    from gitguard.review import blame as blame_mod
    from gitguard.review.timeline_data import undo_command

    guard = ctx.guard
    found = blame_mod.blame(guard, ctx.workspace_path(file))
    def undo(checkpoint_id: str) -> str:
        return undo_command(guard, checkpoint_id)

    emit(blame_mod.to_json(found, undo), as_json,
         lambda: click.echo(blame_mod.render(found, undo), nl=False))
