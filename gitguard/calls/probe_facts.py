"""What a call's built-in probe will need, read when the call begins (DESIGN.md "Resume").

After a crash, `gitguard resume` asks the outside world whether an uncertain call's effect
happened (gitguard.recovery.probes). To ask about the right thing it must know what the
call was about to do, as it stood then: the commit a `git push` sends (new commits made
since would be another push), the name and version `npm publish` reads from package.json
(bumped since, it would ask about the wrong version). So `call begin` reads them, for the
few commands a built-in probe exists for, and the ledger keeps them (`probeFacts`).

Facts are strings; `kind` names the probe (gitguard.recovery.probe_rules), `readAt` says
when they were read (`begin`, or `probe` when a ledger from before this had none and
resume read the state it found). `None` where no built-in probe applies, or where the
command does too much to check in one probe (several publishes in one line, `push --all`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from pathlib import Path

import pygit2

from gitguard.calls.replay_state import push_args, split_push
from gitguard.calls.shell_parse import SimpleCommand, split_argv, split_commands

Facts = dict[str, str]

# The side effects (classify_rules) a built-in probe may exist for: the gate that keeps
# this off every other call's path.
PROBED_EFFECTS = frozenset({"publish", "vcs_remote", "external"})

_NPM_VALUE_OPTIONS = frozenset({"--registry", "--tag", "--otp", "--access", "--prefix", "-C",
                                "--dir", "--cwd", "-w", "--workspace", "--provenance-file"})
_CARGO_VALUE_OPTIONS = frozenset({"--manifest-path", "-p", "--package", "--registry", "--index",
                                  "--token", "--target", "--target-dir", "-j", "--jobs",
                                  "--features", "-F", "--config", "-Z", "--color"})
_TWINE_VALUE_OPTIONS = frozenset({"-r", "--repository", "--repository-url", "-u", "--username",
                                  "-p", "--password", "-c", "--comment", "--config-file",
                                  "-i", "--identity", "--sign-with", "--cert", "--client-cert",
                                  "--attestations"})
_GH_VALUE_OPTIONS = frozenset({"-R", "--repo", "-t", "--title", "-b", "--body", "-F",
                               "--body-file", "-H", "--head", "-B", "--base", "-a", "--assignee",
                               "-l", "--label", "-m", "--milestone", "-p", "--project",
                               "-r", "--reviewer", "-n", "--notes", "--notes-file",
                               "--target", "--template", "--discussion-category"})
# Index bases of the package indexes whose JSON API the PyPI probe reads.
PYPI_INDEXES = {"pypi": "https://pypi.org", "testpypi": "https://test.pypi.org"}
_DIST = re.compile(r"^(?P<name>[A-Za-z0-9_.]+?)-(?P<version>[0-9][^-]*?)"
                   r"(?:-[^-]+-[^-]+-[^-]+\.whl|\.tar\.gz|\.zip)$")


def gather(root: Path, cwd: Path, repo: pygit2.Repository | None,
           command: str | Sequence[str], read_at: str = "begin") -> Facts | None:
    """The facts of the one probed command in `command`, run in `cwd` (inside `root`)."""
    parsed = split_commands(command) if isinstance(command, str) else split_argv(command)
    found: list[Facts] = []
    here = cwd
    for cmd in parsed.commands:
        if cmd.argv[:1] == ("cd",) and len(cmd.argv) == 2:     # `cd pkg && npm publish`
            here = here / cmd.argv[1]
            continue
        facts = _facts(cmd, here, repo)
        if facts is not None:
            found.append(facts)
    if len(found) != 1 or parsed.unparsable:
        return None
    facts = found[0]
    facts["readAt"] = read_at
    return facts


def _facts(cmd: SimpleCommand, cwd: Path, repo: pygit2.Repository | None) -> Facts | None:
    argv = list(cmd.argv)
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program in ("python", "python3") and argv[1:3] == ["-m", "twine"]:
        program, argv = "twine", argv[2:]
    if program in ("npm", "pnpm"):
        return _npm(argv[1:], cwd)
    if program == "git":
        return _git_push(cmd, repo)
    if program == "cargo":
        return _cargo(argv[1:], cwd)
    if program == "twine":
        return _twine(argv[1:], cwd)
    if program == "gh":
        return _gh(argv[1:], repo)
    return None


def _split(args: Sequence[str], value_options: frozenset[str]
           ) -> tuple[dict[str, str], list[str], set[str]]:
    """(option values, operands, flags) of `args`: `--opt=v` and `--opt v` alike."""
    values: dict[str, str] = {}
    operands: list[str] = []
    flags: set[str] = set()
    words = iter(args)
    for word in words:
        if word == "--":
            operands.extend(words)
        elif word.startswith("-") and word != "-":
            name, eq, value = word.partition("=")
            if name in value_options:
                values[name] = value if eq else next(words, "")
            else:
                flags.add(name)
        else:
            operands.append(word)
    return values, operands, flags


def _read_json(path: Path) -> dict[str, object] | None:
    try:
        value = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def _npm(args: list[str], cwd: Path) -> Facts | None:
    values, operands, flags = _split(args, _NPM_VALUE_OPTIONS)
    if operands[:1] != ["publish"] or "--dry-run" in flags:
        return None
    if {"-w", "--workspace"} & values.keys() or {"--workspaces", "-ws"} & flags:
        return None                     # several packages: one probe cannot say
    folder = cwd / values.get("--prefix", values.get("-C", values.get("--dir", ".")))
    if len(operands) > 1:
        folder = cwd / operands[1]      # `npm publish ./pkg`; a tarball has no package.json
    manifest = _read_json(folder / "package.json")
    if manifest is None:
        return None
    name, version = manifest.get("name"), manifest.get("version")
    if not isinstance(name, str) or not isinstance(version, str) or not name or not version:
        return None
    facts = {"kind": "npm_publish", "name": name, "version": version}
    config = manifest.get("publishConfig")
    registry = values.get("--registry") or (
        config.get("registry") if isinstance(config, dict) else None)
    if isinstance(registry, str) and registry:
        facts["registry"] = registry
    return facts


def _git_push(cmd: SimpleCommand, repo: pygit2.Repository | None) -> Facts | None:
    args = push_args(cmd)
    if args is None or repo is None or repo.head_is_unborn:
        return None
    options, operands = split_push(args)
    if options & {"--all", "--mirror", "--tags", "--branches", "--delete", "-d", "--prune",
                  "-n", "--dry-run", "--follow-tags"} or len(operands) > 2:
        return None                     # many refs, or none sent: no one-ref probe
    branch = None if repo.head_is_detached else repo.head.shorthand
    remote = operands[0] if operands else _default_remote(repo, branch)
    spec = operands[1] if len(operands) > 1 else branch
    if remote is None or spec is None:
        return None
    force = spec.startswith("+") or bool(options & {"-f", "--force", "--force-with-lease",
                                                     "--force-if-includes"})
    source, colon, target = spec.lstrip("+").partition(":")
    if source in ("", "HEAD") and branch is None:
        return None
    local = _local_ref(repo, source if source not in ("", "HEAD") else branch or "HEAD")
    if local is None or not source and colon:
        return None                     # nothing to send, or `:dst` (a delete)
    ref_name, oid = local
    dst = target or ref_name
    if not dst.startswith("refs/"):
        dst = ("refs/tags/" if ref_name.startswith("refs/tags/") else "refs/heads/") + dst
    return {"kind": "git_push", "remote": remote, "ref": dst, "sha": oid,
            "force": "yes" if force else "no"}


def _default_remote(repo: pygit2.Repository, branch: str | None) -> str | None:
    """Where a bare `git push` goes: branch.B.pushRemote, remote.pushDefault,
    branch.B.remote, then origin if it exists."""
    names = ([f"branch.{branch}.pushRemote"] if branch else []) + ["remote.pushDefault"] + (
        [f"branch.{branch}.remote"] if branch else [])
    for name in names:
        try:
            return str(repo.config[name])
        except KeyError:
            continue
    return "origin" if "origin" in repo.remotes.names() else None


def _local_ref(repo: pygit2.Repository, name: str) -> tuple[str, str] | None:
    """(full ref name, object id) of what `name` sends; a tag's own object, as ls-remote
    shows it."""
    try:
        ref = repo.lookup_reference_dwim(name)
        return ref.name, str(ref.resolve().target)
    except (KeyError, pygit2.InvalidSpecError, pygit2.GitError):
        pass
    try:
        return name, str(repo.revparse_single(name).id)     # a sha pushed to `sha:dst`
    except (KeyError, ValueError, pygit2.GitError, pygit2.InvalidSpecError):
        return None


def _cargo(args: list[str], cwd: Path) -> Facts | None:
    values, operands, flags = _split(args, _CARGO_VALUE_OPTIONS)
    if operands[:1] != ["publish"] or "--dry-run" in flags or "-n" in flags:
        return None
    if {"-p", "--package", "--index"} & values.keys() or "--workspace" in flags:
        return None
    import tomllib  # only for a publish: every other call never pays its import

    manifest = cwd / values.get("--manifest-path", "Cargo.toml")
    try:
        package = tomllib.loads(manifest.read_text()).get("package", {})
    except (OSError, ValueError):
        return None
    name, version = package.get("name"), package.get("version")
    if not isinstance(name, str) or not isinstance(version, str):
        return None                     # `version.workspace = true`: not read here
    facts = {"kind": "cargo_publish", "name": name, "version": version}
    if values.get("--registry"):
        facts["registry"] = values["--registry"]
    return facts


def _twine(args: list[str], cwd: Path) -> Facts | None:
    values, operands, _flags = _split(args, _TWINE_VALUE_OPTIONS)
    if operands[:1] != ["upload"]:
        return None
    if "--repository-url" in values:
        return None                     # an index whose JSON API is not known
    index = PYPI_INDEXES.get(values.get("-r", values.get("--repository", "pypi")))
    files = sorted({os.path.basename(p) for pattern in operands[1:]
                    for p in _glob(cwd, pattern)})
    dists = [m for m in map(_DIST.match, files) if m is not None]
    if index is None or not files or len(dists) != len(files):
        return None
    names = {_normal(m["name"]) for m in dists}
    versions = {m["version"] for m in dists}
    if len(names) != 1 or len(versions) != 1:
        return None
    return {"kind": "pypi_upload", "name": names.pop(), "version": versions.pop(),
            "files": "\n".join(files), "index": index}


def _glob(cwd: Path, pattern: str) -> list[str]:
    import glob

    return [p for p in glob.glob(pattern, root_dir=cwd) if os.path.isfile(cwd / p)]


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _gh(args: list[str], repo: pygit2.Repository | None) -> Facts | None:
    values, operands, _flags = _split(args, _GH_VALUE_OPTIONS)
    facts: Facts = {}
    where = values.get("-R", values.get("--repo"))
    if where:
        facts["repo"] = where
    if operands[:2] == ["issue", "create"]:
        title = values.get("-t", values.get("--title"))
        return {**facts, "kind": "gh_issue_create", "title": title} if title else None
    if operands[:2] == ["pr", "create"]:
        head = values.get("-H", values.get("--head"))
        if head is None and repo is not None and not repo.head_is_detached \
                and not repo.head_is_unborn:
            head = repo.head.shorthand
        return {**facts, "kind": "gh_pr_create", "head": head} if head else None
    if operands[:2] == ["release", "create"] and len(operands) > 2:
        return {**facts, "kind": "gh_release_create", "tag": operands[2]}
    return None
