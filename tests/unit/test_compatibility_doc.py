"""docs/compatibility.md's table of every Kafka API is the one tests/support/api_table.py
generates from the code (the client listener's ApiVersions table, the controller listener's,
kio's ranges), and every test it names exists."""

from __future__ import annotations

from tests.support import api_table


def test_the_documented_table_is_the_generated_one() -> None:
    documented = api_table.document_table(api_table.DOC.read_text())
    assert documented == api_table.render(), (
        "docs/compatibility.md is out of date: python -m tests.support.api_table --write")


def test_every_named_test_exists() -> None:
    names = {t for ts in (*api_table.EXTRA_TESTS.values(), *api_table.CONTROLLER_TESTS.values())
             for t in ts}
    missing = sorted(t for t in names if not (api_table.REPO_ROOT / "tests" / t).exists())
    assert not missing


def test_every_client_listener_api_has_a_test() -> None:
    from kio.schema.index import api_key_map

    client = api_table.client_table()
    untested = [api_key_map[k] for k in api_key_map if k in client
                and not api_table.tests_of(api_key_map[k], True, False)]
    assert not untested
