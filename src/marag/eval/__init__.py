"""Evaluation runs: concurrent, crash-safe, resumable; metrics recomputable from traces.

Public API: ``evaluate`` (run a method over questions into a run directory), ``summarize``
(traces -> metrics dict), ``load_run`` (read a run directory back).
"""

from __future__ import annotations

from marag.eval.load import RunData, load_run
from marag.eval.rundir import RunDirError, open_run_dir, recover_traces
from marag.eval.runner import EvalResult, MethodFn, evaluate, failed_trace, prepare_run
from marag.eval.summary import summarize, workflow_type

__all__ = [
    "EvalResult",
    "MethodFn",
    "RunData",
    "RunDirError",
    "evaluate",
    "failed_trace",
    "load_run",
    "open_run_dir",
    "prepare_run",
    "recover_traces",
    "summarize",
    "workflow_type",
]
