"""Principals, as Kafka's DefaultKafkaPrincipalBuilder makes them.

- SASL: `User:<authorization id>` (the PLAIN or SCRAM user name, the OAUTHBEARER token's subject).
- SSL with a client certificate: `User:<name>`, the certificate's subject distinguished name
  (RFC 2253 form, as Java's X500Principal.getName() gives it) mapped by
  `ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper).
- Anything else (PLAINTEXT, SSL without a client certificate): `User:ANONYMOUS`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """`Type:name` (Kafka's SecurityUtils.parseKafkaPrincipal); ValueError otherwise."""
        kind, sep, name = text.partition(":")
        if not sep or not kind or not name:
            raise ValueError(f"expected a string in format principalType:principalName but got {text}")
        return cls(kind, name)


USER_TYPE = "User"
ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules rule applies to a certificate's name."""


_RULE_PATTERN = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE_PATTERN + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE_PATTERN)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


@dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    lower: bool = False
    upper: bool = False

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(_python_replacement(self.replacement, self.pattern.groups), dn)
        if self.lower:
            return result.lower()
        return result.upper() if self.upper else result


def _python_replacement(java: str, groups: int) -> str:
    """A Java replaceAll replacement (`$1`, `\\$`) as a re.sub template. A back reference past
    the pattern's groups is cut to a valid one or kept literally, as Kafka's rule does."""
    out: list[str] = []
    i = 0
    while i < len(java):
        c = java[i]
        if c == "\\" and i + 1 < len(java):
            out.append("\\\\" if java[i + 1] == "\\" else java[i + 1])
            i += 2
            continue
        m = _BACK_REFERENCE.match(java, i)
        if m:
            digits = m.group(1)
            index = int(digits)
            while index > groups and index >= 10:
                index //= 10
            if index > groups:
                out.append("$" + digits)
            else:
                kept = str(index)
                out.append(f"\\g<{index}>" + digits[len(kept):])
            i = m.end()
            continue
        out.append("\\\\" if c == "\\" else c)
        i += 1
    return "".join(out)


class SslPrincipalMapper:
    """ssl.principal.mapping.rules: the first rule that applies maps the name."""

    def __init__(self, rules: str | None) -> None:
        text = (rules or "DEFAULT").strip()
        self.rules: list[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text):
            rule = m.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None or parsed.end() != len(rule):
                raise ValueError(f"Invalid rule: {rule}")
            if parsed.group(1) is not None:
                self.rules.append(_Rule(None))
            elif parsed.group(2) is not None:
                self.rules.append(_Rule(re.compile(parsed.group(2)), parsed.group(4),
                                        parsed.group(6) == "L", parsed.group(6) == "U"))
            if m.end() >= len(text):
                break

    def name(self, dn: str) -> str:
        for rule in self.rules:
            mapped = rule.apply(dn)
            if mapped is not None:
                return mapped
        raise NoMatchingRule(f"No rules apply to {dn}")


def certificate_dn(der: bytes) -> str:
    """The subject distinguished name of a DER certificate, most specific part first (RFC 2253
    order, as Java's X500Principal.getName() renders it)."""
    from cryptography import x509

    return x509.load_der_x509_certificate(der).subject.rfc4514_string()
