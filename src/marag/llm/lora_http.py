"""Client side of the runtime LoRA endpoints of vLLM and ``marag serve-llm``.

``POST {base_url}/load_lora_adapter`` with ``{"lora_name", "lora_path", "load_inplace"}``
makes the server serve the peft adapter folder ``lora_path`` under the model name
``lora_name``; ``load_inplace`` replaces the weights of a name already loaded (vLLM >= 0.9;
an older vLLM ignores the field and refuses a loaded name, which ``load_lora_adapter`` meets
by unloading the name first). vLLM registers these endpoints only when started with
``--enable-lora`` and the environment variable ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``;
``marag serve-llm`` with ``--allow-lora-updates``. Success is a 200 with a plain-text message.
"""

from __future__ import annotations

import logging
import os

import httpx

from marag.llm.base import LLMError

log = logging.getLogger(__name__)

HOW_TO_ENABLE = ("start vLLM with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, "
                 "or marag serve-llm with --allow-lora-updates")


def _post(base_url: str, endpoint: str, body: dict[str, object], timeout: float,
          api_key_env: str) -> httpx.Response:
    url = base_url.rstrip("/") + "/" + endpoint
    headers = {"Content-Type": "application/json"}
    key = os.environ.get(api_key_env, "")
    if key:
        headers["Authorization"] = f"Bearer {key}"
    try:
        return httpx.post(url, json=body, headers=headers, timeout=timeout)
    except httpx.HTTPError as e:
        raise LLMError(f"{url}: {type(e).__name__}: {e}") from None


def _message(resp: httpx.Response) -> str:
    try:
        data = resp.json()
    except ValueError:
        return resp.text[:500]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict) and "message" in err:
            return str(err["message"])[:500]
    return resp.text[:500]


def load_lora_adapter(base_url: str, name: str, path: str, *, inplace: bool = True,
                      timeout: float = 300.0, api_key_env: str = "OPENAI_API_KEY") -> str:
    """Have the server at ``base_url`` (ending in ``/v1``) serve the adapter folder ``path``
    as model ``name``; returns the server's message. Raises ``LLMError`` saying why not."""
    body = {"lora_name": name, "lora_path": path, "load_inplace": inplace}
    resp = _post(base_url, "load_lora_adapter", body, timeout, api_key_env)
    if resp.status_code == 400 and inplace and "already" in _message(resp).lower():
        # a server that does not know load_inplace: unload, then load afresh
        log.info("server refused to reload %s in place; unloading it first", name)
        unload_lora_adapter(base_url, name, timeout=timeout, api_key_env=api_key_env)
        resp = _post(base_url, "load_lora_adapter", body, timeout, api_key_env)
    if resp.status_code == 404:
        raise LLMError(f"{base_url}: no /load_lora_adapter endpoint (HTTP 404: "
                       f"{_message(resp)}); {HOW_TO_ENABLE}")
    if resp.status_code != 200:
        raise LLMError(f"{base_url}: loading LoRA adapter {name!r} from {path} failed: HTTP "
                       f"{resp.status_code}: {_message(resp)}")
    return resp.text


def unload_lora_adapter(base_url: str, name: str, *, timeout: float = 60.0,
                        api_key_env: str = "OPENAI_API_KEY") -> str:
    resp = _post(base_url, "unload_lora_adapter", {"lora_name": name}, timeout, api_key_env)
    if resp.status_code != 200:
        raise LLMError(f"{base_url}: unloading LoRA adapter {name!r} failed: HTTP "
                       f"{resp.status_code}: {_message(resp)}")
    return resp.text
