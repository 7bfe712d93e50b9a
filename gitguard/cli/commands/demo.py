from __future__ import annotations

import click


@click.command()
@click.option("--keep", is_flag=True, help="Keep the throwaway repository and print its path.")
def demo(keep: bool) -> None:
    """Run a scripted agent session on a throwaway repository and show every capability."""
    from gitguard.demo.run import run

    run(click.echo, keep=keep)
