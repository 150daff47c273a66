"""SCRAM credentials in the metadata log: records, image, snapshots, --add-scram."""

from __future__ import annotations

import pytest

from broker.metadata import records as rec
from broker.metadata.delta import apply_records
from broker.metadata.image import MetadataImage
from broker.metadata.snapshot import decode_snapshot, encode_snapshot
from broker.metadata.storage import StorageError, parse_add_scram
from broker.security.scram import ScramClient, ScramServer


def test_add_scram_record_replays_into_a_working_credential() -> None:
    r = parse_add_scram("SCRAM-SHA-512=[name=alice,password=alice-secret]")
    image = apply_records(MetadataImage.empty("c"), [rec.decode(rec.encode(r))])
    cred = image.scram_credentials[("SCRAM-SHA-512", "alice")]
    assert cred.iterations == 4096
    server = ScramServer("SCRAM-SHA-512", lambda u: image.scram_credentials.get(
        ("SCRAM-SHA-512", u)))
    client = ScramClient("SCRAM-SHA-512", "alice", "alice-secret")
    client.verify(server.step(client.final(server.step(client.first()))))


def test_remove_and_snapshot_round_trip() -> None:
    records = [parse_add_scram("SCRAM-SHA-256=[name=bob,password=x,iterations=8192]"),
               parse_add_scram("SCRAM-SHA-512=[name=bob,password=y]"),
               rec.remove_user_scram_credential_record("bob", "SCRAM-SHA-256")]
    image = apply_records(MetadataImage.empty("c"), records)
    assert set(image.scram_credentials) == {("SCRAM-SHA-512", "bob")}
    again = decode_snapshot(encode_snapshot(image))
    assert again.scram_credentials == image.scram_credentials


def test_salted_password_form() -> None:
    r = parse_add_scram('SCRAM-SHA-512=[name=alice,iterations=8192,'
                        'salt="MWx2NHBkbnc0ZndxN25vdGN4bTB5eTFrN3E=",'
                        'saltedpassword="mT0yyUUxnlJaC99HXgRTSYlbuqa4FSGtJCJfTMvjYCE="]')
    assert rec.unwrap(r).iterations == 8192


@pytest.mark.parametrize("bad", ["SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-512=name=a",
                                 "SCRAM-SHA-512=[password=b]", "SCRAM-SHA-512=[name=a]",
                                 "SCRAM-SHA-512=[name=a,password=b,iterations=10]"])
def test_bad_add_scram(bad: str) -> None:
    with pytest.raises(StorageError, match="--add-scram"):
        parse_add_scram(bad)


def test_alter_user_scram_credentials_rules() -> None:
    from kio.schema.errors import ErrorCode

    from broker.security.scram import salted_password
    from broker.security.scram_admin import Deletion, Upsertion, alter, describe

    image = apply_records(MetadataImage.empty("c"), [
        parse_add_scram("SCRAM-SHA-512=[name=alice,password=a]")])
    sp = salted_password("SCRAM-SHA-256", "pw", b"salt", 4096)
    ok = Upsertion("bob", 1, 4096, b"salt", sp)
    result = alter(image, [Deletion("alice", 2), Deletion("ghost", 2), Deletion("eve", 9)], [
        ok, Upsertion("carol", 2, 100, b"s", b"p"), Upsertion("dan", 2, 4096, b"", b"p"),
        Upsertion("alice", 1, 4096, b"s", sp), Upsertion("alice", 1, 4096, b"s", sp),
        Upsertion("", 1, 4096, b"s", sp)])
    got = {r.user: r.error for r in result.response}
    assert got == {"alice": ErrorCode.duplicate_resource,  # so its deletion is not applied
                   "ghost": ErrorCode.resource_not_found,
                   "eve": ErrorCode.unsupported_sasl_mechanism, "bob": ErrorCode.none,
                   "carol": ErrorCode.unacceptable_credential,
                   "dan": ErrorCode.unacceptable_credential,
                   "": ErrorCode.unacceptable_credential}
    after = apply_records(image, result.records)
    assert set(after.scram_credentials) == {("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "bob")}
    server = ScramServer("SCRAM-SHA-256", lambda u: after.scram_credentials.get(
        ("SCRAM-SHA-256", u)))
    client = ScramClient("SCRAM-SHA-256", "bob", "pw")
    client.verify(server.step(client.final(server.step(client.first()))))
    listed, _ = describe(after, None)
    assert [(u, infos) for u, _e, _m, infos in listed] == [("alice", [(2, 4096)]),
                                                          ("bob", [(1, 4096)])]
    listed, _ = describe(after, ["bob", "zed", "bob"])
    assert [(u, e) for u, e, _m, _i in listed] == [("bob", ErrorCode.duplicate_resource),
                                                  ("zed", ErrorCode.resource_not_found)]


def test_two_changes_of_one_user_in_one_request_are_a_duplicate_whatever_the_mechanisms() -> None:
    """Kafka's controller (ScramControlManager.alterCredentials) keys a request's changes by
    user name: SCRAM-SHA-256 and SCRAM-SHA-512 for one user in one request is
    DUPLICATE_RESOURCE and nothing is written; as is a deletion and an upsertion of one user.
    A user whose first change failed keeps that first error."""
    from kio.schema.errors import ErrorCode

    from broker.security.scram import salted_password
    from broker.security.scram_admin import Deletion, Upsertion, alter

    image = apply_records(MetadataImage.empty("c"), [
        parse_add_scram("SCRAM-SHA-512=[name=alice,password=a]")])
    sp = salted_password("SCRAM-SHA-256", "pw", b"salt", 4096)
    result = alter(image, [Deletion("alice", 2), Deletion("ghost", 1), Deletion("ghost", 2)], [
        Upsertion("bob", 1, 4096, b"s", sp), Upsertion("bob", 2, 8192, b"s", sp),
        Upsertion("alice", 1, 4096, b"s", sp), Upsertion("carl", 1, 4096, b"s", sp)])
    got = {r.user: (r.error, r.message) for r in result.response}
    twice = (ErrorCode.duplicate_resource,
             "A user credential cannot be altered twice in the same request")
    assert got == {"alice": twice, "bob": twice, "carl": (ErrorCode.none, None),
                   "ghost": (ErrorCode.resource_not_found,
                             "Attempt to delete a user credential that does not exist")}
    after = apply_records(image, result.records)
    assert set(after.scram_credentials) == {("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "carl")}
