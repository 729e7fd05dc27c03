"""Which secret an endpoint request carries is never chosen by a run parameter: only variables on a
fixed allow-list (OPENAI_API_KEY, SKILLGATE_*_API_KEY) can be named, whether by a recipe, a
deployment's overrides, `collect.teacher_api_key_env` or `--api-key-env`. (Where a key may go:
test_endpoint_key_destinations.py.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_server import ChatServer

from skillgate_core.agent.collect import CollectConfig
from skillgate_core.base.config import ConfigError
from skillgate_core.pipeline.recipes import load_recipe, resolve_recipe
from skillgate_core.policy.openai_chat import OpenAIEndpoint, chat_completion

HOSTILE = ("AWS_SECRET_ACCESS_KEY", "HOME", "GITHUB_TOKEN", "SKILLGATE_HOME", "OPENAI_API_KEY_X", "")


@pytest.mark.parametrize("name", HOSTILE)
def test_an_endpoint_cannot_name_an_arbitrary_variable(name: str):
    with pytest.raises(ValueError, match=r"api_key_env: .*OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY"):
        OpenAIEndpoint(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=name)
    with pytest.raises(ValueError, match=r"teacher_api_key_env: .*OPENAI_API_KEY or SKILLGATE_<NAME>_API_KEY"):
        CollectConfig(teacher="openai", teacher_base_url="http://127.0.0.1:9/v1", teacher_model="m",
                      teacher_api_key_env=name)


def test_a_deployment_override_cannot_send_another_secret(tmp_path: Path):
    recipe = tmp_path / "r.toml"
    recipe.write_text('[recipe]\nname = "r"\nstages = ["collect"]\n[collect]\nteacher = "openai"\n'
                      'teacher_base_url = "http://127.0.0.1:9/v1"\nteacher_model = "m"\n')
    with pytest.raises(ConfigError, match="teacher_api_key_env"):
        resolve_recipe(load_recipe(recipe), ["collect.teacher_api_key_env='AWS_SECRET_ACCESS_KEY'"],
                       source="flow parameter 'overrides'")


def test_an_allowed_variable_is_sent_and_nothing_else(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("SKILLGATE_TEACHER_API_KEY", "sk-teacher")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret")
    with ChatServer(lambda body: ("hi", "stop")) as server:
        monkeypatch.setenv("SKILLGATE_TEACHER_BASE_URLS", server.base_url)  # where that key may go
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", api_key_env="SKILLGATE_TEACHER_API_KEY")
        chat_completion(endpoint, [{"role": "user", "content": "x"}], temperature=1.0, max_tokens=4)
        assert server.requests[-1]["auth"] == "Bearer sk-teacher"
        assert "aws-secret" not in repr(server.requests)
