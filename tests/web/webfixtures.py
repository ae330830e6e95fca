"""Helpers for the web tests: a scripted team that decomposes every question, its
context, a valid PNG, and a uvicorn server on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path
from typing import Any, Self

from marag.config import load_config
from marag.llm.base import LLMError
from marag.llm.scripted import ScriptedLLM, decomposing
from marag.workflows import Context

# A few passages in our own words (no third-party text), enough for BM25 to rank.
PASSAGES = [
    ("p0", "Inception", ("Inception is a 2010 science fiction film written and directed by "
     "Christopher Nolan about thieves who enter dreams.")),
    ("p1", "Christopher Nolan", ("Christopher Nolan is a film director who was born in London "
     "and is known for Inception and Interstellar.")),
    ("p2", "London", "London is the capital city of England and of the United Kingdom."),
    ("p3", "Paris", "Paris is the capital city of France, on the river Seine."),
    ("p4", "Interstellar", "Interstellar is a 2014 film directed by Christopher Nolan."),
    ("p5", "Seine", "The Seine is a river in northern France that flows through Paris."),
]
SUBS = ["Who directed Inception?", "Where was he born?"]
REWRITE = {"Where was he born?": "Where was Christopher Nolan born?"}
QUESTION = "Where was the director of Inception born?"
# (id, question, golden answers) of the evaluation runs
QUESTIONS = [("q1", QUESTION, ["London"]), ("q2", "Which city was Nolan born in?", ["London"]),
             ("q3", "Where is the Seine?", ["France"]), ("q4", "Which river fails here?", ["Seine"])]


def team(latency: float = 0.0) -> ScriptedLLM:
    return decomposing(SUBS, ["Christopher Nolan", "London"], "London", rewrites=REWRITE,
                       latency=latency)


def make_ctx(llm: Any, index: Path | None, *overrides: str) -> Context:
    from marag.retrieval import open_index

    cfg = load_config(None, ["llms.default.backend=scripted", *overrides])
    return Context(llms={"default": llm}, config=cfg,
                   retriever=None if index is None else open_index(index))


def vanilla_llm() -> ScriptedLLM:
    def answer(messages: list[dict[str, str]]) -> str:
        if "fails" in messages[-1]["content"]:
            raise LLMError("scripted backend down for this question")
        return "<answer>London</answer>"

    return ScriptedLLM({"AG": answer})


def write_training_run(out: Path, index: Path) -> Path:
    """A real ``marag train`` run folder: the tiny random model (no weights from anywhere),
    vanilla over ``index``, 2 iterations, each followed by a greedy evaluation of two
    questions, so it has metrics rows, ``eval/iter-*`` runs and ``best/``."""
    import torch
    import yaml

    from marag.llm.hf_local import HFBackend
    from marag.llm.tiny import build_tiny_model
    from marag.retrieval import open_index
    from marag.train.trainer import Trainer
    from marag.types import Question

    cfg = load_config(None, [
        "method.name=vanilla", "method.top_k=2", "train.iterations=2", "train.eval_every=1",
        "train.questions_per_iteration=2", "train.samples_per_question=2",
        "train.concurrency=1", "train.minibatch_size=4", "train.micro_batch_size=2",
        "train.lr=1e-3", "train.critic_lr=1e-3", "train.lora.r=4",
        "train.lora.target_modules=[q_proj,v_proj]", "train.seed=3"])
    model, tok = build_tiny_model(seed=0)
    backend = HFBackend("tiny", model=model, tokenizer=tok, batch_wait_ms=0, max_batch_size=4)
    ctx = Context(llms={"default": backend}, config=cfg, retriever=open_index(index))
    questions = [Question(id=i, question=q, golden_answers=g, dataset="demo")
                 for i, q, g in QUESTIONS]
    torch.manual_seed(0)
    out.mkdir(parents=True)  # the config as `marag train` saves it
    (out / "config.yaml").write_text(yaml.safe_dump(cfg.model_dump(mode="json"), sort_keys=False))
    trainer = Trainer(cfg, out, questions=questions[:2], context=ctx, tensorboard=False)
    trainer.eval_questions = questions[2:]
    trainer.run()
    return out


def png(width: int = 2, height: int = 2) -> bytes:
    """A valid grey PNG, so a browser can show the plot."""
    import struct
    import zlib

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    return (b"\x89PNG\r\n\x1a\n"
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


PNG = png()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class LiveServer:
    """A uvicorn server for ``app`` on a free loopback port, in a thread of its own."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port,
                                                    log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Self:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=20)
