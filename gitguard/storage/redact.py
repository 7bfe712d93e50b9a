"""Replace secrets with ``[REDACTED:<kind>]`` before gitguard stores any text.

Every rule is one regex (plus an optional check in Python) from the table
below. Rules run independently on the original text and their hits are merged
before anything is replaced: no rule ever sees another rule's placeholder, and
two overlapping hits can never leave half a secret behind.

Linear time matters because tool output can be megabytes of anything. Python's
``re`` backtracks, so each token rule has a lookbehind that refuses to start
inside a run of its own body characters and consumes that body possessively:
a run is then scanned from one start at most. Assignments (``a=b=c``) can
start inside another value, so their unquoted value always matches once it is
long enough and is judged afterwards in Python; ``finditer`` then resumes past
it instead of rescanning the run from every key inside it.

``re.ASCII`` everywhere: ``\\s`` and ``(?i)`` then mean the same thing on text
and on latin-1-decoded bytes, and ``(?i)`` cannot match the Kelvin sign for k.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT", "RedactionResult", "Redactor"]

_Check = Callable[[re.Match[str]], bool]


@dataclass(frozen=True)
class RedactionResult:
    text: str
    count: int  # number of secrets replaced
    kinds: tuple[str, ...]  # sorted distinct kinds found


@dataclass(frozen=True)
class _Rule:
    kind: str
    regex: re.Pattern[str]
    check: _Check | None = None
    # The first of these groups that took part in the match is what gets
    # replaced; the rest of the match is context we keep (header names, keys).
    groups: tuple[str, ...] = ("secret",)

    def span(self, match: re.Match[str]) -> tuple[int, int]:
        for group in self.groups:
            if group in self.regex.groupindex:
                start, end = match.span(group)
                if start >= 0:
                    return start, end
        return match.span()


# --- building blocks ---------------------------------------------------------

_TOKEN_CHARS = "A-Za-z0-9_-"
# Prefixes made only of letters (AKIA, AIza, SK) also turn up inside base64
# blobs such as data URIs, so those may not follow + or / either.
_B64_CHARS = "A-Za-z0-9_+/-"


def _starts(width: int, chars: str = _TOKEN_CHARS) -> str:
    """Lookbehind placed after a token's first ``width`` (fixed) characters.

    The character before the token must not continue a run of ``chars``: that
    is the false-positive guard, and it is what keeps the scan linear. It sits
    after the literal prefix rather than before it so ``re`` can still jump
    between occurrences of the prefix instead of trying every position.
    """
    return rf"(?<![{chars}][\s\S]{{{width}}})"


_TOK_END = r"(?![A-Za-z0-9_-])"
# An optional quote around a key, escaped when the JSON sits inside a string.
_Q = r"""(?:\\?["'])?"""
_ASSIGN = r"[ \t]*(?::=|=>|[:=])[ \t]*"

_PEM_LABEL = r"(?:(?:RSA|EC|DSA|OPENSSH|ENCRYPTED|PGP) )?PRIVATE KEY(?: BLOCK)?"
# Keys pasted into JSON (service-account files) carry literal "\n" sequences.
_PEM_NL = r"(?:\r?\n|\\r?\\n)"
# Armor headers (Proc-Type, DEK-Info, Version, Comment) are bounded in count and
# length so a stray BEGIN line cannot make one start scan far.
_PEM_HEADERS = rf"(?:{_PEM_NL}[A-Za-z][A-Za-z0-9-]{{0,40}}+:[^\r\n\\]{{0,200}}+){{0,8}}+"
_PEM_BODY = r"(?:[A-Za-z0-9+/=\s]++|\\[rn])*+"

# Generic assignments: the key must *end* with one of these words
# (``DB_PASSWORD``, ``client_secret``, ``x-api-key``, ``GITHUB_TOKEN``).
_GENERIC_WORDS = {
    "password": r"pass(?:word|wd|phrase)",
    "secret": r"secret(?:[_-]?key)?|(?:private|signing|encryption|master)[_-]?key",
    "api_key": r"api[_-]?key|access[_-]?key|auth[_-]?key",
    "token": r"token",
}
_QUOTED_VALUE = r"""\\?(?P<q>["'`])(?P<quoted>(?:[^\s"'`\\]|\\(?!["'`])){8,}+)\\?(?P=q)"""
# Unquoted values stop at anything that cannot end a config value.
_BARE_VALUE = r"""(?P<bare>[^\s"'`,;&()\[\]{}<>\\]{8,}+)"""
# A value cut short by one of these is code (``tokens[i]``, ``input()``).
# Tested in _plausible_assignment, not in the regex: see the module docstring.
_CODE_FOLLOWERS = frozenset("()[]{}<>\\")


def _generic(words: str) -> str:
    # Anchored on the keyword, not the start of the key, so ``re`` can skip
    # ahead to keyword occurrences. The separator must follow the keyword at
    # once, so ``password_hash`` or ``tokenizer`` do not count.
    return rf"(?P<key>(?i:{words})){_Q}(?P<sep>{_ASSIGN})(?:{_QUOTED_VALUE}|{_BARE_VALUE})"


# --- checks --------------------------------------------------------------------

# Values that name a secret rather than contain one: shell and template
# variables, format fields, documentation stand-ins, our own placeholder.
_PLACEHOLDER = re.compile(
    r"\$\{[^}]*\}|\$\([^)]*\)|\$[A-Za-z_][A-Za-z0-9_]*|\{\{.*\}\}|\{[A-Za-z_][A-Za-z0-9_.]*\}"
    r"|<[^<>]*>|%\([A-Za-z_]+\)[a-z]|%[a-z]|\*+|x+|X+|\.{3}|\[REDACTED:[a-z0-9_]+\]",
    re.ASCII,
)
# ``user_password``, ``process.env.SECRET``, ``self._token``: a reference in
# code. Real secrets nearly always mix in digits or punctuation.
_CODE_REF = re.compile(
    r"[A-Za-z_$]+(?:\.[A-Za-z_$][\w$]*)*|[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)+", re.ASCII
)
_DIGIT = re.compile(r"[0-9]")
_OUR_PLACEHOLDER = re.compile(r"\[REDACTED:[a-z0-9_]+\]")
_MAX_PASSES = 4


def _is_placeholder(value: str) -> bool:
    return _PLACEHOLDER.fullmatch(value) is not None


def _has_digit(match: re.Match[str]) -> bool:
    # Prose says "Bearer authentication" and CSS says "sk-spinner-..."; tokens
    # long enough to matter are random and contain a digit.
    return _DIGIT.search(match.group(0)) is not None


def _real_password(match: re.Match[str]) -> bool:
    return not _is_placeholder(match.group("secret"))


def _docker_auth(match: re.Match[str]) -> bool:
    # ~/.docker/config.json stores base64("user:password"); anything else under
    # an "auth" key is some other schema.
    try:
        decoded = base64.b64decode(match.group("secret"), validate=True)
    except (binascii.Error, ValueError):
        return False
    return b":" in decoded


def _cli_password(match: re.Match[str]) -> bool:
    # ``docker run -u 1000:1000`` and ``-u www-data:www-data`` are user:group.
    password = match.group("secret")
    return not (_is_placeholder(password) or password.isdigit() or password == match.group("user"))


def _xml_value(match: re.Match[str]) -> bool:
    return not _is_placeholder(match.group("secret").strip())


def _plausible_assignment(match: re.Match[str]) -> bool:
    quoted = match.group("quoted")
    if quoted is not None:
        # A quoted literal is data even when it is all letters.
        return not _is_placeholder(quoted)
    value = match.group("bare")
    end = match.end("bare")
    if _is_placeholder(value) or match.string[end : end + 1] in _CODE_FOLLOWERS:
        return False
    key = match.group("key")
    # ``DB_PASSWORD=hunter`` is an env file; ``password = user_password`` is code.
    env_style = match.group("sep") == "=" and key == key.upper()
    return env_style or _CODE_REF.fullmatch(value) is None


# --- the table ------------------------------------------------------------------

# Order is priority: when hits overlap, the earlier row names the kind.
_TABLE: tuple[tuple[str, str, _Check | None], ...] = (
    # Whole armored block, so nothing of the key survives.
    (
        "private_key",
        rf"-----BEGIN {_PEM_LABEL}-----{_PEM_HEADERS}{_PEM_BODY}-----END {_PEM_LABEL}-----",
        None,
    ),
    (
        "aws_access_key",
        rf"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9]){_starts(4, _B64_CHARS)}[A-Z0-9]{{16}}"
        r"(?![A-Za-z0-9])",
        None,
    ),
    # 40 base64 characters are only an AWS secret next to an AWS-ish key name.
    (
        "aws_secret_key",
        r"(?i:(?:aws[_-]?)?secret[_-]?access[_-]?key|aws[_-]?secret[_-]?key)"
        rf"{_Q}{_ASSIGN}{_Q}(?P<secret>[A-Za-z0-9/+]{{40}})(?![A-Za-z0-9/+=])",
        None,
    ),
    ("github_token", rf"gh[pousr]_{_starts(4)}[A-Za-z0-9]{{36,}}+{_TOK_END}", None),
    ("github_token", rf"github_pat_{_starts(11)}[A-Za-z0-9_]{{60,}}+{_TOK_END}", None),
    ("gitlab_token", rf"gl{_starts(2)}(?:pat|dt|rt|ptt)-[A-Za-z0-9_-]{{20,}}+", None),
    # Keep the host so the log still says a Slack webhook was called.
    (
        "slack_webhook",
        r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
        r"(?P<secret>[A-Za-z0-9_/-]{20,}+)",
        None,
    ),
    ("slack_token", rf"x{_starts(1)}(?:ox[abeoprs]|app)-[A-Za-z0-9-]{{10,}}+", None),
    (
        "stripe_key",
        rf"(?:(?:sk|rk)_(?:live|test)_{_starts(8)}[A-Za-z0-9]{{16,}}+"
        rf"|whsec_{_starts(6)}[A-Za-z0-9]{{24,}}+){_TOK_END}",
        None,
    ),
    ("google_api_key", rf"AIza{_starts(4, _B64_CHARS)}[A-Za-z0-9_-]{{35}}{_TOK_END}", None),
    ("google_oauth_secret", rf"GOCSPX-{_starts(7)}[A-Za-z0-9_-]{{28}}{_TOK_END}", None),
    # Before openai: sk-ant- would otherwise read as an sk- key.
    ("anthropic_key", rf"sk-ant-{_starts(7)}[A-Za-z0-9_-]{{20,}}+", None),
    (
        "openai_key",
        rf"sk-{_starts(3)}(?!ant-)(?:(?:proj|svcacct|admin)-[A-Za-z0-9_-]{{20,}}+"
        r"|[A-Za-z0-9]{20,}+(?![_-]))",
        _has_digit,
    ),
    ("npm_token", rf"npm_{_starts(4)}[A-Za-z0-9]{{36}}{_TOK_END}", None),
    # Every PyPI token is a macaroon whose base64 starts "AgE".
    ("pypi_token", rf"pypi-AgE{_starts(8)}[A-Za-z0-9_-]{{50,}}+", None),
    ("twilio_api_key", rf"SK{_starts(2, _B64_CHARS)}[0-9a-f]{{32}}{_TOK_END}", None),
    (
        "sendgrid_key",
        rf"SG\.{_starts(3)}[A-Za-z0-9_-]{{22}}\.[A-Za-z0-9_-]{{43}}{_TOK_END}",
        None,
    ),
    ("huggingface_token", rf"hf_{_starts(3)}[A-Za-z0-9]{{30,}}+(?![_-])", None),
    ("digitalocean_token", rf"do[opr]_v1_{_starts(7)}[a-f0-9]{{64}}{_TOK_END}", None),
    ("heroku_api_key", rf"HRKU-{_starts(5)}[A-Za-z0-9_-]{{20,}}+", None),
    (
        "azure_storage_key",
        r"(?i:AccountKey|SharedAccessKey)=(?P<secret>[A-Za-z0-9+/]{20,}+={0,2})",
        None,
    ),
    ("docker_auth", r'"auth"[ \t]*:[ \t]*"(?P<secret>[A-Za-z0-9+/]{8,}+={0,2})"', _docker_auth),
    (
        "jwt",
        rf"eyJ{_starts(3)}[A-Za-z0-9_-]{{10,}}+\.eyJ[A-Za-z0-9_-]{{10,}}+\.[A-Za-z0-9_-]*+",
        None,
    ),
    # The user part stays; the password may hold a raw "@", so the greedy
    # (bounded) password backs off to the last "@" before the host.
    (
        "url_password",
        r"""(?<![A-Za-z0-9+.-])[A-Za-z][A-Za-z0-9+.-]{0,30}+://[^\s:/?#@"'<>]{0,256}+:"""
        r"""(?P<secret>[^\s/?#"'<>]{1,256})@""",
        _real_password,
    ),
    (
        "bearer_token",
        rf"(?:[Bb]earer|BEARER){_starts(6)}[ \t]+(?P<secret>[A-Za-z0-9._~+/-]{{10,}}+=*+)",
        _has_digit,
    ),
    # "Basic" alone is common prose, so only inside an Authorization header.
    (
        "basic_auth",
        rf"(?i:authorization){_Q}[ \t]*[:=,][ \t]*{_Q}[ \t]*(?i:basic)[ \t]+"
        r"(?P<secret>[A-Za-z0-9+/]{8,}+={0,2})",
        None,
    ),
    # GitHub's "token" scheme, Discord's "Bot", Django REST framework's "Token".
    (
        "authorization_token",
        rf"(?i:authorization){_Q}[ \t]*[:=,][ \t]*{_Q}[ \t]*(?:[Tt]oken|TOKEN|Bot)[ \t]+"
        r"(?P<secret>[A-Za-z0-9._~+/:-]{8,}+=*+)",
        None,
    ),
    # curl/wget/httpie ``-u user:password``; quoted, the password may hold spaces.
    (
        "basic_auth",
        r"""-(?<![\w-]-)(?:u|-user)[ \t]+(?P<q>["'])?(?P<user>[^\s:"']{1,256}+):"""
        r"""(?P<secret>(?(q)[^"'\r\n]{1,256}+|[^\s"']{1,256}+))""",
        _cli_password,
    ),
    # ``mysql -uroot -pS3cret``: the password is glued to -p; a bare -p prompts.
    (
        "mysql_password",
        r"(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n]{0,200}?[ \t]-p"
        r"""(?P<secret>[^\s"'-][^\s"']{3,255}+)""",
        None,
    ),
    # Maven settings.xml, .NET app.config and friends.
    (
        "xml_secret",
        r"<(?P<tag>[A-Za-z0-9_.:-]{0,40}(?i:pass(?:word|wd|phrase)|secret|token|api[_-]?key))>"
        r"(?P<secret>[^<\r\n]{1,1024}+)</(?P=tag)>",
        _xml_value,
    ),
    *((kind, _generic(words), _plausible_assignment) for kind, words in _GENERIC_WORDS.items()),
)

# The shortest text any built-in rule can match (`re`'s own minimum width of each pattern:
# tests/storage/test_redact.py checks this is not above any of them). A shorter text holds no
# secret the table finds, so it needs none of the 34 patterns compiled: compiling them
# is ~50 M instructions, a twentieth of a fresh `call end` whose result is "ok".
MIN_MATCH = 6


@functools.cache
def _builtin_rules() -> tuple[_Rule, ...]:
    return tuple(_Rule(kind, re.compile(pattern, re.ASCII), check, ("secret", "quoted", "bare"))
                 for kind, pattern, check in _TABLE)


def _compile_extra(pattern: str) -> _Rule:
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid redaction pattern {pattern!r}: {exc}") from exc
    return _Rule("custom", regex)


class Redactor:
    """Finds secrets by the built-in table plus ``extra_patterns`` from config.

    An extra pattern replaces its whole match, or only its ``secret`` group if
    it has one, with ``[REDACTED:custom]``.
    """

    def __init__(self, extra_patterns: Sequence[str] = ()) -> None:
        if isinstance(extra_patterns, str):
            # A lone string is a Sequence[str] too; compiling it letter by
            # letter would redact every character it contains.
            raise TypeError("extra_patterns must be a sequence of patterns, not one string")
        self._extra = tuple(_compile_extra(p) for p in extra_patterns)

    @property
    def _rules(self) -> tuple[_Rule, ...]:
        return _builtin_rules() + self._extra

    def redact(self, text: str) -> RedactionResult:
        # One hit can hide the next: in "-----END ... KEY-----ghp_..." the token
        # touches the block, so its lookbehind refuses it until the block is a
        # placeholder. Passes repeat until nothing is found; the built-in rules
        # settle in two, the cap only bounds what extra patterns could chain.
        if len(text) < MIN_MATCH and not self._extra:
            return RedactionResult(text, 0, ())     # what the passes find: nothing
        count = 0
        kinds: set[str] = set()
        for _ in range(_MAX_PASSES):
            text, found = self._pass(text)
            if not found:
                break
            count += len(found)
            kinds.update(found)
        return RedactionResult(text, count, tuple(sorted(kinds)))

    def _pass(self, text: str) -> tuple[str, list[str]]:
        """One scan of every rule; returns the new text and the kind of each
        placeholder it inserted."""
        # Placeholders already in the text are opaque: a hit that touches one
        # (``https://[REDACTED:github_token]@`` read as user:password) would
        # make redacting twice differ from redacting once.
        done = [m.span() for m in _OUR_PLACEHOLDER.finditer(text)]
        done_ends = [end for _, end in done]
        hits: list[tuple[int, int, int, str]] = []
        for priority, rule in enumerate(self._rules):
            for match in rule.regex.finditer(text):
                if rule.check is not None and not rule.check(match):
                    continue
                start, end = rule.span(match)
                i = bisect.bisect_right(done_ends, start)
                if start < end and not (i < len(done) and done[i][0] < end):
                    hits.append((start, end, priority, rule.kind))
        if not hits:
            return text, []

        # Union overlapping hits so every matched character is covered; the
        # highest-priority rule in a union names it.
        hits.sort()
        merged: list[tuple[int, int, int, str]] = []
        for start, end, priority, kind in hits:
            if merged and start < merged[-1][1]:
                m_start, m_end, m_priority, m_kind = merged[-1]
                if priority < m_priority:
                    m_priority, m_kind = priority, kind
                merged[-1] = (m_start, max(m_end, end), m_priority, m_kind)
            else:
                merged.append((start, end, priority, kind))

        pieces: list[str] = []
        cursor = 0
        for start, end, _, kind in merged:
            pieces.append(text[cursor:start])
            pieces.append(f"[REDACTED:{kind}]")
            cursor = end
        pieces.append(text[cursor:])
        return "".join(pieces), [kind for _, _, _, kind in merged]

    def redact_bytes(self, data: bytes) -> tuple[bytes, int]:
        # latin-1 maps each byte to one code point and back, so any bytes
        # (UTF-8 or not) survive the round trip untouched outside a secret.
        result = self.redact(data.decode("latin-1"))
        return result.text.encode("latin-1"), result.count


DEFAULT = Redactor()
