"""Episode runner: parallel episodes, logs, resume."""

from vical.run.results import EvalResult, RunManifest, load_results
from vical.run.runner import RunOptions, run_eval

__all__ = ["EvalResult", "RunManifest", "RunOptions", "load_results", "run_eval"]
