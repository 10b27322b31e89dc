"""The CLI answers bad input and AWS refusals with one line and exit code 2, never a traceback."""

from __future__ import annotations

import pytest

from ipmeta_cli.main import main


def test_an_out_of_range_option_fails_at_parse_time(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["load", "--chunk-size", "0", "ranges.csv"])
    assert raised.value.code == 2
    assert "--chunk-size: 0 must be at least 1" in capsys.readouterr().err


def test_an_s3_source_without_credentials_is_a_clear_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent/config")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("IPMETA_DYNAMODB_ENDPOINT", raising=False)

    assert main(["load", "--table", "ipmeta", "s3://no-such-bucket/ranges.csv"]) == 2
    error = capsys.readouterr().err
    assert error.startswith("ipmeta load: ")
    assert "credentials" in error.lower()
    assert "Traceback" not in error
