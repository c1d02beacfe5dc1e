"""Keep credentials out of the log: key fingerprints, and redaction of stored bodies.

A client's API key is never stored. The log keeps ``key_fingerprint``: the first 16 hex digits of
SHA-256(salt || key), where the salt is random per database (so the same key gets the same
fingerprint across restarts, and a fingerprint cannot be checked against a guessed key without the
database). Bodies are stored only with ``--store-bodies``, and then every credential we can
recognise is replaced by ``[REDACTED]``: the request's own keys and bearer tokens wherever they
appear, the proxy's auth token, and anything shaped like an Anthropic, OpenAI or Google API key,
a bearer token, or the value of a JSON field named like a credential.

The same redactor (``redact_text``, and ``redact_url`` for text that quotes URLs) runs over every
URL and message the proxy prints or stores: the ``user:password@`` of a URL and the value of a
query parameter that carries a credential (Gemini's ``?key=``, ``access_token=``, signed-URL
``sig=`` / ``X-Amz-Signature=`` ...) are masked in the access log (``--log-level debug``), the
start-up banner and config errors, and the log's ``error`` column.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Sequence
from urllib.parse import parse_qsl

__all__ = [
    "CREDENTIAL_QUERY_PARAMS",
    "MIN_SECRET_CHARS",
    "REDACTED",
    "RedactFilter",
    "client_secrets",
    "key_fingerprint",
    "redact_text",
    "redact_url",
]

REDACTED = "[REDACTED]"

#: Exact secrets shorter than this are not searched for in stored bodies (a short value would
#: redact ordinary words); so the proxy refuses an ``--auth-token`` shorter than this.
MIN_SECRET_CHARS = 8

#: Headers that carry a client's vendor credential.
_KEY_HEADERS = (b"x-api-key", b"authorization", b"x-goog-api-key", b"api-key")

_PATTERNS = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:"
    r"sk-ant-[A-Za-z0-9_\-]{8,}"  # Anthropic
    r"|sk-[A-Za-z0-9_\-]{16,}"  # OpenAI (sk-, sk-proj-, sk-svcacct-)
    r"|AIza[0-9A-Za-z_\-]{30,}"  # Google API keys
    r"|(?i:bearer)\s+[A-Za-z0-9._~+/=\-]{8,}"
    r")"
)
#: Query parameters (compared case-insensitively) whose value is a credential: API keys (Gemini's
#: ``key``, ``api_key``...), OAuth tokens, and the signatures of signed URLs (Azure SAS ``sig``,
#: AWS SigV4 ``X-Amz-*``, Google Cloud Storage ``X-Goog-*``).
CREDENTIAL_QUERY_PARAMS = frozenset(
    {
        "key",
        "api_key",
        "apikey",
        "api-key",
        "x-api-key",
        "x-goog-api-key",
        "access_token",
        "id_token",
        "refresh_token",
        "token",
        "auth",
        "auth_token",
        "client_secret",
        "secret",
        "password",
        "sig",
        "signature",
        "x-amz-signature",
        "x-amz-credential",
        "x-amz-security-token",
        "x-goog-signature",
        "x-goog-credential",
    }
)
_QUERY_CREDENTIAL = re.compile(
    r"(?i)([?&;](?:"
    + "|".join(re.escape(name) for name in sorted(CREDENTIAL_QUERY_PARAMS, key=len, reverse=True))
    + r")=)[^&#;\s\"'<>\\]+"
)
#: ``scheme://user:password@`` in a URL, or in text quoting one (an httpx error message).
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/?#\s]*@")
#: The ``user:password@`` part of a text that is one URL (it starts with the scheme), spaces
#: included: a password not percent-encoded may hold one, and no other word follows it there.
_LEADING_USERINFO = re.compile(r"(?i)^([a-z][a-z0-9+.\-]*://)[^/?#\n]*@")
_JSON_CREDENTIAL = re.compile(
    r'("(?i:api[_-]?key|x-api-key|x-goog-api-key|authorization|access[_-]?token|secret|password)"'
    r'\s*:\s*)"(?:[^"\\]|\\.)*"'
)


def client_secrets(headers: Sequence[tuple[bytes, bytes]], query_string: bytes) -> list[str]:
    """The credentials a request carries: key headers (bearer prefix removed) and the values of
    credential query parameters (``?key=``..., see ``CREDENTIAL_QUERY_PARAMS``).

    Args:
        headers: ASGI header pairs (lower-case names).
        query_string: the raw query string (Gemini accepts ``?key=API_KEY``).

    Returns:
        The secret values, most specific first; empty when the request carries none.
    """
    secrets: list[str] = []
    for name, value in headers:
        if name in _KEY_HEADERS:
            text = value.decode("latin-1").strip()
            if text.lower().startswith("bearer "):
                text = text[7:].strip()
            if text:
                secrets.append(text)
    if query_string:
        for param, param_value in parse_qsl(query_string.decode("latin-1")):
            if param.lower() in CREDENTIAL_QUERY_PARAMS and param_value:
                secrets.append(param_value)
    return secrets


def key_fingerprint(secrets: Sequence[str], salt: bytes) -> str | None:
    """Salted SHA-256 fingerprint of the request's first credential, or ``None`` if it has none.

    Returns:
        16 lower-case hex digits (64 bits: enough to tell a team's keys apart, too few to matter
        as a stored hash of the key).
    """
    if not secrets:
        return None
    return hashlib.sha256(salt + secrets[0].encode()).hexdigest()[:16]


def redact_url(text: str) -> str:
    """``text`` (a URL, or a message quoting URLs) with the ``user:password@`` part of every URL
    replaced by ``***@`` and the value of every credential query parameter by ``[REDACTED]``.

    How a URL is shown: the access log, the banner, messages and the log's `error` column; the
    request itself still goes to the URL as given. A text that starts with a URL has that URL's
    ``user:password@`` masked even when it holds a space (``postgresql://u:my pw@host/db``).
    """
    text = _LEADING_USERINFO.sub(r"\1***@", text)
    text = _USERINFO.sub(r"\1***@", text)
    return _QUERY_CREDENTIAL.sub(lambda m: m.group(1) + REDACTED, text)


def redact_text(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` with every recognisable credential replaced by ``[REDACTED]``.

    Besides what ``redact_url`` masks: the exact ``secrets``, credential-named JSON fields, and
    anything shaped like a vendor API key or a bearer token.

    Args:
        text: a request or response body (JSON or SSE) decoded as UTF-8, or an error message.
        secrets: exact values to remove wherever they occur (the request's keys, the proxy's
            auth token); values shorter than ``MIN_SECRET_CHARS`` are ignored to keep text
            readable (the proxy refuses an auth token that short).
    """
    for secret in sorted(set(secrets), key=len, reverse=True):
        if len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    text = _JSON_CREDENTIAL.sub(lambda m: f'{m.group(1)}"{REDACTED}"', text)
    return redact_url(_PATTERNS.sub(REDACTED, text))


class RedactFilter(logging.Filter):
    """A logging filter that runs ``redact_text`` over a record's message and string arguments.

    Installed on uvicorn's ``uvicorn.access`` logger, whose lines quote the request's path and
    query string (``GET /v1beta/models/x:generateContent?key=... HTTP/1.1``).
    """

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact_text(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact_text(a) if isinstance(a, str) else a for a in record.args)
        return True
