from __future__ import annotations

import pytest

from broker.security.principal import (
    ANONYMOUS,
    MappingRuleError,
    PrincipalMapper,
    x500_name,
)

SUBJECT = ((("countryName", "US"),), (("organizationName", "Skiff"),),
           (("organizationalUnitName", "eng"),), (("commonName", "alice"),))


def test_x500_name_is_rfc2253_order() -> None:
    assert x500_name(SUBJECT) == "CN=alice,OU=eng,O=Skiff,C=US"


def test_x500_escapes_and_multivalued_rdn() -> None:
    subject = ((("commonName", "a,b+c"), ("userId", "7")), (("organizationName", " x "),))
    assert x500_name(subject) == "O=\\ x\\ ,CN=a\\,b\\+c+UID=7"


def test_email_is_printed_by_oid_as_java_does() -> None:
    subject = ((("emailAddress", "a@b.c"),), (("commonName", "a"),))
    assert x500_name(subject) == "CN=a,1.2.840.113549.1.9.1=#1605614062" + "2e63"


def test_default_rule_keeps_the_name() -> None:
    assert PrincipalMapper().principal(SUBJECT) == "User:CN=alice,OU=eng,O=Skiff,C=US"
    assert PrincipalMapper().principal(None) == ANONYMOUS


def test_rules_in_order_with_case() -> None:
    m = PrincipalMapper("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,"
                        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),C=(.*?)$/$1@$2/U,DEFAULT")
    assert m.name("CN=kafka,OU=ServiceUsers,O=Org,C=US") == "kafka"
    assert m.name("CN=alice,OU=eng,O=Skiff,C=US") == "ALICE@ENG"
    assert m.name("CN=x") == "CN=x"


def test_lowercase_and_escaped_slash() -> None:
    m = PrincipalMapper("RULE:^CN=([^,]*)\\/(.*)$/$1\\/$2/L")
    assert m.name("CN=Team/Alice") == "team/alice"


def test_no_rule_applies_is_an_error() -> None:
    m = PrincipalMapper("RULE:^CN=(.*)$/$1/")
    with pytest.raises(MappingRuleError, match="no rules apply"):
        m.name("O=x")


@pytest.mark.parametrize("rules", ["", "RULE:abc", "BOGUS", "RULE:(/x/"])
def test_bad_rules_refused(rules: str) -> None:
    with pytest.raises(MappingRuleError):
        PrincipalMapper(rules)
