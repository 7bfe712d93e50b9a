from __future__ import annotations

import click

from gitguard.cli.main import Ctx, emit, json_option, pass_ctx


@click.group()
def key() -> None:
    """Keys for encryption at rest ([encryption] enabled = true in .gitguard.toml)."""


@key.command("generate")
@click.option("--keyring", "to_keyring", is_flag=True,
              help="Store the new key in the system keyring instead of printing it.")
@json_option
@pass_ctx
def key_generate(ctx: Ctx, to_keyring: bool, as_json: bool) -> None:
    """Make a new random 256-bit key: printed (for GITGUARD_KEY) or kept in the keyring.

    \b
    Example: export GITGUARD_KEY=$(gitguard key generate)
    Example: gitguard key generate --keyring
    """
    from gitguard.storage import sealing

    text = sealing.new_key_text()
    key_id = sealing.Key.from_text(text, "the new key").key_id
    if to_keyring:
        user = ctx.guard.settings.keyring_user
        sealing.store_in_keyring(user, text)
        emit({"keyId": key_id, "keyring": f"{sealing.KEYRING_SERVICE}/{user}"}, as_json,
             lambda: click.echo(f"stored key {key_id} in the keyring as "
                                f"{sealing.KEYRING_SERVICE}/{user}"))
        return
    emit({"keyId": key_id, "key": text}, as_json, lambda: click.echo(text))


@key.command("status")
@json_option
@pass_ctx
def key_status(ctx: Ctx, as_json: bool) -> None:
    """Whether this store is encrypted, under which key id, and whether the key is here.

    Example: gitguard key status --json
    """
    privacy = ctx.guard.store.privacy
    recorded = privacy.recorded_key_id()
    value = {"enabled": privacy.encrypted, "storeKeyId": recorded}
    if privacy.encrypted:
        value["keyId"] = privacy.key.key_id  # raises a clear error when missing or wrong

    def human() -> None:
        if not privacy.encrypted:
            click.echo("encryption is off")
        else:
            click.echo(f"encryption is on; key {value['keyId']} matches the store"
                       if recorded else f"encryption is on; key {value['keyId']} "
                       "will be recorded at the first write")

    emit(value, as_json, human)
