"""Episode runner: parallel episodes, logs, resume."""

from vical.run.results import EvalResult, RunManifest, load_results
from vical.run.runner import run_eval

__all__ = ["EvalResult", "RunManifest", "load_results", "run_eval"]
