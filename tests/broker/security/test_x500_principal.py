"""The TLS principal is the certificate subject exactly as Kafka (Java's
`X500Principal.getName()`, RFC 2253) writes it: attribute types without an RFC 2253
keyword as their OID with the value's DER in hex (`1.2.840.113549.1.9.1=#160d...`),
multi-valued RDNs, Java's escaping. Compared with Java itself, run on certificates openssl
makes with many subjects and on hand-made DER names; then on a live broker, a DENY ACL
written for Kafka's form of the principal is enforced on an mTLS connection (before, the
principal was `1.2.840.113549.1.9.1=erin@acme.com,...` and the DENY was bypassed), also
through ssl.principal.mapping.rules."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kafkactl.broker.security.principal import distinguished_name
from kafkactl.broker.security.x500 import CertificateParseError, name_rfc2253
from tests.broker.security.certs import OPENSSL, Certs
from tests.broker.security.conftest import ACL_AUTHORIZER, SecureBroker, start_secure
from tests.jvm_options import TEST_JVM_OPTIONS
from tests.polling import wait_until

JAVA = shutil.which("java")

# Prints, for each argument (a PEM certificate file, or "der:" + the hex of a DER Name),
# "ok " + the hex of the UTF-8 of X500Principal.getName(), or "error ...".
JAVA_SOURCE = """
import java.io.FileInputStream;
import java.nio.charset.StandardCharsets;
import java.security.cert.CertificateFactory;
import java.security.cert.X509Certificate;
import javax.security.auth.x500.X500Principal;

public class X500Names {
    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
    static byte[] unhex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++)
            out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }
    public static void main(String[] args) throws Exception {
        CertificateFactory cf = CertificateFactory.getInstance("X.509");
        for (String arg : args) {
            try {
                String name;
                if (arg.startsWith("der:")) {
                    name = new X500Principal(unhex(arg.substring(4))).getName();
                } else {
                    try (FileInputStream in = new FileInputStream(arg)) {
                        name = ((X509Certificate) cf.generateCertificate(in))
                            .getSubjectX500Principal().getName();
                    }
                }
                System.out.println("ok " + hex(name.getBytes(StandardCharsets.UTF_8)));
            } catch (Exception e) {
                System.out.println("error " + e);
            }
        }
    }
}
"""

# (file name, openssl -subj, string_mask): every subject is made with -utf8 -multivalue-rdn
SUBJECTS = [
    ("email", "/C=US/O=acme/CN=Smith, Erin/emailAddress=erin@acme.com", None),
    ("multi", "/O=multi/CN=a+OU=b", None),
    ("multi3", "/C=US/O=x+OU=y+CN=z", None),
    ("specials", '/O=x/CN="quoted" <lt>gt; semi\\+plus=eq\\\\back', None),
    ("hash", "/OU=#lead/CN=mid#dle/O=trail#", None),
    ("spaces", "/O= both ends /CN=  two  lead/OU=trail  ", None),
    ("utf8", "/O=Ünïcødé/CN=Zoë 日本 😀", None),
    ("dc", "/DC=com/DC=example/UID=u123/CN=dc user", None),
    ("others", "/serialNumber=12345/title=Dr/street=1 Main St/L=Town/ST=State/CN=titled", None),
    ("jurisdiction", "/jurisdictionC=US/businessCategory=Private Organization/CN=ev", None),
    ("long_email", "/CN=long/emailAddress=" + "x" * 119 + "@acme.com", None),  # 128 bytes
    ("printable_mask", "/O=plain/CN=printable only", "default"),
    ("t61", "/CN=Zoë/O=latin", "default"),  # T61String (legacy decoding: see EXOTIC)
    ("bmp", "/CN=日本/O=bmp", "pkix"),  # BMPString
]
# Subjects in legacy string types with non-ASCII text: JDK 17 decodes every string type as
# UTF-8 (garbage for these), current JDKs (and kafkactl) by the type's own charset.
LEGACY_TYPES = {"t61": "O=latin,CN=Zoë", "bmp": "O=bmp,CN=日本"}


def _tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    length = bytes([n]) if n < 0x80 else bytes([0x81, n]) if n < 0x100 else \
        bytes([0x82, n >> 8, n & 0xFF])
    return bytes([tag]) + length + body


CN, ORG = bytes.fromhex("0603550403"), bytes.fromhex("060355040a")


def _name(*rdns: list[tuple[bytes, int, bytes]]) -> bytes:
    return _tlv(0x30, b"".join(_tlv(0x31, b"".join(_tlv(0x30, oid + _tlv(tag, value))
                                                   for oid, tag, value in rdn))
                               for rdn in rdns))


# Hand-made DER names (what openssl's -subj cannot write) and Java's answer for each.
DER_NAMES = [
    (_name([(CN, 0x0C, b"a\0b\rc")]), "CN=a\\00b\rc"),
    (_name([(CN, 0x0C, b"\r lead")], [(ORG, 0x0C, b"trail \r")]), "O=trail\\ \\\r,CN=\\\r\\ lead"),
    (_name([(CN, 0x0C, b"   ")]), "CN=\\ \\ \\ "),
    (_name([(CN, 0x0C, b"")]), "CN="),
    (_name([(CN, 0x1C, "x".encode("utf-32-be"))]), "CN=#1c0400000078"),  # UniversalString
    (_name([(CN, 0x1B, b"general")]), "CN=general"),  # GeneralString
    (_name([(CN, 0x04, b"\x01\x02")]), "CN=#04020102"),  # OCTET STRING
    (_name([(CN, 0x16, b"ia5*@_&!~|")]), "CN=ia5*@_&!~|"),
    (_name([(CN, 0x1E, "Zoë€".encode("utf-16-be"))]), "CN=Zoë€"),  # BMPString: legacy
    (_name([(CN, 0x14, "é".encode("latin-1"))]), "CN=é"),  # T61String: legacy
    (_name([(bytes.fromhex("06032a0304"), 0x0C, b"v")]), "1.2.3.4=#0c0176"),
    (_name([(bytes.fromhex("06082b06010401823701"), 0x13, b"p")]),
     "1.3.6.1.4.1.311.1=#130170"),
    (_name([(bytes.fromhex("0603883703"), 0x13, b"x")]), "2.999.3=#130178"),
    (_name(), ""),
]
LEGACY_DER = {8, 9}  # indexes of DER_NAMES in legacy string types with non-ASCII text


def _openssl(*args: str, cwd: Path) -> None:
    assert OPENSSL is not None
    subprocess.run([OPENSSL, *args], cwd=cwd, check=True, capture_output=True)


def make_cert(d: Path, name: str, subject: str, ca: Certs,
              string_mask: str | None = None) -> tuple[Path, Path]:
    """A client certificate for `subject` (openssl -subj syntax, UTF-8, `+` joining a
    multi-valued RDN) signed by the test CA: (certificate, key)."""
    cnf = d / f"{name}.cnf"
    cnf.write_text("[req]\ndistinguished_name = dn\n"
                   + (f"string_mask = {string_mask}\n" if string_mask else "") + "[dn]\n")
    _openssl("req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", f"{name}.key", "-out", f"{name}.csr", "-config", str(cnf),
             "-utf8", "-multivalue-rdn", "-subj", subject, cwd=d)
    ext = d / f"{name}.ext"
    ext.write_text("extendedKeyUsage=clientAuth\n")
    _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", str(ca.ca),
             "-CAkey", str(ca.ca.parent / "ca.key"), "-CAcreateserial", "-out", f"{name}.pem",
             "-days", "2", "-sha256", "-extfile", str(ext), cwd=d)
    return d / f"{name}.pem", d / f"{name}.key"


def _der(cert: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(cert.read_text())


@pytest.fixture(scope="module")
def subject_certs(certs: Certs, tmp_path_factory: pytest.TempPathFactory
                  ) -> dict[str, tuple[Path, Path]]:
    d = tmp_path_factory.mktemp("x500")
    return {name: make_cert(d, name, subject, certs, mask)
            for name, subject, mask in SUBJECTS}


@pytest.fixture(scope="module")
def java_names(subject_certs: dict[str, tuple[Path, Path]],
               tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Java's X500Principal.getName() of every certificate and DER name, in one JVM."""
    if JAVA is None:
        pytest.skip("no java on PATH")
    d = tmp_path_factory.mktemp("x500-java")
    (d / "X500Names.java").write_text(JAVA_SOURCE)
    args = [str(cert) for cert, _key in subject_certs.values()] + \
        ["der:" + der.hex() for der, _ in DER_NAMES]
    out = subprocess.run([JAVA, *TEST_JVM_OPTIONS, "X500Names.java", *args], cwd=d,
                         capture_output=True, text=True, timeout=120, check=True)
    lines = out.stdout.splitlines()
    assert len(lines) == len(args), out
    answers = {}
    for arg, line in zip(args, lines, strict=True):
        status, _, value = line.partition(" ")
        assert status == "ok", (arg, line)
        answers[arg] = bytes.fromhex(value).decode("utf-8")
    return answers


def _java_decodes_by_type(java_names: dict[str, str]) -> bool:
    """Whether this JDK decodes BMPString and T61String by their own charsets (JDK 17
    decodes them as UTF-8)."""
    der, expected = DER_NAMES[min(LEGACY_DER)]
    return java_names["der:" + der.hex()] == expected


def test_certificate_subjects_match_javas_x500principal(
        subject_certs: dict[str, tuple[Path, Path]], java_names: dict[str, str]) -> None:
    modern = _java_decodes_by_type(java_names)
    for name, (cert, _key) in subject_certs.items():
        ours = distinguished_name(_der(cert))
        if name in LEGACY_TYPES:
            assert ours == LEGACY_TYPES[name], name
            if not modern:
                continue
        assert ours == java_names[str(cert)], name


def test_javas_examples_by_hand() -> None:
    """A few of the above without Java, so a machine without java still checks them."""
    assert name_rfc2253(_name([(CN, 0x0C, b"Smith, Erin")],
                              [(bytes.fromhex("06092a864886f70d010901"), 0x16,
                                b"erin@acme.com")])) == \
        "1.2.840.113549.1.9.1=#160d6572696e4061636d652e636f6d,CN=Smith\\, Erin"
    multi = _name([(CN, 0x0C, b"a"), (bytes.fromhex("060355040b"), 0x0C, b"b")])
    assert name_rfc2253(multi) == "CN=a+OU=b"
    assert name_rfc2253(_name([(CN, 0x0C, b'#a=b#c"d+e,f;g<h>i\\ ')])) == \
        'CN=\\#a\\=b\\#c\\"d\\+e\\,f\\;g\\<h\\>i\\\\\\ '


def test_hand_made_names_match_java(java_names: dict[str, str]) -> None:
    modern = _java_decodes_by_type(java_names)
    for i, (der, expected) in enumerate(DER_NAMES):
        assert name_rfc2253(der) == expected, (i, der.hex())
        if modern or i not in LEGACY_DER:
            assert java_names["der:" + der.hex()] == expected, (i, der.hex())


def test_unreadable_der_is_an_error_not_a_name() -> None:
    for bad in (b"", b"\x30", b"\x30\x05\x31\x03", b"\x30\x80\x00\x00", b"\x04\x00",
                _name([(CN, 0x0C, b"x")])[:-1]):
        with pytest.raises(CertificateParseError):
            name_rfc2253(bad)


# ---- on a live broker ------------------------------------------------------------------------
TOPIC = "mtls-deny"
# maps the mail certificates of plain CNs to "<cn>-by-mail"; everything else: the DN
MAPPING = (r"RULE:^1[.]2[.]840[.]113549[.]1[.]9[.]1=#16[0-9a-f]+,CN=([a-z]+),O=acme$"
           "/$1-by-mail/,DEFAULT")


@pytest.fixture(scope="module")
def mtls_broker(certs: Certs, subject_certs: dict[str, tuple[Path, Path]],
                tmp_path_factory: pytest.TempPathFactory
                ) -> Iterator[tuple[SecureBroker, dict[str, tuple[Path, Path]]]]:
    from confluent_kafka.admin import AclBinding, AdminClient, NewTopic
    from confluent_kafka.admin import AclOperation as Op
    from confluent_kafka.admin import AclPermissionType as Perm
    from confluent_kafka.admin import ResourcePatternType as Pattern
    from confluent_kafka.admin import ResourceType as Type

    d = tmp_path_factory.mktemp("mtls-certs")
    mapped = make_cert(d, "mapped", "/O=acme/CN=erin/emailAddress=erin@acme.com", certs)
    sb = start_secure(tmp_path_factory.mktemp("mtls"), certs, **ACL_AUTHORIZER,
                      **{"listener.name.ssl.ssl.principal.mapping.rules": MAPPING})
    admin = AdminClient({"bootstrap.servers": sb.bootstrap("PLAINTEXT")})
    admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
    # Kafka's principal of the "email" certificate, as its operators would write it
    kafka_dn = ("1.2.840.113549.1.9.1=#160d6572696e4061636d652e636f6d,CN=Smith\\, Erin,"
                "O=acme,C=US")
    acls = [AclBinding(Type.TOPIC, TOPIC, Pattern.LITERAL, "User:*", "*", Op.WRITE,
                       Perm.ALLOW),
            AclBinding(Type.TOPIC, TOPIC, Pattern.LITERAL, f"User:{kafka_dn}", "*",
                       Op.WRITE, Perm.DENY),
            AclBinding(Type.TOPIC, TOPIC, Pattern.LITERAL, "User:erin-by-mail", "*",
                       Op.WRITE, Perm.DENY)]
    for future in admin.create_acls(acls).values():
        future.result(30)
    yield sb, {"email": subject_certs["email"], "mapped": mapped,
               "alice": (certs.client_cert, certs.client_key)}
    sb.broker.kill()


def _produce_mtls(sb: SecureBroker, cert: tuple[Path, Path]) -> str:
    from confluent_kafka import Producer

    errors: list[str] = []
    p = Producer({"bootstrap.servers": sb.bootstrap("SSL"), "security.protocol": "SSL",
                  "ssl.ca.location": str(sb.certs.ca),
                  "ssl.certificate.location": str(cert[0]),
                  "ssl.key.location": str(cert[1]), "message.timeout.ms": 10000})
    p.produce(TOPIC, b"x", on_delivery=lambda err, _m: errors.append(err.name() if err else ""))
    assert p.flush(30) == 0
    return errors[0]


def test_a_deny_acl_for_kafkas_principal_is_enforced_over_mtls(
        mtls_broker: tuple[SecureBroker, dict[str, tuple[Path, Path]]]) -> None:
    sb, certs = mtls_broker
    assert _produce_mtls(sb, certs["alice"]) == ""  # User:* may write
    assert _produce_mtls(sb, certs["email"]) == "TOPIC_AUTHORIZATION_FAILED"
    audited = ("Principal = User:1.2.840.113549.1.9.1=#160d6572696e4061636d652e636f6d,"
               "CN=Smith\\, Erin,O=acme,C=US is Denied Operation = Write")
    wait_until(lambda: audited in sb.broker.log(), 10, "the denial in the audit log")


def test_mapping_rules_see_kafkas_form_of_the_dn(
        mtls_broker: tuple[SecureBroker, dict[str, tuple[Path, Path]]]) -> None:
    sb, certs = mtls_broker
    assert _produce_mtls(sb, certs["mapped"]) == "TOPIC_AUTHORIZATION_FAILED"
    wait_until(lambda: "Principal = User:erin-by-mail is Denied" in sb.broker.log(), 10,
               "the denial in the audit log")
