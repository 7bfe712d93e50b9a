#!/bin/sh
# gitguard hook shim. ID: gitguard-shim-7c1e9a2f5b04d3e8
# Written by `gitguard hooks install`; `gitguard hooks uninstall` puts back the hook that was
# here before. That hook is kept beside this file as <name>.gitguard-legacy and still runs
# first, with the same arguments and stdin. gitguard's own part never fails a post-* hook.
# This is the one source of every hook gitguard installs; install fills in the lines below.
hook=''  # the git hook this copy is (post-commit, pre-push, ...)
python=''  # the interpreter that runs gitguard, recorded at install; empty: `gitguard` on PATH
launcher=''  # gitguard/hookmain.py, recorded at install: the hook without site-packages
native=''  # the package's native client (gitguard/nativeclient): no interpreter start
kept="$(dirname -- "$0")/$hook.gitguard-legacy"

input=/dev/null
if [ "$hook" = pre-push ] || [ "$hook" = post-rewrite ]; then
    # git writes a list on stdin: keep a copy so that your hook and gitguard both read all of it.
    # Without a temporary file, your hook alone gets the real stdin.
    input=$(mktemp "${TMPDIR:-/tmp}/gitguard-hook.XXXXXX") || {
        [ -x "$kept" ] && exec "$kept" "$@"
        exit 0
    }
    trap 'rm -f "$input"' EXIT
    cat >"$input"
fi

status=0
if [ -x "$kept" ]; then
    IFS= read -r first <"$kept"
    case $first in
        # A plain sh hook runs in a subshell of this one, so that its $0 is still this path
        # (husky finds your script through $0); any other hook runs as its own program.
        '#!/bin/sh' | '#!/usr/bin/env sh') (. "$kept") <"$input"; status=$? ;;
        *) "$kept" "$@" <"$input"; status=$? ;;
    esac
fi

# Nothing to record without gitguard's store (it lives in this worktree's git dir), nor for
# each pick of a rebase (post-rewrite records the whole rebase): then Python is not started.
wanted=1
if [ "$hook" != pre-push ]; then
    gd=$(git rev-parse --git-dir 2>/dev/null) || gd=
    if [ -z "$gd" ] || [ ! -d "$gd/gitguard" ]; then
        wanted=0
    elif [ "$hook" = post-checkout ] || [ "$hook" = post-commit ]; then
        { [ -d "$gd/rebase-merge" ] || [ -d "$gd/rebase-apply" ]; } && wanted=0
    fi
fi

if [ "$wanted" = 0 ]; then
    own=0
elif [ -n "$native" ] && [ -x "$native" ] && [ -n "$python" ] && [ -x "$python" ]; then
    # It runs the Python entry itself (same arguments and stdin) when the daemon does not
    "$native" "$python" hook git "$hook" "$@" <"$input"; own=$?
elif [ -n "$python" ] && [ -x "$python" ] && [ -n "$launcher" ] && [ -f "$launcher" ]; then
    # -S: no site-packages while the daemon answers (it imports them when it must); -P: the
    # launcher's directory is not put on sys.path (gitguard's modules would shadow stdlib's)
    "$python" -S -P "$launcher" hook git "$hook" "$@" <"$input"; own=$?
elif [ -n "$python" ] && [ -x "$python" ]; then
    "$python" -m gitguard hook git "$hook" "$@" <"$input"; own=$?
elif command -v gitguard >/dev/null 2>&1; then
    gitguard hook git "$hook" "$@" <"$input"; own=$?
else
    own=127
fi

if [ "$hook" = pre-push ]; then
    # gitguard exits 0 to let the push through and 4 to refuse it. Anything else means it
    # could not decide (missing, or broken: Python exits 1 on an import error): then this
    # shim still keeps the hidden refs at home by itself.
    if [ "$own" -eq 4 ]; then
        own=1
    elif [ "$own" -ne 0 ]; then
        own=0
        while read -r local_ref local_oid remote_ref remote_oid; do
            case $local_ref in refs/gitguard/*) own=1 ;; esac
            case $remote_ref in refs/gitguard/*)
                case $local_oid in *[!0]*) own=1 ;; esac ;;
            esac
        done <"$input"
        [ "$own" -eq 1 ] && echo "gitguard: refusing to push refs/gitguard/*: they hold gitguard's" \
            "private snapshots (git push --mirror sends every ref); push branches and tags" \
            "instead: git push --all && git push --tags" >&2
    fi
    [ "$status" -ne 0 ] && exit "$status"
    exit "$own"
fi
exit "$status"
