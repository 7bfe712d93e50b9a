"""Idempotency, replay policy and risk of a tool call, from its name and its input.

Stdlib only: this runs on every agent tool call (DESIGN.md, "Speed"). Shell
commands are split by :mod:`gitguard.calls.shell_parse`; each simple command is judged
by the rule tables below, and the riskiest one decides the whole line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from fnmatch import fnmatchcase

from gitguard.calls.classify_rules import (  # noqa: F401 - the tables and their types
    _ARG_OPTS,
    _AWS_READS,
    _BUILD,
    _BUILDS,
    _CLOUD_READS,
    _CLUSTER,
    _CRITICAL_PATHS,
    _DOWNLOAD,
    _EDIT,
    _EMAIL,
    _EXTERNAL_TARGET,
    _FLAG_RULES,
    _GOAL_RUNNERS,
    _HTTP_DATA,
    _HTTP_SAFE_METHODS,
    _HTTP_WRITE,
    _IDEMPOTENCY_ORDER,
    _INTERPRETERS,
    _PLAIN_WORD,
    _PROGRAMS,
    _READ_ONLY,
    _READS,
    _REDIRECT,
    _REMOTE_PATH,
    _REPLAY_ORDER,
    _RISK_ORDER,
    _SCRIPT,
    _SCRIPT_RUNNERS,
    _SQL_DROP,
    _SQL_DROP_WORDS,
    _SQL_NOISE,
    _SQL_READ,
    _SQL_UNKNOWN,
    _SQL_WRITE,
    _SQL_WRITE_WORDS,
    _SSH,
    _SUBCOMMANDS,
    _TARGET_EXTERNAL,
    _UNKNOWN,
    _UNPARSABLE,
    _UPLOAD,
    Classification,
    Idempotency,
    ReplayPolicy,
    RiskLevel,
    ToolPolicy,
    _each,
    _local,
    _read,
    _remote,
    _Rule,
    _words,
)
from gitguard.calls.classify_tools import (
    _DELEGATES,
    _TOOLS,
    BY_FIELD,
    COMMAND_TOOLS,
    UNKNOWN_TOOL,
    is_unknown_tool,
    tool_key,
)
from gitguard.calls.delegation import is_delegation
from gitguard.calls.shell_parse import SimpleCommand, split_argv, split_commands
from gitguard.calls.shell_targets import shell_patch

__all__ = ["Classification", "Idempotency", "ReplayPolicy", "RiskLevel", "ToolPolicy",
           "classify_call", "classify_command", "is_unknown_tool"]

def _split_opts(args: Sequence[str], arg_opts: frozenset[str]) -> tuple[list[str], list[str]]:
    """(options, operands) of ``args``; the value of an option in ``arg_opts`` is skipped."""
    opts: list[str] = []
    operands: list[str] = []
    words = iter(args)
    for arg in words:
        if arg == "--":
            operands.extend(words)
        elif arg.startswith("-") and arg != "-":
            opts.append(arg)
            if arg in arg_opts:
                next(words, None)
        else:
            operands.append(arg)
    return opts, operands


def _has_flag(opts: Sequence[str], flag: str, arg_opts: frozenset[str] = frozenset()) -> bool:
    for opt in opts:
        if opt == flag or (flag.startswith("--") and opt.startswith(flag + "=")):
            return True
        if len(flag) != 2 or opt.startswith("--"):
            continue
        # Short flags bundle (`-rf`) until one that takes a value: `-XGET` is -X with "GET".
        for letter in opt[1:]:
            if letter == flag[1]:
                return True
            if not letter.isalnum() or "-" + letter in arg_opts:
                break
    return False


def _values(args: Sequence[str], names: str) -> list[str]:
    """The values given to the options ``names``: `-c X`, `--command=X`, `-cX`."""
    found: list[str] = []
    for i, arg in enumerate(args):
        for name in names.split():
            if arg == name:
                found.extend(args[i + 1 : i + 2])
            elif arg.startswith(name + "=") or (len(name) == 2 and arg.startswith(name)):
                found.append(arg[len(name) + arg.startswith(name + "=") :])
    return found


def _rm(args: Sequence[str]) -> _Rule:
    opts, operands = _split_opts(args, frozenset())
    if not any(_has_flag(opts, f) for f in ("-r", "-R", "--recursive")):
        return _local("deletes files", "ask", "medium")
    if _CRITICAL_PATHS.intersection(operands):
        return _local("deletes a root, home or whole workspace directory", "never", "critical")
    return _local("deletes files recursively", "ask", "high")


def _http(name: str, args: Sequence[str]) -> _Rule:
    methods = [m.upper() for m in _values(args, "-X --request --method")]
    data_flags = _HTTP_DATA.get(name, frozenset())
    arg_opts = data_flags | _words("-X --request --method -H --header -o -u -A")
    opts, operands = _split_opts(args, arg_opts)
    if name in ("http", "https", "xh"):  # httpie: `http POST url`, `http url name=value`
        methods += [w for w in operands[:1] if w.isupper()]
        methods += ["POST" for w in operands[1:] if "=" in w.replace("==", "")]
    # curl sends a body for any data or upload flag, unless -G turns the data into a query.
    sends = any(_has_flag(opts, f, arg_opts) for f in data_flags)
    sends = sends and not _has_flag(opts, "-G", arg_opts)
    if sends or any(m not in _HTTP_SAFE_METHODS for m in methods):
        return _HTTP_WRITE
    if name == "wget":
        return _local("downloads to a file", effects=("network", "filesystem"))
    return _read("fetches a URL", "network")


def _sql(name: str, args: Sequence[str], stdin: str | None) -> _Rule:
    texts = _values(args, {"psql": "-c --command", "mysql": "-e --execute"}.get(name, "-cmd"))
    if name == "sqlite3":
        texts += _split_opts(args, _ARG_OPTS[name])[1][1:]  # SQL after the database file
    texts += [stdin] if stdin else []
    if not texts or _values(args, "-f --file"):
        return _SQL_UNKNOWN  # an interactive session or a script file: cannot tell
    text = _SQL_NOISE.sub("''", "\n".join(texts))
    if _SQL_DROP_WORDS.search(text):
        return _SQL_DROP
    return _SQL_WRITE if _SQL_WRITE_WORDS.search(text) else _SQL_READ


def _copy(name: str, args: Sequence[str]) -> _Rule:
    opts, operands = _split_opts(args, _ARG_OPTS[name])
    if operands and _REMOTE_PATH.match(operands[-1]):
        return _UPLOAD
    if any(_REMOTE_PATH.match(p) for p in operands):
        return _DOWNLOAD
    return _apply_flags(name, opts, [], _local("copies files"))


def _cloud(name: str, args: Sequence[str]) -> _Rule:
    operands = _split_opts(args, _words("--profile --region --project --output -o"))[1]
    # `aws SERVICE OPERATION` names its verb; gcloud and az nest groups before theirs.
    if name == "aws":
        reads = bool(operands[1:2]) and operands[1].startswith(_AWS_READS)
    else:
        reads = bool(_CLOUD_READS.intersection(operands[:4]))
    if reads or not operands:
        return _read("reads cloud resources", "network")
    return replace(_CLUSTER, what="changes cloud resources")


def _python(args: Sequence[str], stdin: str | None) -> _Rule:
    for i, arg in enumerate(args):
        if arg.startswith("-m"):  # `python -m pytest` is judged as pytest
            inline = arg[2:]
            module = inline or (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + 1 :] if inline else args[i + 2 :]
            # `python -m python …` would recurse once per word: treat it as a script.
            return _rule_for(module, rest, stdin) if module[:6] not in ("", "python") else _SCRIPT
        if not arg.startswith("-"):
            break
    return _SCRIPT


_Special = Callable[[str, Sequence[str], "str | None"], _Rule]
_SPECIAL: dict[str, _Special] = {
    "rm": lambda n, a, s: _rm(a),
    **dict.fromkeys(("curl", "wget", "http", "https", "xh"), lambda n, a, s: _http(n, a)),
    **dict.fromkeys(("psql", "mysql", "sqlite3"), _sql),
    "ssh": lambda n, a, s: _SSH,
    **dict.fromkeys(("scp", "rsync"), lambda n, a, s: _copy(n, a)),
    **dict.fromkeys(("aws", "gcloud", "az"), lambda n, a, s: _cloud(n, a)),
    "python": lambda n, a, s: _python(a, s),
}


def _apply_flags(key: str, opts: Sequence[str], extra: Sequence[str], rule: _Rule) -> _Rule:
    arg_opts = _ARG_OPTS.get(key.split(" ")[0], frozenset())
    for flags, flag_rule in _FLAG_RULES.get(key, ()):
        if ("<arg>" in flags and extra) or any(_has_flag(opts, f, arg_opts) for f in flags):
            return flag_rule
    return rule


def _rule_for(name: str, args: Sequence[str], stdin: str | None) -> _Rule:
    name = re.sub(r"^(python|pip)[0-9.]*$", r"\1", name.rsplit("/", 1)[-1])
    if len(args) == 1 and args[0] in ("--version", "--help", "-h", "-V"):
        return _READS
    if name in _SPECIAL:
        return _SPECIAL[name](name, args, stdin)
    opts, operands = _split_opts(args, _ARG_OPTS.get(name, frozenset()))
    key, sub, extra = name, "", operands
    if name in _SUBCOMMANDS:
        table = _SUBCOMMANDS[name]
        sub = next((" ".join(operands[:k]) for k in (3, 2, 1)
                    if len(operands) >= k and " ".join(operands[:k]) in table), "")
        key, rule, extra = f"{name} {sub}".strip(), table[sub], operands[len(sub.split()) :]
    else:
        rule = _PROGRAMS.get(name) or (
            _READS if name in _READ_ONLY else _BUILD if name in _BUILDS
            else _SCRIPT if name in _INTERPRETERS else _UNKNOWN)
    # `yarn lint` and `npm run lint` run a package script; `make` and `mvn` run targets.
    runs_script = name in _SCRIPT_RUNNERS and (
        sub in ("run", "run-script") or (sub == "" and bool(extra) and name != "npm"))
    if runs_script or name in _GOAL_RUNNERS:
        targets = extra if runs_script else operands
        if any(_EXTERNAL_TARGET.search(t) for t in targets):
            return _TARGET_EXTERNAL  # `make deploy`, `npm run release`
        rule = _BUILD
    return _apply_flags(key, opts, extra, rule)


def _show(argv: Sequence[str], limit: int = 60) -> str:
    text = ""
    for arg in argv:  # stops early: an agent may send a megabyte of arguments
        text += (" " if text else "") + (arg if _PLAIN_WORD.fullmatch(arg) else repr(arg))
        if len(text) > limit:
            return text[: limit - 1] + "…"
    return text


def _judge(cmd: SimpleCommand) -> Classification:
    shown = _show(cmd.argv) + "".join(f" > {w}" for w in cmd.writes[:1])
    result = (_rule_for(cmd.argv[0], cmd.argv[1:], cmd.stdin).judge(shown) if cmd.argv
              else _REDIRECT.judge(shown.strip()))
    if cmd.writes:
        result = _combine([result, _REDIRECT.judge(shown)])
    if {"sudo", "doas"}.intersection(cmd.wrappers) and result.idempotency != "idempotent":
        # Root can touch what the guard cannot snapshot or restore: one level riskier.
        risk = _RISK_ORDER[min(_RISK_ORDER.index(result.risk_level) + 1, len(_RISK_ORDER) - 1)]
        result = replace(result, risk_level=risk, reason=f"{result.reason} via sudo")
    return result


def _combine(results: Sequence[Classification]) -> Classification:
    """Each dimension takes its riskiest value; the reason is the riskiest command's."""
    return Classification(
        max((r.idempotency for r in results), key=_IDEMPOTENCY_ORDER.index),
        max((r.replay_policy for r in results), key=_REPLAY_ORDER.index),
        max((r.risk_level for r in results), key=_RISK_ORDER.index),
        tuple(dict.fromkeys(e for r in results for e in r.side_effects)),
        max(results, key=Classification.rank).reason,
    )


def classify_command(command: str | Sequence[str]) -> Classification:
    """Classify a shell command line, or an argv list that runs without a shell."""
    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    results = [_judge(cmd) for cmd in parsed.commands]
    if parsed.unparsable:  # an unclosed quote may hide anything: never let it pass as safe
        line = command if isinstance(command, str) else " ".join(command)
        results.append(_UNPARSABLE.judge(line if len(line) <= 60 else line[:59] + "…"))
    if not results:
        return Classification("idempotent", "auto", "low", (), "the command runs nothing")
    return _combine(results)


_MCP = _remote("calls an MCP server with unknown external effects")


def _command_input(tool_input: Mapping[str, object]) -> str | list[str] | None:
    for key in ("command", "cmd", "argv"):
        value = tool_input.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return [str(v) for v in value]
    return None


def _default_for_tool(tool_name: str, tool_input: Mapping[str, object]) -> Classification:
    key = tool_key(tool_name)
    if key in COMMAND_TOOLS:
        command = _command_input(tool_input)
        if command is not None and shell_patch(command) is not None:
            # a patch Codex applies itself, as its apply_patch tool
            return _TOOLS["apply_patch"].judge(f"{tool_name} apply_patch")
        if command is not None:
            return classify_command(command)
        if key not in _TOOLS:
            return _UNKNOWN.judge(f"{tool_name} without a command")
    if is_delegation(key):
        return _DELEGATES.judge(tool_name)
    if key in BY_FIELD:
        by_field = BY_FIELD[key]
        value, rule = by_field.rule(tool_input)
        shown = by_field.names_value and len(value) <= 40 and _PLAIN_WORD.fullmatch(value)
        return rule.judge(f"{tool_name} {value}" if shown else tool_name)
    if key.startswith("mcp__"):
        return _MCP.judge(tool_name)
    return _TOOLS.get(key, UNKNOWN_TOOL).judge(tool_name)


def matching(patterns: Iterable[str], tool_name: str) -> str | None:
    """The config table that governs a tool: an exact name wins; otherwise the most specific
    glob, so `mcp__github__*` beats `mcp__*`."""
    patterns = list(patterns)
    if tool_name in patterns:
        return tool_name
    return max((p for p in patterns if fnmatchcase(tool_name, p)), key=len, default=None)


def command_of(tool_name: str, tool_input: Mapping[str, object]) -> str | list[str] | None:
    """The shell command a call runs, when its tool runs commands."""
    return _command_input(tool_input) if tool_key(tool_name) in COMMAND_TOOLS else None


def classify_call(
    tool_name: str,
    tool_input: Mapping[str, object],
    overrides: Mapping[str, ToolPolicy] | None = None,
) -> Classification:
    """Classify one tool call; a project override for the tool replaces the fields it sets."""
    base = _default_for_tool(tool_name, tool_input)
    overrides = overrides or {}
    pattern = matching(overrides, tool_name)
    if pattern is None:
        return base
    policy = overrides[pattern]
    return Classification(
        policy.idempotency or base.idempotency,
        policy.replay_policy or base.replay_policy,
        policy.risk_level or base.risk_level,
        policy.side_effects or base.side_effects,
        f"project override in .gitguard.toml for `{pattern}` (default: {base.reason})",
    )
