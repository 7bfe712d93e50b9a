"""Redactor tests: the two fixture corpora, the API contract, and properties."""

from __future__ import annotations

import json
import re
import string
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gitguard.storage.redact import DEFAULT, RedactionResult, Redactor

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
SECRETS_DIR = FIXTURES / "secrets"
CLEAN_DIR = FIXTURES / "clean_code"
EXPECTED: dict[str, list[str]] = json.loads((SECRETS_DIR / "EXPECTED.json").read_text())

SECRET_FILES = sorted(p.name for p in SECRETS_DIR.iterdir() if p.name != "EXPECTED.json")
CLEAN_FILES = sorted(p.name for p in CLEAN_DIR.iterdir())


def read(path: Path) -> str:
    # newline="" keeps CRLF and friends exactly as stored.
    with path.open(encoding="utf-8", newline="") as f:
        return f.read()


# --- corpora ---------------------------------------------------------------------


def test_corpora_are_complete() -> None:
    assert len(SECRET_FILES) >= 22
    assert len(CLEAN_FILES) >= 10
    assert sorted(EXPECTED) == SECRET_FILES, "EXPECTED.json must list every secret fixture"


def test_corpus_covers_at_least_22_kinds() -> None:
    kinds = {
        kind for name in SECRET_FILES for kind in DEFAULT.redact(read(SECRETS_DIR / name)).kinds
    }
    assert len(kinds) >= 22, sorted(kinds)


@pytest.mark.parametrize("name", SECRET_FILES)
def test_secret_fixture_is_redacted(name: str) -> None:
    text = read(SECRETS_DIR / name)
    secrets = EXPECTED[name]
    assert secrets, f"{name}: EXPECTED.json lists no secret"
    for secret in secrets:
        assert secret in text, f"{name}: EXPECTED.json is stale"

    result = DEFAULT.redact(text)

    assert result.count >= 1
    assert "[REDACTED:" in result.text
    for secret in secrets:
        assert secret not in result.text, f"{name}: leaked {secret[:12]}..."


@pytest.mark.parametrize("name", CLEAN_FILES)
def test_clean_fixture_is_untouched(name: str) -> None:
    text = read(CLEAN_DIR / name)

    result = DEFAULT.redact(text)

    assert result == RedactionResult(text, 0, ())


@pytest.mark.parametrize(
    "path",
    [SECRETS_DIR / n for n in SECRET_FILES] + [CLEAN_DIR / n for n in CLEAN_FILES],
    ids=lambda p: p.name,
)
def test_redaction_is_idempotent(path: Path) -> None:
    once = DEFAULT.redact(read(path))

    twice = DEFAULT.redact(once.text)

    assert twice.text == once.text
    assert twice.count == 0


# --- replacement shape -------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Authorization: Bearer a1b2c3d4e5f6g7h8i9j0",
            "Authorization: Bearer [REDACTED:bearer_token]",
        ),
        ("https://user:hunter2!x@host/path", "https://user:[REDACTED:url_password]@host/path"),
        (
            "AWS_SECRET_ACCESS_KEY=Fake0Example1Secret2Access3Key4Value5678",
            "AWS_SECRET_ACCESS_KEY=[REDACTED:aws_secret_key]",
        ),
        ('{"password": "Tr0ub4dor&3"}', '{"password": "[REDACTED:password]"}'),
        ("DB_PASSWORD=correcthorse", "DB_PASSWORD=[REDACTED:password]"),
        # Overlapping hits become one placeholder named by the more specific rule.
        (
            "token=ghp_FAKEabcdefghijklmnopqrstuvwxyz012345",
            "token=[REDACTED:github_token]",
        ),
    ],
)
def test_context_around_the_secret_is_kept(text: str, expected: str) -> None:
    assert DEFAULT.redact(text).text == expected


def test_a_token_glued_to_a_key_block_is_still_found() -> None:
    # The token's lookbehind sees "-" until the key block is a placeholder.
    text = (
        "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKfake\n-----END RSA PRIVATE KEY-----"
        "ghp_FAKEabcdefghijklmnopqrstuvwxyz012345"
    )

    result = DEFAULT.redact(text)

    assert result.text == "[REDACTED:private_key][REDACTED:github_token]"
    assert result.count == 2


def test_count_and_kinds() -> None:
    text = (
        "AKIAFAKEEXAMPLE12345 and AKIAFAKEEXAMPLE67890\n"
        "GITHUB_TOKEN=ghp_FAKEabcdefghijklmnopqrstuvwxyz012345\n"
    )

    result = DEFAULT.redact(text)

    assert result.count == 3
    assert result.kinds == ("aws_access_key", "github_token")


@pytest.mark.parametrize(
    "text",
    [
        "password = input()",
        "token = tokens[i]",
        "const secret = process.env.SECRET;",
        "def get_api_key(self):",
        "password: str = ''",
        "The API uses Bearer authentication.",
        'req.Header.Set("Authorization", "Basic "+creds)',
        "POSTGRES_PASSWORD: ${POSTGRES_PASSWORD}",
        "token: ${{ secrets.GITHUB_TOKEN }}",
        'f"mysql://{user}:{password}@{host}"',
        "docker run -u 1000:1000 node:20",
        "mysql -u root -p app",
        "<password>${env.MVN_PASSWORD}</password>",
        '{"pad_token": "<pad>", "unk_token": "<|endoftext|>"}',
    ],
)
def test_code_that_names_secrets_is_left_alone(text: str) -> None:
    assert DEFAULT.redact(text).count == 0


# --- configuration -------------------------------------------------------------------


def test_extra_patterns_redact_whole_match_or_secret_group() -> None:
    redactor = Redactor([r"ACME-[0-9]{6}", r"internal_id=(?P<secret>\d{4,})"])

    result = redactor.redact("ticket ACME-123456, internal_id=98765")

    assert result.text == "ticket [REDACTED:custom], internal_id=[REDACTED:custom]"
    assert result.count == 2
    assert result.kinds == ("custom",)
    assert DEFAULT.redact("ticket ACME-123456").count == 0


def test_extra_patterns_add_to_the_built_in_rules() -> None:
    result = Redactor([r"ACME-[0-9]{6}"]).redact("ACME-123456 AKIAFAKEEXAMPLE12345")

    assert result.kinds == ("aws_access_key", "custom")


def test_invalid_extra_pattern_raises_value_error_naming_it() -> None:
    with pytest.raises(ValueError, match=re.escape("'ok|(unclosed'")):
        Redactor([r"fine", r"ok|(unclosed"])


def test_a_lone_string_is_not_a_pattern_list() -> None:
    with pytest.raises(TypeError):
        Redactor("ACME-[0-9]+")


# --- bytes ---------------------------------------------------------------------------


def test_redact_bytes_keeps_non_utf8_bytes() -> None:
    data = b"caf\xe9 \xff\xfe log: key=AKIAFAKEEXAMPLE12345 \x80\x00 end\xe9\n"
    with pytest.raises(UnicodeDecodeError):
        data.decode("utf-8")

    out, count = DEFAULT.redact_bytes(data)

    assert out == b"caf\xe9 \xff\xfe log: key=[REDACTED:aws_access_key] \x80\x00 end\xe9\n"
    assert count == 1


def test_redact_bytes_agrees_with_redact_on_ascii() -> None:
    text = read(SECRETS_DIR / "jwt.log")

    out, count = DEFAULT.redact_bytes(text.encode("ascii"))

    expected = DEFAULT.redact(text)
    assert (out.decode("ascii"), count) == (expected.text, expected.count)


# --- linear time -------------------------------------------------------------------------

# No timing asserts: a quadratic rule would turn each of these into minutes,
# which the suite would notice without a flaky threshold.
ADVERSARIAL = {
    "a": "a" * 1_000_000,
    "equals": "=" * 1_000_000,
    "spaces": " " * 1_000_000,
    "assignments": "password=" * 110_000,
    "quoted": 'token="' * 140_000,
    "jwt_prefix": "eyJ" * 330_000,
    "pem_begin": "-----BEGIN RSA PRIVATE KEY-----\n" * 30_000,
    "url": "a://b:c" * 140_000,
    "at_signs": "http://u:" + "@" * 1_000_000,
    "github_prefix": "ghp_" * 250_000,
    "bearer": "Bearer " * 140_000,
    "base64": "QUJD+/" * 160_000,
}


@pytest.mark.parametrize("name", sorted(ADVERSARIAL))
def test_megabyte_inputs_complete(name: str) -> None:
    text = ADVERSARIAL[name]

    result = DEFAULT.redact(text)

    assert len(result.text) <= len(text) + 64 * result.count


# --- properties ----------------------------------------------------------------------------

# Runs of letters alone can only spell a secret through these prefixes
# (AKIA..., AIza..., SK + hex letters).
LETTER_SECRET_PREFIXES = re.compile(r"AKIA|ASIA|ABIA|ACCA|AIza|SK")


@settings(max_examples=300)
@given(st.text(alphabet=string.ascii_letters + " \n", max_size=400))
def test_secret_free_letters_are_never_changed(text: str) -> None:
    if LETTER_SECRET_PREFIXES.search(text):
        return

    result = DEFAULT.redact(text)

    assert len(result.text) <= len(text)
    assert result == RedactionResult(text, 0, ())


@settings(max_examples=300)
@given(st.text())
def test_redact_never_raises_on_any_text(text: str) -> None:
    result = DEFAULT.redact(text)

    assert result.count >= 0
    assert DEFAULT.redact(result.text).text == result.text


@settings(max_examples=200)
@given(st.binary())
def test_redact_bytes_never_raises(data: bytes) -> None:
    out, count = DEFAULT.redact_bytes(data)

    assert count >= 0
    assert DEFAULT.redact_bytes(out) == (out, 0)


NOISE = st.text(alphabet=string.printable.replace("\r", "").replace("\x0b", ""), max_size=60)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.one_of(st.sampled_from(SECRET_FILES), NOISE.map(lambda s: "noise:" + s)),
        min_size=1,
        max_size=6,
    )
)
def test_mixed_documents_leak_nothing_and_stay_idempotent(parts: list[str]) -> None:
    chunks: list[str] = []
    secrets: list[str] = []
    for part in parts:
        if part.startswith("noise:"):
            chunks.append(part.removeprefix("noise:"))
        else:
            chunks.append(read(SECRETS_DIR / part))
            secrets.extend(EXPECTED[part])
    text = "\n".join(chunks)

    once = DEFAULT.redact(text)

    for secret in secrets:
        assert secret not in once.text
    assert DEFAULT.redact(once.text).text == once.text


def test_no_built_in_rule_matches_a_text_shorter_than_min_match() -> None:
    """`Redactor.redact` skips a text shorter than MIN_MATCH (no pattern compiled): safe
    only while every pattern's shortest match is at least that long."""
    import importlib

    from gitguard.storage import redact

    sre_parse = importlib.import_module("re._parser")   # re's own width computation

    widths = {kind: sre_parse.parse(pattern, re.ASCII).getwidth()[0]
              for kind, pattern, _ in redact._TABLE}
    assert min(widths.values()) >= redact.MIN_MATCH, widths


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=string.printable, max_size=5))
def test_a_short_text_is_redacted_as_the_full_passes_redact_it(text: str) -> None:
    from gitguard.storage import redact

    assert len(text) < redact.MIN_MATCH
    assert DEFAULT._pass(text) == (text, [])    # every rule, compiled: the slow way
    assert DEFAULT.redact(text) == RedactionResult(text, 0, ())


def test_a_short_text_still_meets_the_extra_patterns() -> None:
    assert Redactor(["ab"]).redact("ab") == RedactionResult("[REDACTED:custom]", 1, ("custom",))
