"""The built-in probes: for each side effect the classifier recognises where a read-only
check exists, the command that checks it and how its answer reads (docs/recovery.md,
"Probes", says the same in prose, with each one's limits).

Each is a ProbeDefinition like a declared one, filled from the facts `call begin`
recorded (gitguard.calls.probe_facts). The readings are strict on purpose: a run that
matches neither reading (an error, a login prompt, garbage) could not tell, and the call
stays uncertain.
"""

from __future__ import annotations

import re

from gitguard.models import ProbeCheck, ProbeDefinition

_EMPTY = r"\A\s*\Z"
_LS_REMOTE_LINES = r"\A(?:[0-9a-f]{40,64}\t[^\s]+\n?)*\Z"    # only `sha<TAB>ref` lines

NPM_VIEW = ProbeDefinition(
    argv=("npm", "view", "--", "{name}@{version}", "version"),
    # npm prints the version when the registry lists it; nothing (exit 0) when the package
    # exists without that version; E404 (exit 1) when the package does not exist at all.
    happened=(ProbeCheck(exit=(0,), stdout=(r"\A\s*'?{version}'?\s*\Z",)),),
    not_happened=(ProbeCheck(exit=(0,), stdout=(_EMPTY,)),
                  ProbeCheck(exit=(1,), stderr=(r"\bE404\b",))),
    effect="publish {name}@{version}", happened_because="the registry lists it",
    not_happened_because="the registry does not list it")

GIT_LS_REMOTE = ProbeDefinition(
    argv=("git", "ls-remote", "--", "{remote}", "{ref}"),
    happened=(ProbeCheck(exit=(0,), stdout=(_LS_REMOTE_LINES, r"(?m)^{sha}\t{ref}$")),),
    # The remote's ref is absent or names another commit: the push did not land (or was
    # overwritten since; a plain push again is refused as non-fast-forward then).
    not_happened=(ProbeCheck(exit=(0,), stdout=(_LS_REMOTE_LINES,),
                             stdout_lacks=(r"(?m)^{sha}\t{ref}$",)),),
    effect="push {short} to {ref} on {remote}",
    happened_because="the remote's {ref} is {short}",
    not_happened_because="the remote's {ref} is not {short}")

CARGO_INFO = ProbeDefinition(
    argv=("cargo", "info", "--", "{name}@{version}"),
    happened=(ProbeCheck(exit=(0,), stdout=(r"(?m)^version:\s*{version}\b",)),),
    not_happened=(ProbeCheck(exit=(101,), stderr=(r"could not find `{name}@{version}`",)),),
    effect="publish {name} {version}", happened_because="the registry lists it",
    not_happened_because="the registry does not list it")

GH_RELEASE_VIEW = ProbeDefinition(
    argv=("gh", "release", "view", "{tag}", "--json", "tagName", "--jq", ".tagName"),
    happened=(ProbeCheck(exit=(0,), stdout=(r"\A{tag}\n?\Z",)),),
    not_happened=(ProbeCheck(exit=(1,), stderr=(r"release not found",)),),
    effect="create the release {tag}", happened_because="GitHub lists it",
    not_happened_because="GitHub does not list it")

GH_ISSUE_LIST = ProbeDefinition(
    # The 100 newest issues, not `--search`: GitHub's search index lags behind a new issue,
    # and a lag read as "not there" would let the agent open it twice.
    argv=("gh", "issue", "list", "--state", "all", "--limit", "100", "--json", "title",
          "--jq", ".[].title"),
    happened=(ProbeCheck(exit=(0,), stdout=(r"(?m)^{title}$",)),),
    not_happened=(ProbeCheck(exit=(0,), stdout_lacks=(r"(?m)^{title}$",)),),
    effect="open the issue “{title}”",
    happened_because="an issue with that title is among the 100 newest",
    not_happened_because="no issue with that title is among the 100 newest")

GH_PR_LIST = ProbeDefinition(
    argv=("gh", "pr", "list", "--state", "all", "--head", "{head}", "--json", "number",
          "--jq", ".[].number"),
    happened=(ProbeCheck(exit=(0,), stdout=(r"\A(?:[0-9]+\n?)+\Z",)),),
    not_happened=(ProbeCheck(exit=(0,), stdout=(_EMPTY,)),),
    effect="open a pull request from {head}",
    happened_because="GitHub has a pull request from that branch",
    not_happened_because="GitHub has no pull request from that branch")


def _pypi(files: list[str]) -> ProbeDefinition:
    """The release's JSON on the index: every file the upload sends must be listed."""
    listed = tuple(f'"filename":\\s*"{re.escape(name)}"' for name in files)
    return ProbeDefinition(
        argv=("curl", "-fsS", "--", "{index}/pypi/{name}/{version}/json"),
        happened=(ProbeCheck(exit=(0,), stdout=listed),),
        not_happened=(ProbeCheck(exit=(22,), stderr=(r"\b404\b",)),),
        effect="upload {name} {version}",
        happened_because="the index lists every file of it",
        not_happened_because="the index has no release {version}")


def builtin(facts: dict[str, str]) -> ProbeDefinition | None:
    """The built-in probe for recorded facts; None for a kind without one."""
    kind = facts.get("kind")
    if kind == "pypi_upload":
        return _pypi(facts.get("files", "").split("\n"))
    return {"npm_publish": NPM_VIEW, "git_push": GIT_LS_REMOTE, "cargo_publish": CARGO_INFO,
            "gh_release_create": GH_RELEASE_VIEW, "gh_issue_create": GH_ISSUE_LIST,
            "gh_pr_create": GH_PR_LIST}.get(kind or "")


def extra_args(facts: dict[str, str]) -> tuple[str, ...]:
    """Options the probe takes from the call: the registry or repository it acted on."""
    kind = facts.get("kind", "")
    if kind == "npm_publish" and facts.get("registry"):
        return ("--registry", facts["registry"])
    if kind == "cargo_publish" and facts.get("registry"):
        return ("--registry", facts["registry"])
    if kind.startswith("gh_") and facts.get("repo"):
        return ("--repo", facts["repo"])
    return ()
