"""Adapters from marag's own learning runs, loadable by a short name.

``--adapter qwen-jade`` (or ``llms.<name>.adapter: [qwen-jade]`` in a config) stands for the
LoRA folders a learning run committed under ``docs/results/`` of marag's source repository,
merged in the order the run trained them (a warm start, then the RL adapter trained over it).
Each name is tied to the model it was trained on; another model is refused, because an
adapter's deltas only mean something on the weights they were trained against. A path is
always a path: a folder holding an adapter wins over a name.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from marag.llm.base import LLMError


@dataclass(frozen=True, slots=True)
class TrainedAdapter:
    model: str  # the model name it was trained on
    folders: tuple[str, ...]  # relative to the repository root, merged in this order
    # a run that trained one role beside frozen ones (RRR's rewriter, BGM's bridge): the
    # registered names of the adapters its frozen roles ran with, so that a table row serves
    # them so (``folders`` then holds the trained role's warm start too, first)
    team: tuple[str, ...] = ()


TRAINED: dict[str, TrainedAdapter] = {
    "qwen-jade": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 2c: the plan-label SFT warm start, then PPO with JADE's reward
        # (docs/results/qwen-jade/README.md)
        folders=("docs/results/qwen-jade/sft", "docs/results/qwen-jade/rl"),
    ),
    "qwen-jade-reader": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 2d's warm start: the same plan-label SFT, then the answer generator's reading
        # labels (marag sft --recipe answers) over it (docs/results/qwen-jade/README.md)
        folders=("docs/results/qwen-jade/sft", "docs/results/qwen-jade/answers"),
    ),
    "qwen-mmoa": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 4: MMOA-RAG's SFT warm start (marag sft --recipe mmoa), then MAPPO-style PPO
        # of the rewriter, selector and generator over it (docs/results/qwen-mmoa/README.md)
        folders=("docs/results/qwen-mmoa/sft", "docs/results/qwen-mmoa/rl"),
    ),
    "qwen-search-r1": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # search-r1 on fold A: the tags' warm start (marag sft --recipe answers --method
        # search-r1); GRPO over it tied on development and was not kept
        # (docs/results/qwen-search-r1/README.md)
        folders=("docs/results/qwen-search-r1/sft",),
    ),
    "qwen-adaptive": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # Adaptive-RAG's classifier: LoRA SFT on silver labels from marag's own llm-only,
        # vanilla and ircot runs over a stratified 200 of fold A; it serves the classifier
        # role alone (docs/results/qwen-adaptive/README.md)
        folders=("docs/results/qwen-adaptive/classifier",),
    ),
    "qwen-retrobust": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # RetRobust's generator: LoRA SFT on fold A's gold answers, half of the examples
        # reading irrelevant passages (marag sft --recipe answers, sft.irrelevant_share 0.5)
        # (docs/results/qwen-retrobust/README.md)
        folders=("docs/results/qwen-retrobust/generator",),
    ),
    "qwen-rrr": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # Rewrite-Retrieve-Read's rewriter: PPO of mmoa.QR alone on fold A over MMOA-RAG's
        # SFT warm start, beside a generator frozen on that warm start (its team); the
        # iteration-3 checkpoint, chosen on development (docs/results/qwen-rrr/README.md)
        folders=("docs/results/qwen-mmoa/sft", "docs/results/qwen-rrr/rewriter"),
        team=("qwen-mmoa-sft",),
    ),
    "qwen-mao-arag": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # MAO-ARAG's planner: plan-label SFT on fold A, then PPO of the planner alone with
        # MAO-ARAG's reward (alpha 0) beside executors on the untrained model; it serves the
        # planner role alone (docs/results/qwen-mao-arag/README.md)
        folders=("docs/results/qwen-mao-arag/sft", "docs/results/qwen-mao-arag/rl"),
    ),
    "qwen-mmoa-sft": TrainedAdapter(
        model="qwen2.5-coder-0.5b",
        # run 4's warm start alone (MMOA-RAG Table 5's "SFT" row)
        folders=("docs/results/qwen-mmoa/sft",),
    ),
}


def repo_root() -> Path:
    """The source checkout this package runs from (``src/marag/llm`` is three levels down)."""
    return Path(__file__).resolve().parents[3]


def resolve_adapters(entries: list[str] | tuple[str, ...], model: str) -> list[str]:
    """``entries`` with each short name replaced by its folders; adapter folders are kept as
    given. An entry that is neither is an error that lists the names."""
    out: list[str] = []
    for entry in entries:
        spec = TRAINED.get(entry)
        if (Path(entry) / "adapter_config.json").is_file():
            out.append(entry)
            continue
        if spec is None:
            raise LLMError(f"adapter {entry!r}: no adapter folder there (no "
                           "adapter_config.json), and not the name of one of marag's trained "
                           f"adapters ({', '.join(sorted(TRAINED))})")
        if model != spec.model:
            raise LLMError(f"adapter {entry!r} was trained on {spec.model}, not {model}; "
                           f"use it with --model {spec.model}")
        folders = [repo_root() / f for f in spec.folders]
        missing = [f for f in folders if not (f / "adapter_config.json").is_file()]
        if missing:
            raise LLMError(
                f"adapter {entry!r} ships in marag's source repository ({', '.join(spec.folders)}), "
                f"and this installation has no {missing[0]}: run marag from a clone of the "
                "repository, or pass the adapter folders themselves with --adapter")
        out += [str(f) for f in folders]
    return out
