"""Idempotency, replay policy and risk of a tool call, from its name and its input.

Stdlib only: this runs on every agent tool call (DESIGN.md, "Speed"). Shell
commands are split by :mod:`gitguard.shellparse`; each simple command is judged
by the rule tables below, and the riskiest one decides the whole line.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from typing import Literal

from gitguard.shellparse import SimpleCommand, split_argv, split_commands

__all__ = ["Classification", "Idempotency", "ReplayPolicy", "RiskLevel", "ToolPolicy",
           "classify_call", "classify_command"]

Idempotency = Literal["idempotent", "conditional", "non_idempotent"]
ReplayPolicy = Literal["auto", "ask", "never"]
RiskLevel = Literal["low", "medium", "high", "critical"]
_IDEMPOTENCY_ORDER: tuple[Idempotency, ...] = ("idempotent", "conditional", "non_idempotent")
_REPLAY_ORDER: tuple[ReplayPolicy, ...] = ("auto", "ask", "never")
_RISK_ORDER: tuple[RiskLevel, ...] = ("low", "medium", "high", "critical")


@dataclass(frozen=True)
class ToolPolicy:
    """A project override from .gitguard.toml; None (or no side effects) keeps the default."""

    idempotency: Idempotency | None = None
    replay_policy: ReplayPolicy | None = None
    risk_level: RiskLevel | None = None
    side_effects: tuple[str, ...] = ()


@dataclass(frozen=True)
class Classification:
    idempotency: Idempotency
    replay_policy: ReplayPolicy
    risk_level: RiskLevel
    side_effects: tuple[str, ...]
    reason: str

    def rank(self) -> tuple[int, int, int]:
        return (_IDEMPOTENCY_ORDER.index(self.idempotency),
                _REPLAY_ORDER.index(self.replay_policy), _RISK_ORDER.index(self.risk_level))


@dataclass(frozen=True)
class _Rule:
    idempotency: Idempotency
    replay: ReplayPolicy
    risk: RiskLevel
    effects: tuple[str, ...]
    what: str  # verb phrase for the reason: "publishes a package"

    def judge(self, subject: str) -> Classification:
        return Classification(self.idempotency, self.replay, self.risk, self.effects,
                              f"`{subject}` {self.what} ({self.idempotency})")


def _read(what: str, *effects: str) -> _Rule:
    return _Rule("idempotent", "auto", "low", effects, what)


def _local(what: str, replay: ReplayPolicy = "auto", risk: RiskLevel = "low",
           effects: tuple[str, ...] = ("filesystem",)) -> _Rule:
    return _Rule("conditional", replay, risk, effects, what)


def _remote(what: str, risk: RiskLevel = "high", effects: tuple[str, ...] = ("external",),
            replay: ReplayPolicy = "ask") -> _Rule:
    return _Rule("non_idempotent", replay, risk, effects, what)


def _each(names: str, rule: _Rule) -> dict[str, _Rule]:
    """Map every whitespace-separated name to ``rule``; "~" joins subcommand words."""
    return {name.replace("~", " "): rule for name in names.split()}


def _words(text: str) -> frozenset[str]:
    return frozenset(text.split())


_READS = _read("only reads")
_FETCH = _read("downloads without changing anything remote", "network")
_BUILD = _local("runs a build or tests; repeating it is safe")
_INSTALL = _local("installs packages into the workspace", effects=("filesystem", "network"))
_EDIT = _local("writes files; a replay is safe on the same base hash", risk="medium")
_REDIRECT = _local("writes a file through a redirection")
_DOWNLOAD = _local("copies files from another host", effects=("network", "filesystem"))
_UNKNOWN = _Rule("conditional", "ask", "medium", (), "is not a known command")
_SCRIPT = replace(_UNKNOWN, what="runs arbitrary code")
_UNPARSABLE = replace(_UNKNOWN, what="could not be parsed completely")
_SQL_UNKNOWN = _Rule("conditional", "ask", "medium", ("database",), "runs unknown SQL")
_PUBLISH = _remote("publishes a package", "critical", ("network", "publish"), "never")
_PUSH = _remote("updates a remote repository", "high", ("network", "vcs_remote"), "never")
_EMAIL = _remote("sends email", "high", ("email",), "never")
_CLUSTER = _remote("changes remote infrastructure")
_DESTROY = _remote("destroys remote infrastructure", "critical")
_GITHUB = _remote("changes GitHub state", "medium", ("network", "external"))
_SSH = _remote("runs commands on another host", effects=("network", "external"))
_UPLOAD = _remote("copies files to another host", effects=("network", "external"))
_HTTP_WRITE = _remote("sends data to a remote server", "medium", ("network",))
_SQL_READ = _read("runs a read-only query", "database")
_SQL_WRITE = _remote("changes a database", effects=("database",))
_SQL_DROP = _remote("drops or empties database objects", "critical", ("database",))
_TARGET_EXTERNAL = _remote("runs a target whose name suggests an external effect")

_READ_ONLY = _words("""
    ls ll la dir cat bat less more head tail wc grep egrep fgrep rg ag ack fd locate pwd echo
    printf which whereis type stat file du df tree sort uniq cut tr jq yq diff cmp comm column nl
    od xxd hexdump strings md5sum sha1sum sha256sum shasum cksum basename dirname realpath readlink
    date cal whoami id groups uname hostname uptime env printenv ps free lsof pgrep true false test
    [ [[ sleep seq expr bc man help history cd pushd popd export set unset alias unalias read wait
    exit return shift declare local typeset : awk fold fmt paste join rev tac zcat zgrep base64
    nproc getconf locale command hash ulimit umask trap exec tput clear top htop find sed
""")
_BUILDS = _words("""
    pytest py.test tox nox jest vitest mocha ava tsc mypy pyright ruff black isort flake8 pylint
    eslint prettier make cmake ninja meson gcc g++ clang clang++ cc javac rustc ctest bazel
    gradle gradlew mvn just rake esbuild webpack vite rollup turbo nx pre-commit
""")
_INTERPRETERS = _words("python node deno ruby perl php bash sh zsh fish source .")
_GOAL_RUNNERS = _words("make just rake mvn gradle gradlew bazel nx turbo")
_SCRIPT_RUNNERS = _words("npm yarn pnpm bun")  # `npm run X`, and `yarn X` runs script X
_EXTERNAL_TARGET = re.compile(r"deploy|release|publish|upload|push|ship", re.IGNORECASE)

# Programs whose verdict does not depend on a subcommand; _FLAG_RULES may refine them.
_PROGRAMS: dict[str, _Rule] = {
    **_each("cp touch mkdir rmdir ln chmod tee tar unzip gunzip", _local("writes local files")),
    **_each("chown truncate", _local("changes files in place", "ask", "medium")),
    "mv": _local("moves files; a repeat finds them gone", "ask", "medium"),
    "patch": _local("patches files", risk="medium"),
    **_each("dd shred", _local("overwrites data", "ask", "high")),
    **_each("kill pkill killall", _local("signals processes", "ask", "medium", ("process",))),
    **_each("sendmail mail mailx mutt msmtp swaks", _EMAIL),
}

# Subcommand tables; "" is the program's default. Keys are matched longest first.
_SUBCOMMANDS: dict[str, dict[str, _Rule]] = {
    "git": {
        **_each("status log diff show blame shortlog describe rev-parse rev-list ls-files ls-tree "
                "cat-file grep reflog merge-base for-each-ref show-ref help version whatchanged "
                "count-objects fsck remote stash~list stash~show worktree~list branch tag config",
                _READS),
        **_each("add init switch worktree submodule gc notes", _local("changes local git state")),
        "fetch": _FETCH, "clone": _local("clones a repository", effects=("network", "filesystem")),
        **_each("commit merge rebase cherry-pick revert am pull reset checkout restore mv rm stash "
                "stash~pop stash~apply", _local("rewrites local git state", "ask", "medium")),
        **_each("clean stash~drop stash~clear filter-branch filter-repo update-ref",
                _local("discards local git data", "ask", "high")),
        "push": _PUSH, "send-email": _EMAIL, "": _UNKNOWN,
    },
    "npm": {
        **_each("install i ci add uninstall remove rm update upgrade link", _INSTALL),
        **_each("test t run run-script start build pack", _BUILD),
        **_each("ls list view info outdated audit search whoami help explain why config", _READS),
        **_each("publish unpublish npm~publish", _PUBLISH),
        **_each("deprecate dist-tag owner", _remote("changes the package registry")),
        "version": _local("bumps the version and tags it", "ask", "medium"), "": _UNKNOWN,
    },
    "pip": {**_each("install uninstall download wheel", _INSTALL),
            **_each("list show freeze check help", _READS), "": _UNKNOWN},
    "cargo": {
        **_each("build b check c test t bench clippy doc fmt add remove update fetch install new "
                "init", _BUILD),
        **_each("run r", _SCRIPT), **_each("publish yank", _PUBLISH), "": _UNKNOWN,
    },
    "go": {**_each("build test vet fmt get install generate mod", _BUILD), "run": _SCRIPT,
           **_each("version env list doc help", _READS), "": _UNKNOWN},
    "kubectl": {
        **_each("get describe logs explain top version api-resources diff cluster-info "
                "config~view auth~can-i", _read("reads cluster state", "network")),
        "delete": replace(_CLUSTER, what="deletes cluster resources"), "": _CLUSTER,
    },
    "terraform": {
        **_each("plan validate show output providers version graph state~list state~show",
                _read("inspects infrastructure state", "network")),
        **_each("init fmt get", _BUILD), "destroy": _DESTROY, "": _CLUSTER,
    },
    "helm": {
        **_each("list ls status get template lint show search history version repo~list",
                _read("reads chart or release state", "network")),
        **_each("repo dependency package", _BUILD), "push": _PUBLISH, "": _CLUSTER,
    },
    "gh": {
        **_each("issue~list issue~view issue~status pr~list pr~view pr~status pr~diff pr~checks "
                "repo~view release~list release~view run~list run~view run~watch auth~status "
                "browse search status api", _read("reads GitHub", "network")),
        **_each("pr~checkout repo~clone release~download",
                _local("fetches from GitHub", effects=("network", "filesystem"))),
        "pr merge": replace(_GITHUB, risk="high", what="merges a pull request"),
        "release create": replace(_PUBLISH, what="publishes a release"),
        "repo delete": replace(_DESTROY, replay="never"), "": _GITHUB,
    },
    "docker": {
        **_each("ps images inspect logs version info history search", _READS),
        "pull": _FETCH, "build": _BUILD, "tag": _local("tags an image"),
        "push": replace(_PUBLISH, what="publishes an image"),
        **_each("run exec rm rmi kill stop start restart compose login",
                _local("changes containers", "ask", "medium", ("process",))),
        **_each("compose~ps compose~logs compose~config compose~ls compose~images", _READS),
        "system prune": _local("deletes images and containers", "ask", "high"), "": _UNKNOWN,
    },
    "twine": {"check": _READS, "": _PUBLISH},
    "poetry": {**_each("install add lock update sync", _INSTALL), **_each("build run", _BUILD),
               "publish": _PUBLISH, "": _UNKNOWN},
    "uv": {**_each("sync add remove pip lock venv", _INSTALL), "build": _BUILD,
           "publish": _PUBLISH, "": _UNKNOWN},
    "gem": {"push": _PUBLISH, "install": _INSTALL, "list": _READS, "": _UNKNOWN},
}
# Flag refinements keyed by "program" or "program subcommand"; the first matching entry wins.
# "<arg>" matches any operand after the subcommand (`git branch new` creates a branch).
_FLAG_RULES: dict[str, tuple[tuple[frozenset[str], _Rule], ...]] = {
    "sed": ((_words("-i --in-place"), _local("edits files in place", risk="medium")),),
    "sort": ((_words("-o --output"), _local("writes its output to a file")),),
    "find": ((_words("-delete"), _local("deletes the files it finds", "ask", "medium")),
             (_words("-fprint -fprintf -fls"), _local("writes a file list"))),
    "rsync": ((_words("--delete --delete-after --remove-source-files"),
               _local("mirrors files and deletes the rest", "ask", "high")),),
    "git push": ((_words("-f --force --force-with-lease --delete -d --mirror --prune"),
                  replace(_PUSH, risk="critical", what="rewrites or deletes remote history")),),
    "git reset": ((_words("--hard"), _local("discards working tree changes", "ask", "high")),),
    "git clean": ((_words("-n --dry-run"), _READS),),
    "git branch": ((_words("-d -D --delete -m -M --move"),
                    _local("deletes or renames a branch", "ask", "medium")),
                   (_words("-l --list -a -r --all --remotes --contains --merged --no-merged "
                           "--show-current"), _READS),
                   (_words("<arg>"), _local("creates a branch"))),
    "git tag": ((_words("-d --delete"), _local("deletes a tag", "ask", "medium")),
                (_words("-l --list"), _READS), (_words("<arg>"), _local("creates a tag"))),
    "git config": ((_words("--get --get-all --get-regexp --list -l"), _READS),
                   (_words("<arg>"), _local("changes git configuration"))),
    "git remote": ((_words("<arg>"), _local("changes a remote")),),
    "npm audit": ((_words("<arg>"), _INSTALL),),
    "gh api": ((_words("-X --method -f -F --field --raw-field --input"), _GITHUB),),
}

# Options that take a separate value, so the value is not mistaken for a subcommand.
_ARG_OPTS: dict[str, frozenset[str]] = {
    "git": _words("-C -c --git-dir --work-tree --namespace"),
    "kubectl": _words("-n --namespace --context --kubeconfig -f --filename -l --selector -o"),
    "helm": _words("-n --namespace --kube-context -f --values"),
    "docker": _words("-H --host --context -c --config -f --file"),
    "gh": _words("-R --repo"),
    "npm": _words("--prefix -w --workspace -C --dir --cwd --filter"),
    "make": _words("-C -f --directory --file -j -l"),
    "ssh": _words("-b -c -D -E -e -F -I -i -J -L -l -m -O -o -p -Q -R -S -W -w -B"),
    "scp": _words("-c -F -i -J -l -o -P -S"),
    "rsync": _words("-e --rsh --exclude --include --filter -f"),
    "sqlite3": _words("-cmd -separator -newline"),
}
for _alias, _target in (("podman", "docker"), ("pnpm", "npm"), ("yarn", "npm"), ("bun", "npm")):
    _SUBCOMMANDS[_alias] = _SUBCOMMANDS[_target]
    _ARG_OPTS[_alias] = _ARG_OPTS[_target]
# Options that make the request carry a body (curl), or a POST (wget); httpie uses items.
_HTTP_DATA = {"curl": _words("-d --data --data-raw --data-binary --data-urlencode --json -F "
                             "--form --form-string -T --upload-file"),
              "wget": _words("--post-data --post-file --body-data --body-file")}
_HTTP_SAFE_METHODS = _words("GET HEAD OPTIONS")
_REMOTE_PATH = re.compile(r"^(?:rsync|scp)://|^(?:[\w.-]+@)?[\w.-]{2,}:")  # not C:\ paths
_SQL_NOISE = re.compile(r"'(?:[^']|'')*'|--[^\n]*|/\*.*?\*/", re.DOTALL)  # literals, comments
_SQL_DROP_WORDS = re.compile(r"\b(?:drop|truncate)\b", re.IGNORECASE)
_SQL_WRITE_WORDS = re.compile(
    r"\b(?:insert|update|delete|alter|create|replace|merge|upsert|grant|revoke|copy|call|exec|"
    r"execute|vacuum|reindex|cluster|attach|detach|rename)\b|\\copy|^\s*\.(?:import|restore)",
    re.IGNORECASE | re.MULTILINE)
_CRITICAL_PATHS = _words("/ /* ~ ~/ ~/* $HOME $HOME/ * . ./ .. ../")


def _split_opts(args: Sequence[str], arg_opts: frozenset[str]) -> tuple[list[str], list[str]]:
    """(options, operands) of ``args``; the value of an option in ``arg_opts`` is skipped."""
    opts: list[str] = []
    operands: list[str] = []
    skip = False
    for i, arg in enumerate(args):
        if arg == "--" and not skip:
            return opts, operands + list(args[i + 1 :])
        if not skip and arg.startswith("-") and arg != "-":
            opts.append(arg)
        elif not skip:
            operands.append(arg)
        skip = not skip and arg in arg_opts
    return opts, operands


def _has_flag(opts: Sequence[str], flag: str) -> bool:
    # A short flag may be bundled with others (`-rf`) or carry its value (`-i.bak`, `-XPOST`).
    return any(opt == flag or opt.startswith(flag + "=") or (
        len(flag) == 2 and not opt.startswith("--") and flag[1] in re.sub(r"\W.*", "", opt[1:]))
        for opt in opts)


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
    opts, operands = _split_opts(args, _words("-X --request --method -H --header -o -u -A"))
    if name in ("http", "https", "xh"):  # httpie: `http POST url`, `http url name=value`
        methods += [w for w in operands[:1] if w.isupper()]
        methods += ["POST" for w in operands[1:] if "=" in w.replace("==", "")]
    # curl sends a body for any data or upload flag, unless -G turns the data into a query.
    data_flags = _HTTP_DATA.get(name, frozenset())
    sends = any(_has_flag(opts, f) for f in data_flags) and not _has_flag(opts, "-G")
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


def _cloud(args: Sequence[str]) -> _Rule:
    operands = _split_opts(args, _words("--profile --region --project --output -o"))[1]
    reads = ("describe", "list", "get", "ls", "show", "help", "wait", "version")
    if not operands or any(w.startswith(reads) for w in operands[:4]):
        return _read("reads cloud resources", "network")
    return replace(_CLUSTER, what="changes cloud resources")


def _python(args: Sequence[str], stdin: str | None) -> _Rule:
    for i, arg in enumerate(args):
        if arg.startswith("-m"):  # `python -m pytest` is judged as pytest
            inline = arg[2:]
            module = inline or (args[i + 1] if i + 1 < len(args) else "")
            rest = args[i + 1 :] if inline else args[i + 2 :]
            return _rule_for(module, rest, stdin) if module else _SCRIPT
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
    **dict.fromkeys(("aws", "gcloud", "az"), lambda n, a, s: _cloud(a)),
    "python": lambda n, a, s: _python(a, s),
}


def _apply_flags(key: str, opts: Sequence[str], extra: Sequence[str], rule: _Rule) -> _Rule:
    for flags, flag_rule in _FLAG_RULES.get(key, ()):
        if ("<arg>" in flags and extra) or any(_has_flag(opts, f) for f in flags):
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
        sub in ("run", "run-script") or (sub == "" and extra and name != "npm"))
    if runs_script or name in _GOAL_RUNNERS:
        targets = extra if runs_script else operands
        if any(_EXTERNAL_TARGET.search(t) for t in targets):
            return _TARGET_EXTERNAL  # `make deploy`, `npm run release`
        rule = _BUILD
    return _apply_flags(key, opts, extra, rule)


def _show(argv: Sequence[str], limit: int = 60) -> str:
    text = " ".join(a if re.fullmatch(r"[\w@%+=:,./*{}~^-]+", a) else repr(a) for a in argv)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _judge(cmd: SimpleCommand) -> Classification:
    shown = _show(cmd.argv) + "".join(f" > {w}" for w in cmd.writes[:1])
    result = (_rule_for(cmd.argv[0], cmd.argv[1:], cmd.stdin).judge(shown) if cmd.argv
              else _REDIRECT.judge(shown.strip()))
    if cmd.writes:
        result = _combine([result, _REDIRECT.judge(shown)])
    if {"sudo", "doas"}.intersection(cmd.wrappers) and result.idempotency != "idempotent":
        # Root can touch what the guard cannot snapshot or restore: one level riskier.
        risk = _RISK_ORDER[min(_RISK_ORDER.index(result.risk_level) + 1, 3)]
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


_TOOLS: dict[str, _Rule] = {
    **_each("Read Grep Glob LS NotebookRead BashOutput TodoRead ExitPlanMode read_file list_files "
            "list_dir search search_files grep glob", _READS),
    **_each("WebSearch WebFetch web_search fetch_url", _read("reads the web", "network")),
    "TodoWrite": _read("updates the agent's todo list"),
    # A sub-agent's own tool calls pass through the same hooks and are classified there.
    "Task": _read("delegates to a sub-agent"),
    **_each("Edit Write MultiEdit NotebookEdit write_file apply_patch edit_file create_file",
            _EDIT),
    **_each("KillShell KillBash", _local("stops a background shell", effects=("process",))),
    "send_email": _EMAIL,
}
_COMMAND_TOOLS = _words("Bash run_command shell exec bash execute_command run_shell_command")
_MCP = _remote("calls an MCP server with unknown external effects")
_UNKNOWN_TOOL = replace(_UNKNOWN, what="is not a known tool")


def _command_input(tool_input: Mapping[str, object]) -> str | list[str] | None:
    for key in ("command", "cmd", "argv"):
        value = tool_input.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return [str(v) for v in value]
    return None


def _default_for_tool(tool_name: str, tool_input: Mapping[str, object]) -> Classification:
    if tool_name in _COMMAND_TOOLS:
        command = _command_input(tool_input)
        if command is None:
            return _UNKNOWN.judge(f"{tool_name} without a command")
        return classify_command(command)
    if tool_name.startswith("mcp__"):
        return _MCP.judge(tool_name)
    return _TOOLS.get(tool_name, _UNKNOWN_TOOL).judge(tool_name)


def classify_call(
    tool_name: str,
    tool_input: Mapping[str, object],
    overrides: Mapping[str, ToolPolicy] | None = None,
) -> Classification:
    """Classify one tool call; a project override for the tool replaces the fields it sets."""
    base = _default_for_tool(tool_name, tool_input)
    overrides = overrides or {}
    # An exact name wins; otherwise the most specific glob, so `mcp__github__*` beats `mcp__*`.
    globs = (p for p in overrides if fnmatchcase(tool_name, p))
    pattern = tool_name if tool_name in overrides else max(globs, key=len, default=None)
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
