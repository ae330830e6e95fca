"""``marag sft``: supervised warm start from traces (rejection sampling), plan labels, or a recipe
of golden-answer labels (MMOA-RAG's, or the answer generator's reading labels), or best-of-n
self-distillation (the model's own best sample of each question: marag.train.self_distill)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from marag.commands.options import add_run_options, load_run_config, run_overrides

HELP = "supervised fine-tuning of chosen roles (warm start before marag train)"


def register(sub: Any) -> None:
    p = sub.add_parser("sft", help=HELP, description=HELP + ". The adapter goes to OUT/policy; "
                       "use it with --adapter, or as llms.default.adapter of a training config.")
    add_run_options(p, index_help="retrieval index (for --recipe)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--traces", nargs="+", metavar="FILE",
                     help="traces.jsonl files (marag eval runs, marag train rollouts): keep the "
                          "valid steps of traces with F1 >= sft.min_f1")
    src.add_argument("--recipe", choices=["mmoa", "answers", "self-distill"],
                     help="mmoa: selector and generator labels built from questions, their "
                          "golden answers and their top method.candidates (K = 10) "
                          "retrieved documents (MMOA-RAG S4.3); no rewriter labels (use "
                          "--traces with sft.roles=[mmoa.QR]). answers: the answer generator "
                          "(AG) of jade, mao-arag or vanilla reading each question's top "
                          "method.top_k documents, labelled with a golden answer they "
                          "support (sft.answer_evidence); stack it over a --plans adapter "
                          "with --adapter; with --method search-r1, two calls in its tags "
                          "(search for the question, answer from its top "
                          "method.search_top_k passages). self-distill: best-of-n -- the current model "
                          "(with any --adapter) runs the method --samples times on each "
                          "question at --temperature (samples kept in OUT/samples.jsonl; "
                          "the same command resumes without redrawing them); each "
                          "question's best sample (highest F1, then fewest malformed "
                          "steps, then shortest, then first) gives its valid steps when "
                          "its F1 >= sft.min_f1")
    src.add_argument("--plans", nargs="+", metavar="PLAN=FILE",
                     help="plan labels for a planner method (jade, mao-arag): each PLAN "
                          "(e.g. 'R, AG') with the traces.jsonl of a run that executed "
                          "exactly that plan on the same questions (vanilla runs 'R, AG', "
                          "llm-only runs 'AG', jade with --set 'method.root_plan=[QDS]' "
                          "--set 'method.sub_plan=[R, AG]' runs 'QDS'); each question's "
                          "best-scoring plan is the planner's label and its trace's steps "
                          "the executors' examples (F1 >= sft.min_f1; ties go to the plan "
                          "listed first). With --method "
                          "adaptive-rag: A=FILE B=FILE C=FILE, runs of llm-only, vanilla and "
                          "ircot, Adaptive-RAG's silver labels for its classifier")
    p.add_argument("--dataset", help="question file for --recipe")
    p.add_argument("--samples", type=int, default=4, metavar="N",
                   help="--recipe self-distill: samples per question (default 4)")
    p.add_argument("--temperature", type=float, default=1.0, metavar="T",
                   help="--recipe self-distill: sampling temperature, above 0 (default 1.0)")
    p.add_argument("--exclude-ids", metavar="FILE",
                   help="question ids never to train on, one per line (e.g. a training run's "
                        "splits/heldout_ids.txt, so the warm start does not see held-out "
                        "answers)")
    p.add_argument("--out", required=True, metavar="DIR")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from marag.api import build_context
    from marag.train import sft
    from marag.types import Trace, read_jsonl

    config = load_run_config(args, run_overrides(args) + list(args.overrides))
    cfg = config.sft
    from marag.methods import check_trainable

    try:  # before any sample is drawn or model loaded
        check_trainable(config.method.name)
    except ValueError as e:
        print(f"marag sft: {e}", file=sys.stderr)
        return 2
    try:
        banned = set(Path(args.exclude_ids).read_text().split()) if args.exclude_ids else set()
    except OSError as e:
        print(f"marag sft: --exclude-ids: {e}", file=sys.stderr)
        return 2
    if args.traces:
        try:
            traces = [t for f in args.traces for t in read_jsonl(f, Trace) if t.id not in banned]
        except (OSError, ValueError) as e:
            print(f"marag sft: --traces: {e}", file=sys.stderr)
            return 2
        examples = sft.examples_from_traces(traces, cfg.roles, cfg.min_f1)
        ctx = build_context(config, with_retriever=False, purpose="training")
    elif args.plans and config.method.name == "adaptive-rag":
        code, examples = _adaptive_examples(args, config, banned)
        if code:
            return code
        ctx = build_context(config, with_retriever=False, purpose="training")
    elif args.plans:
        from marag.roles import role_for

        if config.method.name not in ("jade", "mao-arag"):
            print(f"marag sft: --plans labels a planner; method {config.method.name!r} has "
                  "none (use --method jade or mao-arag)", file=sys.stderr)
            return 2
        runs = []
        for item in args.plans:
            plan, sep, path = item.partition("=")
            if not sep or not plan.strip() or not path:
                print(f"marag sft: --plans wants PLAN=FILE, got {item!r}", file=sys.stderr)
                return 2
            try:
                traces = [t for t in read_jsonl(path, Trace) if t.id not in banned]
            except (OSError, ValueError) as e:
                print(f"marag sft: --plans {plan.strip()}: {e}", file=sys.stderr)
                return 2
            runs.append((plan.strip(), traces))
        m = config.method

        def same_prompt(role: str, method: str) -> bool:
            variants = sft.role_variants(config, role)
            return role_for(role, m.prompts, m.name, variants) == role_for(
                role, m.prompts, method, variants)

        planner = role_for("planner", m.prompts, m.name, sft.role_variants(config, "planner"))
        try:
            examples = sft.examples_best_plan(runs, planner, cfg.roles, cfg.min_f1,
                                              allow_decompose=m.max_depth > 0,
                                              same_prompt=same_prompt)
        except ValueError as e:
            print(f"marag sft: {e}", file=sys.stderr)
            return 2
        ctx = build_context(config, with_retriever=False, purpose="training")
    else:
        if not args.dataset:
            print("marag sft: --recipe needs --dataset", file=sys.stderr)
            return 2
        from marag.datasets import load_questions

        if args.recipe == "answers":  # before the model loads
            try:
                sft.check_answer_method(config.method.name)
            except ValueError as e:
                print(f"marag sft: {e}", file=sys.stderr)
                return 2
        if args.recipe == "self-distill" and (args.samples < 1 or not args.temperature > 0):
            print("marag sft: --recipe self-distill needs --samples >= 1 and --temperature "
                  "> 0", file=sys.stderr)
            return 2
        ctx = build_context(config, with_retriever=None if args.recipe == "self-distill"
                            else True, purpose="training")
        questions = load_questions(args.dataset)
        questions = [q for q in questions if q.id not in banned]
        if cfg.max_examples:
            from marag.datasets import sample

            questions = sample(questions, cfg.max_examples, seed=cfg.seed)
        try:
            if args.recipe == "mmoa":
                examples = asyncio.run(sft.examples_mmoa(questions, ctx.retriever, config))
            elif args.recipe == "self-distill":
                from marag.train.self_distill import self_distill

                examples, tally = self_distill(questions, ctx, args.samples, args.temperature,
                                               Path(args.out), progress=not args.no_progress)
                print(f"{tally['questions']} questions x {args.samples} samples "
                      f"({tally['drawn']} drawn in this call): best sample kept for "
                      f"{tally['kept']} (F1 >= {cfg.min_f1}), {tally['dropped']} dropped")
            else:
                tally: dict[str, int] = {}
                if config.method.name == "search-r1":  # its search call and answer call
                    from marag.train.search_r1_labels import examples_search_r1

                    labels = examples_search_r1
                else:
                    labels = sft.examples_answers
                examples = asyncio.run(labels(questions, ctx.retriever, config, tally))
                print(f"{len(questions)} questions: " + ", ".join(
                    f"{k} {v}" for k, v in tally.items()))
        except ValueError as e:
            print(f"marag sft: {e}", file=sys.stderr)
            return 2
        if cfg.roles:
            examples = [e for e in examples if e.role in cfg.roles]
    print(f"{len(examples)} examples: " + ", ".join(
        f"{r} {sum(e.role == r for e in examples)}" for r in sorted({e.role for e in examples})))
    from marag.llm.trainable import TrainableBackend

    backend = ctx.llms[config.backend_for(examples[0].role if examples else "default")]
    if not isinstance(backend, TrainableBackend):
        print("marag sft: the roles must run on the local hf backend", file=sys.stderr)
        return 2
    try:  # before record() rewrites the folder's config of a run it cannot continue
        found, _ = sft.check_out(Path(args.out), backend, examples, cfg)
    except ValueError as e:
        print(f"marag sft: {e}", file=sys.stderr)
        return 2
    done = 0
    if found is not None:
        import json

        done = int(json.loads((found / "state.json").read_text())["iteration"])
        print(f"resuming from {found} (step {done} done)")
    record(Path(args.out), config, examples)
    try:
        rows = sft.train_sft(backend, examples, cfg, Path(args.out),
                             progress=not args.no_progress)
    except ValueError as e:
        print(f"marag sft: {e}", file=sys.stderr)
        return 2
    last = f", last loss {rows[-1]['loss']:.4f}" if rows else ""
    print(f"{len(rows)} steps ({max(0, len(rows) - done)} in this call){last}; adapter in "
          f"{Path(args.out) / 'policy'}")
    return 0


def record(out: Path, config: Any, examples: list[Any]) -> None:
    """What made this adapter: the config as resolved (config.yaml) and the command line,
    versions and example counts per role (run.json), written before training starts."""
    import json

    import yaml

    from marag.eval.identity import run_info

    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(
        yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False), encoding="utf-8")
    counts = {r: sum(e.role == r for e in examples) for r in sorted({e.role for e in examples})}
    (out / "run.json").write_text(json.dumps(run_info(examples=counts), indent=1) + "\n",
                                  encoding="utf-8")


def _adaptive_examples(args: argparse.Namespace, config: Any, banned: set[str]
                       ) -> tuple[int, list[Any]]:
    """``--method adaptive-rag --plans A=FILE B=FILE C=FILE``: Adaptive-RAG's silver labels
    from runs of llm-only (A), vanilla (B) and ircot (C) on the training questions."""
    from marag.roles import role_for
    from marag.train.adaptive_labels import examples_adaptive
    from marag.types import Trace, read_jsonl

    runs = {}
    for item in args.plans:
        label, sep, path = item.partition("=")
        if not sep or label.strip() not in ("A", "B", "C") or not path:
            print(f"marag sft: adaptive-rag wants --plans A=FILE B=FILE C=FILE (llm-only, "
                  f"vanilla, ircot runs), got {item!r}", file=sys.stderr)
            return 2, []
        try:
            runs[label.strip()] = [t for t in read_jsonl(path, Trace) if t.id not in banned]
        except (OSError, ValueError) as e:
            print(f"marag sft: --plans {label.strip()}: {e}", file=sys.stderr)
            return 2, []
    m = config.method
    classifier = role_for("adaptive.classify", m.prompts, m.name)
    examples, tally = examples_adaptive(runs, classifier, config.sft.min_f1)
    print("silver labels: " + ", ".join(f"{k} {v}" for k, v in tally.items()))
    return 0, examples
