#!/usr/bin/env python
"""FlashRAG's own multi-step pipelines on marag's questions, for a side-by-side with marag's
methods of the same name (issue 39). Today: IRCoT (``flashrag.pipeline.IRCOTPipeline``).

Search-o1 is not run: flashrag-dev 0.1.2 (the only release on PyPI; the code of upstream
commit cf3d18f, 2024-10) has no reasoning pipelines at all (``flashrag/pipeline/`` holds no
``reasoning_pipeline.py``), and upstream's later ``reasoning_pipeline.py`` has no Search-o1
pipeline either (``SimpleDeepSearcherPipeline`` borrows its markers but has no
Reason-in-Documents step). ``--methods search-o1`` says so and stops.

Three sub-commands; the first two run under the FlashRAG venv, ``table`` under marag's:

    # FlashRAG: convert the data, build FlashRAG's BM25 index, run IRCOTPipeline
    FLASHRAG_MIRROR=/work/.mirror/RUC-NLPIR+FlashRAG/repo \\
      $PEERENV/bin/python benchmarks/flashrag_methods_peer.py run QUESTIONS.jsonl OUT \\
        --corpus runs/data/all.corpus.jsonl --model ~/.cache/marag/models/qwen2.5-coder-0.5b \\
        --topk 5 --max-iter 5
    # the table of both sides, each prediction rescored with marag.metrics
    .venv/bin/python benchmarks/flashrag_methods_peer.py table \\
        --flashrag OUT/ircot --marag MARAG_RUN_DIR [--md TABLE.md] [--json TABLE.json]

How it is built. It follows ``../shared/tools/flashrag_peer.py`` (FLASHRAG_PEER.md) and imports
that script's helpers rather than repeating them: its ``prepare`` (FlashRAG's dataset layout
and the ``{"id", "contents": '"Title"\\ntext'}`` corpus), its ``child_build_index`` (FlashRAG's
``index_builder`` with the bm25s tokenisation fix), the upstream ``basic_config.yaml`` that the
wheel lacks, and its small utilities. What is new here is the pipeline stage: a FlashRAG config
dict -> ``Config`` -> ``get_dataset`` -> ``IRCOTPipeline(config, max_iter=...)`` with
FlashRAG's own retriever (``BM25Retriever``, bm25s), generator (``HFCausalLMGenerator``), IRCoT
prompt and answer parser (``ircot_pred_parse``) and ``Evaluator``; ``pipeline.run`` untouched.

Measurement. FlashRAG reports no timings or call counts, so this script wraps instance
attributes only (never FlashRAG's classes or files): ``pipeline.run_item`` (wall time of each
question), ``pipeline.generator.generate`` (LLM calls, prompt and completion tokens counted with
the generator's own tokenizer) and ``pipeline.retriever.search`` (retrieval calls; it also turns
bm25s's numpy results into lists, the same results, without which FlashRAG's
``Dataset.save`` fails on ndarray). A retrieval and a short generation run first as warm-ups
(numba compiles bm25s on its first call) and are timed apart.

Each stage runs in a child process of its own (peak RSS per stage), as in the shared script.

Output in OUT: ``prep/`` (FlashRAG data dir, converted corpus, index, model link),
``index_build.json``, and per method ``<method>/``: ``result.json`` (FlashRAG's metrics,
timings, settings, versions, the config dict), ``predictions.jsonl`` (per question: the
parsed prediction, the raw chain, FlashRAG's em/f1/acc, wall s, LLM calls, retrieval calls,
tokens, the thoughts) and FlashRAG's own save dir (``config.yaml``, ``metric_score.txt``,
``intermediate_data.json``).
"""
from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import subprocess
import sys
import time
from types import SimpleNamespace

_T0 = time.time()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_PEER_SCRIPT = os.path.normpath(os.path.join(ROOT, "..", "shared", "tools", "flashrag_peer.py"))
DATASET_NAME = "peer"  # the FlashRAG dataset name of the converted question file

NOT_IN_FLASHRAG = {
    "search-o1": "flashrag-dev 0.1.2 (PyPI's only release, upstream cf3d18f of 2024-10) ships no "
                 "reasoning pipelines (no flashrag/pipeline/reasoning_pipeline.py), and upstream's "
                 "later reasoning_pipeline.py has none named Search-o1 (SimpleDeepSearcherPipeline "
                 "uses its markers without a Reason-in-Documents step)",
}

EXTRA_WORKAROUNDS = [
    ("IRCOTPipeline calls retriever.search (not batch_search); its bm25s results are numpy "
     "arrays and numpy float scores, which FlashRAG's Dataset.save cannot write to JSON; the "
     "pipeline's retriever.search instance method is wrapped to return the same results as "
     "Python lists and floats."),
    ("Per-question timings and call counts: pipeline.run_item, generator.generate and "
     "retriever.search are wrapped (instance attributes) with timers and counters."),
]


def load_json(path: str):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def read_jsonl(path: str) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_peer(path: str):
    """The shared FlashRAG runner as a module (its helpers; its main() is not run)."""
    spec = importlib.util.spec_from_file_location("flashrag_peer_shared", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ----------------------------------------------------------------------------------------------
# parent of the FlashRAG run
# ----------------------------------------------------------------------------------------------
def cmd_run(args) -> None:
    for m in args.methods:
        if m in NOT_IN_FLASHRAG:
            raise SystemExit(f"{m}: not run: {NOT_IN_FLASHRAG[m]}")
        if m != "ircot":
            raise SystemExit(f"unknown method {m!r} (this runner knows: ircot)")
    peer = load_peer(args.peer_script)
    out = os.path.abspath(args.out_dir)
    prep = os.path.join(out, "prep")
    src = os.path.join(prep, "src")
    os.makedirs(src, exist_ok=True)
    # the shared prepare() reads <data_dir>/<name>.questions.jsonl and <name>.corpus.jsonl
    for kind, path in (("questions", args.questions), ("corpus", args.corpus)):
        link = os.path.join(src, f"{DATASET_NAME}.{kind}.jsonl")
        if os.path.lexists(link):
            os.remove(link)
        os.symlink(os.path.abspath(path), link)
    n = args.limit or len(peer.read_jsonl(args.questions))
    pargs = SimpleNamespace(dataset=DATASET_NAME, data_dir=src, n=n, model=args.model,
                            no_chat=not args.chat_link, extra_site=args.extra_site)
    started = datetime.datetime.now().astimezone()
    info = peer.prepare(pargs, prep)
    env = peer.child_env(pargs, prep)

    index_dir = os.path.join(prep, "index_fixed")
    index_json = os.path.join(out, "index_build.json")
    if not (args.reuse_index and os.path.exists(index_json)):
        spec = {"stage": "index", "corpus_path": info["corpus_path"], "index_save_dir": index_dir,
                "index_mode": "fixed", "result_path": index_json}
        rc, wall = run_child(args, spec, env, os.path.join(out, "index_build.log"))
        if rc:
            raise SystemExit(f"index build failed (rc={rc}): {out}/index_build.log")
        index_info = load_json(index_json)
        index_info["process_wall_s"] = wall
        peer.write_json(index_json, index_info)
    index_info = load_json(index_json)
    print(f"[index] vocab={index_info['vocab_size']} char_level={index_info['character_level_index']}",
          flush=True)

    for method in args.methods:
        mdir = os.path.join(out, method)
        os.makedirs(mdir, exist_ok=True)
        spec = {"stage": method, "n": n, "questions_path": os.path.abspath(args.questions),
                "flashrag_data_dir": info["flashrag_data_dir"], "corpus_path": info["corpus_path"],
                "index_path": index_info["index_path"], "model_path": info["model_path"],
                "generator_model_name": args.generator_model_name, "topk": args.topk,
                "max_iter": args.max_iter, "max_new_tokens": args.max_new_tokens,
                "max_input_len": args.max_input_len, "torch_threads": args.torch_threads,
                "flashrag_save_dir": os.path.join(mdir, "flashrag"),
                "result_path": os.path.join(mdir, "result.json"),
                "predictions_path": os.path.join(mdir, "predictions.jsonl")}
        rc, wall = run_child(args, spec, env, os.path.join(mdir, "run.log"))
        if rc:
            raise SystemExit(f"{method} failed (rc={rc}): {mdir}/run.log")
        res = load_json(spec["result_path"])
        res["timing"]["process_wall_s"] = wall
        res["started"] = started.isoformat(timespec="seconds")
        res["command"] = " ".join([sys.executable] + sys.argv)
        res["machine"] = {"cpu": peer.cpu_model(), "cpus": os.cpu_count(),
                          "mem_total_gib": peer.mem_total_gib()}
        res["index"] = index_info
        peer.write_json(spec["result_path"], res)
        m, t = res["flashrag_metrics"], res["timing"]
        print(f"[{method}] n={res['n']} em={m.get('em'):.3f} f1={m.get('f1'):.3f} "
              f"acc={m.get('acc'):.3f} run={t['run_s']:.1f}s ({t['run_s_per_question']:.2f} s/q) "
              f"llm={t['llm_calls_per_question']:.2f}/q retr={t['retrieval_calls_per_question']:.2f}/q "
              f"wall={wall:.1f}s", flush=True)
    if not args.keep_caches:
        import shutil
        for sub in ("hf_home", "numba_cache"):
            shutil.rmtree(os.path.join(prep, sub), ignore_errors=True)


def run_child(args, spec, env, log_path):
    t = time.time()
    with open(log_path, "w") as log:
        p = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", args.peer_script,
                            json.dumps(spec)], env=env, stdout=log, stderr=subprocess.STDOUT,
                           check=False)
    return p.returncode, time.time() - t


# ----------------------------------------------------------------------------------------------
# child: FlashRAG's IRCoT pipeline
# ----------------------------------------------------------------------------------------------
def child_ircot(peer, spec) -> None:
    t = time.time()
    import flashrag.config.config as config_module
    import torch
    import yaml
    from flashrag.config import Config
    from flashrag.pipeline import IRCOTPipeline
    from flashrag.utils import get_dataset
    t_import = time.time() - t

    shipped = os.path.join(os.path.dirname(os.path.realpath(config_module.__file__)), "basic_config.yaml")

    class WheelConfig(Config):
        """FlashRAG's Config; the wheel's basic_config.yaml if it has one, else upstream's."""

        def _get_internal_config(self):
            if os.path.exists(shipped):
                return super()._get_internal_config()
            return yaml.load(peer.upstream_basic_config_text(), Loader=self.yaml_loader)

    if spec.get("torch_threads"):
        torch.set_num_threads(int(spec["torch_threads"]))
    config_dict = {
        "data_dir": spec["flashrag_data_dir"], "dataset_name": DATASET_NAME, "split": ["test"],
        "test_sample_num": spec["n"], "random_sample": False, "seed": 2024,
        "save_dir": spec["flashrag_save_dir"], "save_note": "ircot",
        "save_intermediate_data": True, "save_metric_score": True,
        "gpu_id": None,
        "retrieval_method": "bm25", "bm25_backend": "bm25s",
        "index_path": spec["index_path"], "corpus_path": spec["corpus_path"],
        "retrieval_topk": spec["topk"],
        "save_retrieval_cache": False, "use_retrieval_cache": False, "use_reranker": False,
        "framework": "hf", "generator_model": spec["generator_model_name"],
        "generator_model_path": spec["model_path"],
        "generator_max_input_len": spec["max_input_len"], "generator_batch_size": 1,
        "generation_params": {"do_sample": False, "max_tokens": spec["max_new_tokens"]},
        "metrics": ["em", "f1", "acc", "precision", "recall"],
    }
    t = time.time()
    config = WheelConfig(config_dict=dict(config_dict))
    dataset = get_dataset(config)["test"]
    pipeline = IRCOTPipeline(config, max_iter=spec["max_iter"])  # its own prompt, retriever, generator
    t_setup = time.time() - t

    tok = pipeline.generator.tokenizer
    # warm-ups, outside the timed run
    t = time.time()
    pipeline.retriever.search("warm up query for the numba compilation")
    t_retr_warm = time.time() - t
    t = time.time()
    pipeline.generator.generate(["Question: What is the capital of France?\nThought:"], max_tokens=4)
    t_gen_warm = time.time() - t

    cur: dict = {}  # counters of the question being answered
    gen_fn, search_fn, item_fn = (pipeline.generator.generate, pipeline.retriever.search,
                                  pipeline.run_item)

    def generate(input_list, *a, **kw):
        prompts = [input_list] if isinstance(input_list, str) else list(input_list)
        t0 = time.time()
        out = gen_fn(input_list, *a, **kw)
        cur["generation_s"] += time.time() - t0
        cur["llm_calls"] += len(prompts)
        cur["prompt_tokens"] += sum(len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts)
        texts = out[0] if isinstance(out, tuple) else out
        cur["completion_tokens"] += sum(len(tok(x, add_special_tokens=False)["input_ids"])
                                        for x in texts if isinstance(x, str))
        cur["max_prompt_tokens"] = max([cur["max_prompt_tokens"]] + [
            len(tok(p, add_special_tokens=False)["input_ids"]) for p in prompts])
        return out

    def search(*a, **kw):
        t0 = time.time()
        out = search_fn(*a, **kw)
        cur["retrieval_s"] += time.time() - t0
        cur["retrieval_calls"] += 1
        return tuple(peer._tolist_deep(o) for o in out) if isinstance(out, tuple) else peer._tolist_deep(out)

    per_q: dict = {}

    def run_item(item):
        cur.clear()
        cur.update(generation_s=0.0, retrieval_s=0.0, llm_calls=0, retrieval_calls=0,
                   prompt_tokens=0, completion_tokens=0, max_prompt_tokens=0)
        t0 = time.time()
        res = item_fn(item)
        cur["wall_s"] = time.time() - t0
        per_q[item.id] = dict(cur)
        return res

    pipeline.generator.generate = generate
    pipeline.retriever.search = search
    pipeline.run_item = run_item

    t = time.time()
    dataset = pipeline.run(dataset, do_eval=True)  # FlashRAG's default pred_process_fun: ircot_pred_parse
    t_run = time.time() - t

    save_dir = config["save_dir"]
    scores = {}
    with open(os.path.join(save_dir, "metric_score.txt")) as f:
        for line in f:
            if ":" in line:
                k, v = line.split(":", 1)
                scores[k.strip()] = float(v)
    src = {q["id"]: q for q in peer.read_jsonl(spec["questions_path"])}
    n = len(dataset)
    with open(spec["predictions_path"], "w", encoding="utf-8") as f:
        for item in dataset:
            ms = item.output.get("metric_score", {})
            iters = sorted(k for k in item.output if k.startswith("intermediate_output_iter"))
            thoughts = [item.output[k]["new_thought"] for k in iters]
            rec = {"id": item.id, "dataset": src.get(item.id, {}).get("dataset"),
                   "question": item.question, "golden_answers": item.golden_answers,
                   "pred": item.output.get("pred"), "raw_pred": item.output.get("raw_pred"),
                   "em": ms.get("em"), "f1": ms.get("f1"), "acc": ms.get("acc"),
                   "iterations": len(thoughts), "thoughts": thoughts,
                   "n_docs_final": len(item.output.get("retrieval_result") or []),
                   **per_q.get(item.id, {})}
            f.write(json.dumps(rec, ensure_ascii=False, default=peer._json_default) + "\n")

    def tot(k):
        return sum(v[k] for v in per_q.values())

    result = {
        "method": "ircot", "system": "FlashRAG IRCOTPipeline", "n": n,
        "flashrag_metrics": scores,
        "settings": {"retrieval_topk": spec["topk"], "max_iter": spec["max_iter"],
                     "max_new_tokens": spec["max_new_tokens"], "max_input_len": spec["max_input_len"],
                     "do_sample": False, "batch_size": 1,
                     "prompt": "IRCOTPipeline's default (IRCOT_INSTRUCTION + IRCOT_EXAMPLE, "
                               "enable_chat=False: plain text, no chat template)"},
        "timing": {
            "import_s": t_import, "setup_s": t_setup,
            "retriever_warmup_s": t_retr_warm, "generator_warmup_s": t_gen_warm,
            "run_s": t_run, "run_s_per_question": t_run / n,
            "generation_s": tot("generation_s"), "retrieval_s": tot("retrieval_s"),
            "llm_calls_per_question": tot("llm_calls") / n,
            "retrieval_calls_per_question": tot("retrieval_calls") / n,
            "prompt_tokens_per_question": tot("prompt_tokens") / n,
            "completion_tokens_per_question": tot("completion_tokens") / n,
            "max_prompt_tokens": max(v["max_prompt_tokens"] for v in per_q.values()),
            "child_wall_s": time.time() - _T0,
        },
        "peak_rss_mib": peer.peak_rss_mib(),
        "torch_threads": torch.get_num_threads(),
        "flashrag_save_dir": save_dir, "config_dict": config_dict,
        "versions": peer.versions(),
        "workarounds": peer.WORKAROUNDS + EXTRA_WORKAROUNDS,
    }
    peer.write_json(spec["result_path"], result)


# ----------------------------------------------------------------------------------------------
# table: both sides, rescored with one definition (marag.metrics)
# ----------------------------------------------------------------------------------------------
def cmd_table(args) -> None:
    from marag.metrics import score

    fr = {r["id"]: r for r in read_jsonl(os.path.join(args.flashrag, "predictions.jsonl"))}
    fr_res = load_json(os.path.join(args.flashrag, "result.json"))
    mr = {t["id"]: t for t in read_jsonl(os.path.join(args.marag, "traces.jsonl"))}
    ids = [i for i in fr if i in mr]
    missing = sorted(set(fr) ^ set(mr))
    wall_m = None
    if args.marag_wall and os.path.exists(args.marag_wall):
        wall_m = load_json(args.marag_wall).get("run_s")

    if args.marag_predictions:  # a compact per-question record of the marag run
        with open(args.marag_predictions, "w", encoding="utf-8") as f:
            for i, m in mr.items():
                steps = [{"role": st["role"], "turn": st.get("turn"), "valid": st["valid"],
                          "reason": st.get("reason", ""),
                          "out": st["raw"] if st["role"] != "R" else None,
                          "titles": (st.get("parsed") or {}).get("titles") if st["role"] == "R" else None,
                          "latency_s": st.get("latency")} for st in m.get("steps", [])]
                f.write(json.dumps({"id": i, "dataset": m.get("dataset"), "question": m["question"],
                                    "golden_answers": m["golden_answers"], "pred": m.get("answer"),
                                    **{k: m["metrics"][k] for k in ("em", "f1", "acc")},
                                    "cost": m.get("cost"), "notes": m.get("notes"),
                                    "steps": steps}, ensure_ascii=False) + "\n")

    def row(system, recs, run_s):
        n = len(recs)
        out = {"system": system, "n": n}
        for k in ("em", "f1", "acc"):
            out[k] = 100 * sum(r[k] for r in recs) / n
        for k in ("s_per_q", "llm_calls", "retrieval_calls", "prompt_tokens"):
            out[k] = sum(r[k] for r in recs) / n
        out["run_s"] = run_s
        out["run_s_per_q"] = run_s / n if run_s else None
        out["disagree_flashrag_metric"] = sum(
            1 for r in recs for k in ("em", "f1", "acc")
            if r.get("native_" + k) is not None and abs(r["native_" + k] - r[k]) > 1e-9)
        return out

    def scored(pred, golds):
        s = score(pred or "", list(golds))
        return {"em": s["em"], "f1": s["f1"], "acc": s["acc"]}

    groups: dict = {}
    for i in ids:
        f, m = fr[i], mr[i]
        ds = m.get("dataset") or f.get("dataset")
        golds = m["golden_answers"]
        fs = {**scored(f["pred"], golds), "native_em": f["em"], "native_f1": f["f1"],
              "native_acc": f["acc"], "s_per_q": f["wall_s"], "llm_calls": f["llm_calls"],
              "retrieval_calls": f["retrieval_calls"], "prompt_tokens": f["prompt_tokens"]}
        c = m.get("cost", {})
        ms = {**scored(m.get("answer"), golds), "native_em": m["metrics"]["em"],
              "native_f1": m["metrics"]["f1"], "native_acc": m["metrics"]["acc"],
              "s_per_q": c.get("seconds", 0.0), "llm_calls": c.get("llm_calls", 0),
              "retrieval_calls": c.get("retrieval_calls", 0), "prompt_tokens": c.get("prompt_tokens", 0)}
        for g in ("all", ds):
            groups.setdefault(g, {"flashrag": [], "marag": []})
            groups[g]["flashrag"].append(fs)
            groups[g]["marag"].append(ms)
    rows = []
    for g, d in groups.items():
        # whole-run walls only for the whole set: FlashRAG's pipeline.run (model, index and
        # warm-ups before it, not counted) and its child process; marag's whole `marag eval`
        # process (model load included)
        full = g == "all"
        rf = row("FlashRAG IRCOTPipeline", d["flashrag"], fr_res["timing"]["run_s"] if full else None)
        rf["process_wall_s"] = fr_res["timing"].get("process_wall_s") if full else None
        rm = row(args.marag_label, d["marag"], wall_m if full else None)
        rm["process_wall_s"] = wall_m if full else None
        for r in (rf, rm):
            r["group"] = g
        if rf["run_s"] and rm["run_s"]:
            rm["speed_ratio"] = rf["run_s"] / rm["run_s"]
        rows += [rf, rm]
    lines = [("| set | system | n | EM | F1 | acc | run s | s/q (run / n) | mean latency s/q | "
              "LLM calls/q | retrievals/q | prompt tok/q | speed: FlashRAG s/q / marag s/q |"),
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        sp = f"{r['speed_ratio']:.2f}x" if r.get("speed_ratio") else ""
        run = f"{r['run_s']:.0f}" if r["run_s"] else "-"
        spq = f"{r['run_s_per_q']:.2f}" if r["run_s_per_q"] else "-"
        lines.append(f"| {r['group']} | {r['system']} | {r['n']} | {r['em']:.1f} | {r['f1']:.1f} | "
                     f"{r['acc']:.1f} | {run} | {spq} | {r['s_per_q']:.2f} | {r['llm_calls']:.2f} | "
                     f"{r['retrieval_calls']:.2f} | {r['prompt_tokens']:.0f} | {sp} |")
    md = "\n".join(lines) + "\n"
    dis = sum(r["disagree_flashrag_metric"] for r in rows if r["group"] == "all")
    md += (f"\nScores: marag.metrics on both sides' predictions; they differ from each side's own "
           f"scores on {dis} (question, metric) pairs. Questions in one run only: {missing or 'none'}.\n")
    print(md)
    if args.md:
        with open(args.md, "w", encoding="utf-8") as f:
            f.write(md)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(rows, f, indent=2)


def main() -> None:
    if len(sys.argv) > 3 and sys.argv[1] == "--child":
        peer = load_peer(sys.argv[2])
        spec = json.loads(sys.argv[3])
        if spec["stage"] == "index":
            peer.child_build_index(spec)
        else:
            child_ircot(peer, spec)
        return
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="run FlashRAG's pipelines (FlashRAG venv)")
    r.add_argument("questions", help="marag question jsonl (id, question, golden_answers, dataset)")
    r.add_argument("out_dir")
    r.add_argument("--corpus", required=True, help="marag corpus jsonl (id, title, text)")
    r.add_argument("--model", required=True, help="a plain HF model folder")
    r.add_argument("--methods", type=lambda s: [x.strip() for x in s.split(",") if x.strip()],
                   default=["ircot"], help="comma list: ircot (search-o1: not in FlashRAG 0.1.2)")
    r.add_argument("--limit", type=int, default=0, help="the first N questions only (0: all)")
    r.add_argument("--topk", type=int, default=5, help="retrieval_topk: documents per search")
    r.add_argument("--max-iter", type=int, default=5,
                   help="IRCOTPipeline max_iter (class default 2; upstream's run_exp.py passes 5)")
    r.add_argument("--max-new-tokens", type=int, default=32, help="generation_params.max_tokens")
    r.add_argument("--max-input-len", type=int, default=4096,
                   help="generator_max_input_len (longer prompts are truncated by FlashRAG)")
    r.add_argument("--generator-model-name", default="coder-0.5b",
                   help="FlashRAG generator_model (a name with 'llama' or 'qwen' switches its code paths)")
    r.add_argument("--chat-link", action="store_true",
                   help="point FlashRAG at the shared script's 'Instruct'-named model link (only "
                        "changes anything for chat prompts; IRCoT's sets enable_chat=False)")
    r.add_argument("--torch-threads", type=int, default=0)
    r.add_argument("--extra-site", default=os.environ.get("PEER_EXTRA_SITE", ""))
    r.add_argument("--reuse-index", action="store_true", help="keep OUT's index if built already")
    r.add_argument("--keep-caches", action="store_true")
    r.add_argument("--peer-script", default=DEFAULT_PEER_SCRIPT)
    t = sub.add_parser("table", help="table of both sides (marag venv)")
    t.add_argument("--flashrag", required=True, help="OUT/<method> of the run sub-command")
    t.add_argument("--marag", required=True, help="marag eval run directory")
    t.add_argument("--marag-wall", help="json with run_s: marag's whole eval wall time")
    t.add_argument("--marag-label", default="marag ircot")
    t.add_argument("--marag-predictions", help="write a compact per-question jsonl of the marag run")
    t.add_argument("--md")
    t.add_argument("--json")
    args = ap.parse_args()
    cmd_run(args) if args.cmd == "run" else cmd_table(args)


if __name__ == "__main__":
    main()
