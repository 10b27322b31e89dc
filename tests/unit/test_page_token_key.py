"""Where the page-token signing key comes from: env, Secrets Manager (read once), or the local default."""

from __future__ import annotations

import boto3
import pytest
from aws_lambda_powertools.utilities import parameters
from moto import mock_aws

from ipmeta.schema import settings


def test_the_key_is_read_from_secrets_manager_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.ENV_PAGE_TOKEN_KEY, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    with mock_aws():
        client = boto3.client("secretsmanager", region_name="us-east-1")
        arn = client.create_secret(Name="page-token-key", SecretString="s3cret-from-the-stack")["ARN"]
        monkeypatch.setenv(settings.ENV_PAGE_TOKEN_SECRET_ARN, arn)
        parameters.clear_caches()  # type: ignore[no-untyped-call]
        assert settings.page_token_key() == b"s3cret-from-the-stack"
        client.put_secret_value(SecretId=arn, SecretString="changed")
        assert settings.page_token_key() == b"s3cret-from-the-stack"  # cached per container
    parameters.clear_caches()  # type: ignore[no-untyped-call]


def test_an_explicit_key_wins_and_the_default_is_last(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(settings.ENV_PAGE_TOKEN_SECRET_ARN, raising=False)
    monkeypatch.setenv(settings.ENV_PAGE_TOKEN_KEY, "explicit")
    assert settings.page_token_key() == b"explicit"
    monkeypatch.delenv(settings.ENV_PAGE_TOKEN_KEY)
    assert settings.page_token_key() == settings.DEFAULT_PAGE_TOKEN_KEY.encode()
