"""Split a shell command line into the simple commands it would run.

Pure and stdlib-only: the classifier runs on every agent tool call, so this must
stay cheap to import and must never raise, whatever text an agent sends. It is
a best-effort reading of POSIX/bash syntax, not an interpreter: where it cannot
follow the syntax it still returns what it found and sets ``unparsable``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

__all__ = ["ParsedLine", "SimpleCommand", "split_argv", "split_commands"]


@dataclass(frozen=True)
class SimpleCommand:
    """One program invocation, after env assignments and wrappers were removed."""

    argv: tuple[str, ...]
    wrappers: tuple[str, ...] = ()  # e.g. ("sudo", "timeout"): stripped, but sudo matters
    writes: tuple[str, ...] = ()  # files written through output redirections
    stdin: str | None = None  # here-document / here-string text fed to the command


@dataclass(frozen=True)
class ParsedLine:
    commands: tuple[SimpleCommand, ...]
    unparsable: bool = False


@dataclass(frozen=True)
class _Wrapper:
    """A program that runs the command given after its own options."""

    arg_opts: frozenset[str] = frozenset()  # options that consume the next word
    positional: int = 0  # operands before the command, e.g. timeout's duration
    assignments: bool = False  # env accepts VAR=value before the command
    inert: frozenset[str] = frozenset()  # options meaning "run nothing", e.g. command -v
    default: tuple[str, ...] = ()  # what runs when no command is given (xargs: echo)


def _opts(text: str) -> frozenset[str]:
    return frozenset(text.split())


_PLAIN = _Wrapper()
# Keys are a program name, or "program subcommand" for runners like `poetry run`.
_WRAPPERS: dict[str, _Wrapper] = {
    **dict.fromkeys(("nohup", "time", "builtin", "pnpm exec", "pnpm dlx", "yarn exec",
                     "bundle exec", "poetry run", "pipenv run", "pdm run", "hatch run"), _PLAIN),
    "sudo": _Wrapper(_opts("-u -g -h -p -C -U -r -t -D -R -T --user --group --host --chdir"),
                     inert=_opts("-l --list -v --validate -k -K -V --version -e --edit")),
    "doas": _Wrapper(_opts("-u -C")),
    "env": _Wrapper(_opts("-u -C --unset --chdir"), assignments=True),
    "nice": _Wrapper(_opts("-n --adjustment")),
    "ionice": _Wrapper(_opts("-c -n --class --classdata")),
    "stdbuf": _Wrapper(_opts("-i -o -e --input --output --error")),
    "timeout": _Wrapper(_opts("-s -k --signal --kill-after"), positional=1),
    "watch": _Wrapper(_opts("-n --interval")),
    "xargs": _Wrapper(_opts("-a -d -E -I -L -n -P -s --arg-file --delimiter --max-args "
                            "--max-procs --max-lines --max-chars --process-slot-var"),
                      default=("echo",)),
    "command": _Wrapper(inert=_opts("-v -V")),
    "exec": _Wrapper(_opts("-a")),
    **dict.fromkeys(("npx", "bunx", "yarn dlx"), _Wrapper(_opts("-p --package"))),
    "uvx": _Wrapper(_opts("--from --with -p --python")),
    "npm exec": _Wrapper(_opts("-p --package -w --workspace")),
    "pipx run": _Wrapper(_opts("--spec")),
    "conda run": _Wrapper(_opts("-n --name -p --prefix")),
    "uv run": _Wrapper(_opts("--with -p --python --extra --group --package --directory "
                             "--project --env-file")),
}

_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "mksh", "fish"})
_SHELL_ARG_OPTS = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
# Options through which a program runs another command given in its arguments.
_EXEC_OPTS: dict[str, frozenset[str]] = {"find": _opts("-exec -execdir -ok -okdir")}

# Reserved words that only introduce the command after them (`if grep ...`, `then rm ...`).
_RESERVED = frozenset({"if", "then", "else", "elif", "fi", "do", "done", "while", "until",
                       "!", "{", "}", "esac"})
# Constructs whose remaining words are data, not a command to run.
_DATA_HEADS = frozenset({"for", "select", "function", "case"})

_OPERATORS = ("<<<", "<<-", "&>>", "&&", "||", ";;", "|&", "<<", ">>", ">&", "<&", "&>", ">|",
              "<>", "|", "&", ";", "(", ")", ">", "<")
_REDIRS = frozenset(op for op in _OPERATORS if "<" in op or ">" in op)
_OUTPUT_REDIRS = frozenset({">", ">>", ">|", "&>", "&>>", ">&", "<>"})
_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
# Deeper nesting than this is not a real command line; stop instead of recursing.
_MAX_DEPTH = 12


class _Tok(NamedTuple):
    kind: str  # "word", "op", "redir" or "body" (a here-document's text)
    text: str
    quoted: bool = False  # the word began with a quote or escape: not a keyword


def _match_paren(src: str, i: int) -> int:
    """Index of the ')' closing the '(' just before ``i``, or -1 if there is none."""
    depth, n = 1, len(src)
    while i < n:
        c = src[i]
        if c == "\\":
            i += 1
        elif c == "'":  # an apostrophe in a here-document may never close: then it is text
            close = src.find("'", i + 1)
            i = i if close < 0 else close
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


class _Lexer:
    """Turns source text into tokens; command substitutions are collected in ``subs``."""

    def __init__(self, src: str) -> None:
        self.src, self.i, self.broken = src, 0, False
        self.toks: list[_Tok] = []
        self.subs: list[str] = []
        self._buf: list[str] = []
        self._in_word = self._quoted = False
        self._heredocs: list[tuple[str, bool]] = []  # (delimiter, strip leading tabs)
        self._delim_strip: bool | None = None  # set after `<<`: the next word is a delimiter

    def run(self) -> list[_Tok]:
        src, n = self.src, len(self.src)
        while self.i < n:
            c = src[self.i]
            if c == "\\":
                self._escape()
            elif c == "'":
                end = src.find("'", self.i + 1)
                if end < 0:
                    self.broken, end = True, n
                self._add(src[self.i + 1 : end], quoted=True)
                self.i = end + 1
            elif c == '"':
                self._double()
            elif c == "`":
                self._take(self._backtick(self.i))
            elif src.startswith(("$(", "<(", ">("), self.i):
                self._take(self._subst(self.i))
            elif src.startswith("${", self.i):
                end = src.find("}", self.i)
                self._take(n if end < 0 else end + 1)
            elif c == "(" and self._buf[-1:] == ["="]:  # array assignment: a=(x y)
                end = _match_paren(src, self.i + 1)
                self._take(n if end < 0 else end + 1)
            elif c in " \t\r":
                self._end_word()
                self.i += 1
            elif c == "\n":
                self._end_word()
                self.toks.append(_Tok("op", ";"))
                self.i += 1
                self._read_heredocs()
            elif c == "#" and not self._in_word:
                end = src.find("\n", self.i)
                self.i = n if end < 0 else end
            elif c in "|&;()<>":
                self._operator()
            else:
                self._add(c)
                self.i += 1
        self._end_word()
        return self.toks

    def _take(self, end: int) -> None:
        """Add the raw text up to ``end`` to the current word (substitutions, arrays)."""
        self._add(self.src[self.i : end])
        self.i = end

    def _add(self, text: str, quoted: bool = False) -> None:
        if not self._in_word:
            self._in_word, self._quoted = True, quoted
        self._buf.append(text)

    def _end_word(self) -> None:
        if not self._in_word:
            return
        text = "".join(self._buf)
        if self._delim_strip is not None:
            self._heredocs.append((text, self._delim_strip))
            self._delim_strip = None
        self.toks.append(_Tok("word", text, self._quoted))
        self._buf, self._in_word = [], False

    def _escape(self) -> None:
        nxt = self.src[self.i + 1 : self.i + 2]
        if nxt and nxt != "\n":  # backslash-newline is a line continuation: drop both
            self._add(nxt, quoted=True)
        self.i += 2

    def _double(self) -> None:
        src, n, i = self.src, len(self.src), self.i + 1
        parts: list[str] = []
        while i < n and src[i] != '"':
            if src[i] == "\\" and i + 1 < n:
                nxt = src[i + 1]
                parts.append(nxt if nxt in '$`"\\' else "" if nxt == "\n" else "\\" + nxt)
                i += 2
            elif src.startswith("$(", i) or src[i] == "`":
                end = self._subst(i) if src[i] == "$" else self._backtick(i)
                parts.append(src[i:end])  # still runs inside double quotes
                i = end
            else:
                parts.append(src[i])
                i += 1
        if i >= n:
            self.broken = True
        self._add("".join(parts), quoted=True)
        self.i = i + 1

    def _subst(self, i: int) -> int:
        """Record the command inside `$(…)`, `<(…)` or `>(…)`; return the index after it."""
        close = _match_paren(self.src, i + 2)
        if close < 0:
            self.broken = True
            close = len(self.src)
        if not self.src.startswith("$((", i):  # `$((…))` is arithmetic, not a command
            self.subs.append(self.src[i + 2 : close])
        return close + 1

    def _backtick(self, i: int) -> int:
        src, j = self.src, i + 1
        while j < len(src) and src[j] != "`":
            j += 2 if src[j] == "\\" else 1
        if j >= len(src):
            self.broken = True
        self.subs.append(src[i + 1 : j].replace("\\`", "`"))
        return j + 1

    def _operator(self) -> None:
        op = next(o for o in _OPERATORS if self.src.startswith(o, self.i))
        if op in _REDIRS and self._in_word and not self._quoted and "".join(self._buf).isdigit():
            self._buf, self._in_word = [], False  # `2>`: the digits name a descriptor
        else:
            self._end_word()
        self.toks.append(_Tok("redir" if op in _REDIRS else "op", op))
        if op in ("<<", "<<-"):
            self._delim_strip = op == "<<-"
        self.i += len(op)

    def _read_heredocs(self) -> None:
        src, n = self.src, len(self.src)
        for delim, strip in self._heredocs:
            lines: list[str] = []
            while self.i < n:
                end = src.find("\n", self.i)
                end = n if end < 0 else end
                line, self.i = src[self.i : end], end + 1
                if (line.lstrip("\t") if strip else line) == delim:
                    break
                lines.append(line)
            self.toks.append(_Tok("body", "\n".join(lines)))
        self._heredocs.clear()


@dataclass
class _Segment:
    """The words of one simple command as written, before wrappers are removed."""

    words: list[_Tok] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    stdin: list[str] = field(default_factory=list)
    end: str = ""  # the operator that ended it


def _segments(toks: list[_Tok]) -> list[_Segment]:
    segs = [_Segment()]
    redir: str | None = None
    awaiting_body: list[_Segment] = []
    for tok in toks:
        cur = segs[-1]
        if tok.kind == "redir":
            redir = tok.text
        elif tok.kind == "body":
            if awaiting_body:
                awaiting_body.pop(0).stdin.append(tok.text)
        elif tok.kind == "word" and redir is None:
            cur.words.append(tok)
        elif tok.kind == "word":
            if redir in ("<<", "<<-"):
                awaiting_body.append(cur)
            elif redir == "<<<":
                cur.stdin.append(tok.text)
            elif redir in _OUTPUT_REDIRS and tok.text not in _NOT_FILES and not (
                redir == ">&" and (tok.text.isdigit() or tok.text == "-")
            ):
                cur.writes.append(tok.text)
            redir = None
        else:
            redir, cur.end = None, tok.text
            if tok.text == ")" and not cur.words and len(segs) > 1:
                prev = segs[-2]
                if prev.end == "(" and len(prev.words) == 1:  # `name() { …; }` defines
                    prev.words.clear()
            segs.append(_Segment())
    return segs


def _base(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _skip_wrapper(spec: _Wrapper, argv: list[str], start: int) -> list[str] | None:
    """The command a wrapper runs, or None when its options say it runs nothing."""
    i, n = start, len(argv)
    while i < n:
        a = argv[i]
        if a in spec.inert:
            return None
        if a == "--":
            i += 1
            break
        if not a.startswith("-") or (a == "-" and not spec.assignments):
            break
        i += 2 if a in spec.arg_opts else 1
    while spec.assignments and i < n and _ASSIGNMENT.match(argv[i]):
        i += 1
    return argv[i + spec.positional :]


def _shell_script(argv: list[str]) -> str | None:
    """The script of `sh -c SCRIPT` (also `bash -lc`, `sh -e -c`), else None."""
    i = 1
    while i < len(argv) and argv[i].startswith(("-", "+")) and argv[i] != "--":
        a = argv[i]
        if a.startswith("-") and not a.startswith("--") and "c" in a[1:]:
            return argv[i + 1] if i + 1 < len(argv) else ""
        i += 2 if a in _SHELL_ARG_OPTS else 1
    return None


class _Collector:
    def __init__(self) -> None:
        self.commands: list[SimpleCommand] = []
        self.broken = False

    def parse(self, src: str, depth: int, wrappers: tuple[str, ...]) -> None:
        if depth > _MAX_DEPTH:
            self.broken = True
            return
        lexer = _Lexer(src)
        toks = lexer.run()
        self.broken = self.broken or lexer.broken
        pattern_next = False  # after `case … in` or `;;` a word list ending in `)` is a pattern
        for seg in _segments(toks):
            if not seg.words and not seg.writes and seg.end in (";", ""):
                continue  # blank line or stray separator
            is_pattern, pattern_next = pattern_next and seg.end == ")", seg.end == ";;"
            words = seg.words
            while words and not words[0].quoted and words[0].text in _RESERVED:
                words = words[1:]
            head = words[0].text if words and not words[0].quoted else ""
            pattern_next = pattern_next or head == "case"
            if is_pattern or head in _DATA_HEADS:
                continue  # loop lists, function headers and case patterns are not commands
            while words and not words[0].quoted and _ASSIGNMENT.match(words[0].text):
                words = words[1:]
            stdin = "\n".join(seg.stdin) if seg.stdin else None
            argv = [w.text for w in words]
            self.resolve(argv, wrappers, tuple(seg.writes), stdin, depth)
        for sub in lexer.subs:
            self.parse(sub, depth + 1, wrappers)

    def resolve(self, argv: list[str], wrappers: tuple[str, ...], writes: tuple[str, ...],
                stdin: str | None, depth: int) -> None:
        if depth > _MAX_DEPTH:
            self.broken = True
            return
        while argv:
            key, start = _base(argv[0]), 1
            if key not in _WRAPPERS and len(argv) > 1:
                key, start = f"{key} {argv[1]}", 2
            spec = _WRAPPERS.get(key)
            rest = None if spec is None else _skip_wrapper(spec, argv, start)
            if spec is None or rest is None:
                break
            if not rest and not spec.default:
                break  # `env` or `time` alone: the wrapper itself is the command
            wrappers, argv = (*wrappers, key), (rest or list(spec.default))
            while spec.assignments and argv and _ASSIGNMENT.match(argv[0]):
                argv = argv[1:]
        name = _base(argv[0]) if argv else ""
        script = _shell_script(argv) if name in _SHELLS else None
        if script is None and name in _SHELLS and len(argv) == 1 and stdin is not None:
            script = stdin  # `bash <<EOF … EOF` runs the here-document
        if script is None and name == "eval":
            script = " ".join(argv[1:])
        if script is not None:
            self.parse(script, depth + 1, wrappers)
            argv = []
        if argv or writes:
            self.commands.append(SimpleCommand(tuple(argv), wrappers, writes, stdin))
        opts, i = _EXEC_OPTS.get(name, frozenset()), 0
        while i < len(argv):  # `find … -exec rm {} ;` also runs rm
            if argv[i] in opts:
                end = next((j for j in range(i + 1, len(argv)) if argv[j] in (";", "+")), len(argv))
                self.resolve(argv[i + 1 : end], wrappers, (), None, depth + 1)
                i = end
            i += 1


def split_commands(line: str) -> ParsedLine:
    """Every simple command ``line`` would run, including nested and wrapped ones."""
    collector = _Collector()
    collector.parse(line, 0, ())
    return ParsedLine(tuple(collector.commands), collector.broken)


def split_argv(argv: Sequence[str]) -> ParsedLine:
    """Like :func:`split_commands` for an argv list that no shell will re-split."""
    collector = _Collector()
    collector.resolve([str(a) for a in argv], (), (), None, 0)
    return ParsedLine(tuple(collector.commands), collector.broken)
