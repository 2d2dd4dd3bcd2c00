"""The Hugging Face dataset folder of the benchmark: build, verify, load, push."""

from vical.dataset.build import (
    build_dataset,
    load_dataset_folder,
    push_dataset,
    row_to_task,
    verify_dataset,
)

__all__ = ["build_dataset", "load_dataset_folder", "push_dataset", "row_to_task", "verify_dataset"]
