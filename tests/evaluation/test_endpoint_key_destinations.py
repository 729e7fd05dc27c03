"""A key set on the worker goes only to the base URLs the worker lists beside it (OPENAI_API_KEY ->
OPENAI_BASE_URLS, SKILLGATE_<NAME>_API_KEY -> SKILLGATE_<NAME>_BASE_URLS): a run parameter that names
another endpoint (`collect.teacher_base_url`, a deployment's overrides, `skillgate eval run --policy URL`)
is refused when the config is built, naming the parameter, never answered by a silent call without the
key; and the client itself never sends a key elsewhere. Real local HTTP servers record what arrives."""

from __future__ import annotations

from pathlib import Path

import pytest
from chat_server import ChatServer
from support.skillgate_cli import run_skillgate

from skillgate_core.agent.collect import CollectConfig
from skillgate_core.base.config import ConfigError
from skillgate_core.pipeline.recipes import load_recipe, resolve_recipe
from skillgate_core.policy.openai_chat import EndpointError, OpenAIEndpoint, chat_completion

MESSAGES = [{"role": "user", "content": "x"}]


def _recipe(tmp_path: Path, base_url: str, key_env: str = "OPENAI_API_KEY") -> Path:
    recipe = tmp_path / "r.toml"
    recipe.write_text('[recipe]\nname = "r"\nstages = ["collect"]\n[collect]\nteacher = "openai"\n'
                      f'teacher_base_url = "{base_url}"\nteacher_model = "m"\nteacher_api_key_env = "{key_env}"\n')
    return recipe


def test_a_deployment_override_cannot_send_the_workers_key_to_its_own_url(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker")
    monkeypatch.setenv("OPENAI_BASE_URLS", "https://api.openai.com/v1")
    recipe = load_recipe(_recipe(tmp_path, "https://api.openai.com/v1"))
    assert resolve_recipe(recipe).configs["collect"].teacher_base_url == "https://api.openai.com/v1"
    with pytest.raises(ConfigError) as err:
        resolve_recipe(recipe, ["collect.teacher_base_url='http://attacker.example:8080/v1'"],
                       source="flow parameter 'overrides'")
    message = str(err.value)
    assert "flow parameter 'overrides'" in message and "collect: teacher_base_url: " in message
    assert "http://attacker.example:8080" in message and "OPENAI_BASE_URLS" in message
    assert "sk-worker" not in message


def test_a_key_without_a_list_of_base_urls_goes_nowhere(tmp_path, monkeypatch):
    monkeypatch.setenv("SKILLGATE_TEACHER_API_KEY", "sk-teacher")
    monkeypatch.delenv("SKILLGATE_TEACHER_BASE_URLS", raising=False)
    with pytest.raises(ConfigError, match=r"collect: teacher_base_url: .*SKILLGATE_TEACHER_BASE_URLS is not set"):
        resolve_recipe(load_recipe(_recipe(tmp_path, "http://127.0.0.1:9/v1", "SKILLGATE_TEACHER_API_KEY")))
    with pytest.raises(ValueError, match="teacher_base_url"):
        CollectConfig(teacher="openai", teacher_base_url="http://127.0.0.1:9/v1", teacher_model="m",
                      teacher_api_key_env="SKILLGATE_TEACHER_API_KEY")


def test_the_origin_decides_and_a_listed_url_gets_the_key(monkeypatch):
    monkeypatch.setenv("SKILLGATE_TEACHER_API_KEY", "sk-teacher")
    with ChatServer(lambda body: ("hi", "stop")) as server:
        port = server.address[1]
        # the origin is what is compared: another path of a listed origin is the same server
        monkeypatch.setenv("SKILLGATE_TEACHER_BASE_URLS", f"https://x.example, HTTP://127.0.0.1:{port}/other")
        CollectConfig(teacher="openai", teacher_base_url=server.base_url, teacher_model="m",
                      teacher_api_key_env="SKILLGATE_TEACHER_API_KEY")
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", api_key_env="SKILLGATE_TEACHER_API_KEY")
        chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
        assert server.requests[-1]["auth"] == "Bearer sk-teacher"
        for other in (f"http://127.0.0.1:{port + 1}/v1", f"https://127.0.0.1:{port}/v1", "http://localhost/v1"):
            with pytest.raises(ValueError, match="teacher_base_url"):
                CollectConfig(teacher="openai", teacher_base_url=other, teacher_model="m",
                              teacher_api_key_env="SKILLGATE_TEACHER_API_KEY")


def test_the_client_never_sends_a_key_to_an_unlisted_url(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker")
    monkeypatch.setenv("OPENAI_BASE_URLS", "https://api.openai.com/v1")
    with ChatServer(lambda body: ("hi", "stop")) as server:
        endpoint = OpenAIEndpoint(base_url=server.base_url, model="m", retries=0)
        with pytest.raises(EndpointError, match=r"OPENAI_API_KEY .*OPENAI_BASE_URLS"):
            chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
        assert server.requests == []
        # an unset key sends none, to any URL, as before
        monkeypatch.delenv("OPENAI_API_KEY")
        chat_completion(endpoint, MESSAGES, temperature=1.0, max_tokens=4)
        assert server.requests[-1]["auth"] is None


def test_a_bad_list_names_its_variable(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-worker")
    monkeypatch.setenv("OPENAI_BASE_URLS", "api.openai.com")
    with pytest.raises(ValueError, match=r"OPENAI_BASE_URLS: 'api.openai.com' is not an http\(s\) URL"):
        CollectConfig(teacher="openai", teacher_base_url="https://api.openai.com/v1", teacher_model="m")


def test_eval_run_refuses_an_endpoint_the_key_is_not_for_before_writing_anything(tmp_path):
    home = tmp_path / "home"
    env = {"OPENAI_API_KEY": "sk-worker", "OPENAI_BASE_URLS": "https://api.openai.com/v1"}
    proc = run_skillgate("eval", "run", "--policy", "http://127.0.0.1:9/v1", "--model", "m", home=home, env=env)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "--policy" in proc.stderr and "OPENAI_BASE_URLS" in proc.stderr and "sk-worker" not in proc.stderr
    assert not (home / "experiments").exists()
    proc = run_skillgate("bench", "skillgym", str(tmp_path), "--base-url", "http://127.0.0.1:9/v1", "--model", "m",
                         home=home, env=env)
    assert proc.returncode == 2 and "--base-url" in proc.stderr and "OPENAI_BASE_URLS" in proc.stderr
