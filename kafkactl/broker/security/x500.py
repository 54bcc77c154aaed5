"""A certificate's subject as Java's `X500Principal.getName()` (RFC 2253) writes it, the
distinguished name Kafka's TLS principal is made of.

Read from the certificate's DER (`getpeercert(binary_form=True)`), not from Python's decoded
dict, which has lost what Java prints: the DER of values written as `#hex`, the string
types, the exact bytes. Java's rules (sun.security.x509.X500Name / RDN / AVA):

- RDNs from the last of the sequence to the first, joined by `,`; the values of a
  multi-valued RDN in their DER order, joined by `+`.
- Attribute types with an RFC 2253 keyword (CN C L ST O OU STREET DC UID) by that keyword,
  any other (emailAddress, serialNumber, title...) by its dotted OID.
- A dotted OID, or a value that is not a PrintableString, T61String, IA5String,
  GeneralString, BMPString or UTF8String, is `#` + the lower-case hex of the value's whole
  DER (tag, length, content).
- Other values are decoded (ISO-8859-1 for the 8-bit types, UTF-16BE for BMPString, UTF-8
  for UTF8String, as current JDKs do) and `, = + < > # ; " \\` are escaped with a
  backslash wherever they are, NUL is written `\\00`, every other character as it is;
  then each leading and trailing space or carriage return is escaped with a backslash.
"""

from __future__ import annotations

from dataclasses import dataclass


class CertificateParseError(ValueError):
    """The certificate (or its subject) is not the DER this module reads."""


@dataclass(frozen=True, slots=True)
class _Tlv:
    tag: bytes  # the identifier octets as read
    content: bytes
    end: int  # offset just after this element

    @property
    def constructed(self) -> bool:
        return bool(self.tag[0] & 0x20)

    def encoded(self) -> bytes:
        """Tag, length (DER's minimal form, as Java re-encodes it) and content."""
        n = len(self.content)
        if n < 0x80:
            length = bytes([n])
        else:
            raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
            length = bytes([0x80 | len(raw)]) + raw
        return self.tag + length + self.content


def _read(data: bytes, pos: int, limit: int) -> _Tlv:
    """The element starting at `pos` (which must end by `limit`)."""
    start = pos
    if pos >= limit:
        raise CertificateParseError("truncated DER element")
    pos += 1
    if data[start] & 0x1F == 0x1F:  # high tag number form: base-128 octets follow
        while True:
            if pos >= limit:
                raise CertificateParseError("truncated DER tag")
            pos += 1
            if not data[pos - 1] & 0x80:
                break
    tag = data[start:pos]
    if pos >= limit:
        raise CertificateParseError("truncated DER length")
    first = data[pos]
    pos += 1
    if first < 0x80:
        length = first
    elif first == 0x80 or first == 0xFF:
        raise CertificateParseError("indefinite or reserved DER length")
    else:
        count = first & 0x7F
        if pos + count > limit:
            raise CertificateParseError("truncated DER length")
        length = int.from_bytes(data[pos:pos + count], "big")
        pos += count
    if pos + length > limit:
        raise CertificateParseError("DER element longer than its container")
    return _Tlv(tag, data[pos:pos + length], pos + length)


def _children(container: _Tlv) -> list[_Tlv]:
    data, pos, out = container.content, 0, []
    while pos < len(data):
        child = _read(data, pos, len(data))
        out.append(child)
        pos = child.end
    return out


def _oid(content: bytes) -> str:
    if not content or content[-1] & 0x80:
        raise CertificateParseError("malformed OBJECT IDENTIFIER")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [0, first] if first < 40 else [1, first - 40] if first < 80 else [2, first - 80]
    return ".".join(str(a) for a in head + arcs[1:])


_KEYWORDS = {  # Java's RFC 2253 keywords (AVAKeyword with rfc2253Compliant)
    "2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O",
    "2.5.4.11": "OU", "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
# DirectoryString types Java prints as text, and the charset current JDKs decode them with
_STRING_CHARSETS = {
    0x13: "latin-1",  # PrintableString
    0x14: "latin-1",  # T61String
    0x16: "latin-1",  # IA5String
    0x1B: "latin-1",  # GeneralString
    0x1E: "utf-16-be",  # BMPString
    0x0C: "utf-8",  # UTF8String
}
_ESCAPED = frozenset(',=+<>#;"\\')
_EDGE_WHITESPACE = " \r"


def _escape(value: str) -> str:
    text = "".join("\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in value)
    lead = len(text) - len(text.lstrip(_EDGE_WHITESPACE))
    body_end = max(lead, len(text.rstrip(_EDGE_WHITESPACE)))
    return ("".join("\\" + c for c in text[:lead]) + text[lead:body_end]
            + "".join("\\" + c for c in text[body_end:]))


def _ava(ava: _Tlv) -> str:
    parts = _children(ava)
    if ava.tag != b"\x30" or len(parts) != 2 or parts[0].tag != b"\x06":
        raise CertificateParseError("an AttributeTypeAndValue is not SEQUENCE {OID, value}")
    oid, value = _oid(parts[0].content), parts[1]
    keyword = _KEYWORDS.get(oid)
    charset = _STRING_CHARSETS.get(value.tag[0]) if len(value.tag) == 1 else None
    if keyword is None or charset is None:
        return f"{keyword or oid}=#{value.encoded().hex()}"
    return f"{keyword}={_escape(value.content.decode(charset, 'replace'))}"


def name_rfc2253(name_der: bytes) -> str:
    """An X.500 Name (DER) as Java's X500Principal(name).getName() writes it."""
    name = _read(name_der, 0, len(name_der))
    if name.tag != b"\x30":
        raise CertificateParseError("a Name is not a SEQUENCE")
    rdns = []
    for rdn in _children(name):
        if rdn.tag != b"\x31":
            raise CertificateParseError("an RDN is not a SET")
        rdns.append("+".join(_ava(ava) for ava in _children(rdn)))
    return ",".join(reversed(rdns))


def subject_der(cert_der: bytes) -> bytes:
    """The subject Name (its DER) of an X.509 certificate (DER)."""
    cert = _read(cert_der, 0, len(cert_der))
    fields = _children(cert)
    if cert.tag != b"\x30" or not fields or fields[0].tag != b"\x30":
        raise CertificateParseError("not an X.509 certificate")
    tbs = _children(fields[0])
    if tbs and tbs[0].tag == b"\xa0":  # [0] EXPLICIT version
        tbs = tbs[1:]
    # serialNumber, signature, issuer, validity, subject, ...
    if len(tbs) < 5 or tbs[4].tag != b"\x30":
        raise CertificateParseError("the certificate has no subject")
    return tbs[4].encoded()


def subject_rfc2253(cert_der: bytes) -> str:
    """The subject of an X.509 certificate (DER) as Java's
    `X509Certificate.getSubjectX500Principal().getName()`: Kafka's TLS principal before
    ssl.principal.mapping.rules. CertificateParseError if it cannot be read."""
    return name_rfc2253(subject_der(cert_der))
