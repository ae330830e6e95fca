"""A local stand-in for the Hugging Face hub's file endpoint, on 127.0.0.1.

It answers ``/datasets/<repo>/resolve/<revision>/<path>`` the way the hub does for a small
file (``X-Repo-Commit``, ``ETag``, ``Content-Length``; HEAD and GET) and 404 with
``X-Error-Code: EntryNotFound`` for any other path or revision, so a test sees which revision a
download asked for. Used by tests/test_datasets.py and tests/commands/test_data_cli.py.
"""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from typing import Self

from marag.datasets import FLASHRAG_REVISION, HUB_REPO


def jsonl(records) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in records).encode()


class Mirror:
    """Serves ``files`` (path in the repository -> bytes) of ``repo`` at ``revision``.
    ``commit`` is what it names in ``X-Repo-Commit`` (default: the revision itself);
    ``gets`` counts the GETs per path."""

    def __init__(self, files: dict[str, bytes], *, repo: str = HUB_REPO,
                 revision: str = FLASHRAG_REVISION, commit: str | None = None) -> None:
        self.files, self.revision = files, revision
        self.commit = commit or revision
        self.gets: dict[str, int] = {}
        self.requests: list[str] = []
        prefix = f"/datasets/{repo}/resolve/{revision}/"
        mirror = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _headers(self) -> str | None:
                mirror.requests.append(self.path)
                name = self.path[len(prefix):] if self.path.startswith(prefix) else None
                if name in mirror.files:
                    data = mirror.files[name]
                    self.send_response(200)
                    self.send_header("X-Repo-Commit", mirror.commit)
                    self.send_header("ETag", f'"{hashlib.sha1(data).hexdigest()}"')
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    return name
                self.send_response(404)
                self.send_header("X-Error-Code", "EntryNotFound")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return None

            def do_HEAD(self):
                self._headers()

            def do_GET(self):
                name = self._headers()
                if name is not None:
                    mirror.gets[name] = mirror.gets.get(name, 0) + 1
                    self.wfile.write(mirror.files[name])

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def isolate_hub(tmp_path, monkeypatch):
    """An empty HF cache under tmp_path, online, the real hub's address unset (a test points
    HF_ENDPOINT at its Mirror)."""
    from huggingface_hub import constants

    cache = tmp_path / "hf-cache"
    cache.mkdir()
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return cache
