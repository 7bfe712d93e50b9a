"""The rule tables of the classifier: which command does what, as data.

Split from :mod:`gitguard.calls.classify` so the decision code stays short; the tables
are read top to bottom like a policy document.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Literal

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
        **_each("build b check c test t bench clippy doc fmt", _BUILD),
        **_each("add remove update fetch install", _INSTALL), **_each("run r", _SCRIPT),
        **_each("publish yank", _PUBLISH), "": _UNKNOWN,
    },
    "go": {**_each("build test vet fmt generate", _BUILD), **_each("get install mod", _INSTALL),
           "run": _SCRIPT,
           **_each("version env list doc help", _READS), "": _UNKNOWN},
    "kubectl": {
        **_each("get describe logs explain top version api-resources diff cluster-info "
                "config~view auth~can-i", _read("reads cluster state", "network")),
        "delete": replace(_CLUSTER, what="deletes cluster resources"), "": _CLUSTER,
    },
    "terraform": {
        **_each("plan validate show output providers version graph state~list state~show",
                _read("inspects infrastructure state", "network")),
        **_each("init get", _INSTALL), "fmt": _BUILD, "destroy": _DESTROY, "": _CLUSTER,
    },
    "helm": {
        **_each("list ls status get template lint show search history version repo~list",
                _read("reads chart or release state", "network")),
        **_each("repo dependency", _INSTALL), "package": _BUILD, "push": _PUBLISH,
        "": _CLUSTER,
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
    "npm": _words("--prefix -w --workspace -C --dir --cwd --filter --registry --tag --otp"),
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
_AWS_READS = ("describe-", "list-", "get-", "ls", "wait", "help")
_CLOUD_READS = _words("list describe show get ls help version info")
_PLAIN_WORD = re.compile(r"[\w@%+=:,./*{}~^-]+")  # shown without quotes in a reason
