import argparse

import pytest

from bench.keyvalue import comma_key_values, key_value


def test_a_pair_splits_at_its_first_equals_sign() -> None:
    assert key_value("log.drop.behind.bytes=67108864") == ("log.drop.behind.bytes", "67108864")
    assert key_value("sasl.jaas.config=a=b") == ("sasl.jaas.config", "a=b")
    assert key_value("key=") == ("key", "")


@pytest.mark.parametrize("bad", ["no-equals", "=value", " =value", ""])
def test_a_bad_pair_is_a_usage_error_naming_it(bad: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="KEY=VALUE"):
        key_value(bad)


def test_argparse_refuses_a_bad_pair_naming_the_option(
        capsys: pytest.CaptureFixture[str]) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", action="append", default=[], type=key_value)
    assert dict(ap.parse_args(["--skiff", "a=1", "--skiff", "b=2"]).skiff) == {"a": "1", "b": "2"}
    with pytest.raises(SystemExit):
        ap.parse_args(["--skiff", "oops"])
    assert "--skiff" in capsys.readouterr().err


def test_comma_joined_pairs() -> None:
    assert comma_key_values("") == {}
    assert comma_key_values("a=1,b=2,") == {"a": "1", "b": "2"}
    with pytest.raises(argparse.ArgumentTypeError):
        comma_key_values("a=1,b")
