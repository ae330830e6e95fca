"""A Schemathesis check for benchmarks/fuzz_servers.py and tests/test_http_fuzz.py, loaded in
the ``schemathesis run`` child process through SCHEMATHESIS_HOOKS.

serve-llm refuses some schema-valid requests for a reason a schema cannot state: a prompt plus
max_tokens past the model's context (it depends on how the prompt tokenizes). That answer is a
documented 400 with OpenAI's error code ``context_length_exceeded``.
This check is positive_data_acceptance (run with it excluded) that lets exactly those codes
through; any other refusal of valid data still fails.
"""

from __future__ import annotations

from typing import Any

import schemathesis

DOMAIN_CODES = {"context_length_exceeded"}
ACCEPTED = {401, 403, 404, 409, 429}


@schemathesis.check
def positive_data_accepted_but_domain_errors(ctx: Any, response: Any, case: Any) -> bool | None:
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    status = response.status_code
    if status < 400 or status in ACCEPTED or status >= 500:  # 5xx: not_a_server_error's
        return None
    try:
        code = (response.json().get("error") or {}).get("code")
    except Exception:  # noqa: BLE001 - not JSON: certainly not a documented domain error
        code = None
    if status == 400 and code in DOMAIN_CODES:
        return None
    raise AssertionError(f"valid data was refused with {status} (error code {code!r}): "
                         f"{response.text[:300]}")
