"""Build the Hugging Face dataset folder of the benchmark, verify it, load it back.

Layout of a built folder::

    README.md                          dataset card (YAML header with configs)
    data/test-00000-of-00001.parquet   one row per task (the split is "test")
    videos/<sha256>.mp4                every distinct rendered demo clip
    manifest.json                      sha256 and size of every other file

The benchmark is an evaluation set, so its one split is ``test``. A row holds
the task's fields (id, environment, rules, action names, horizon, frame skip,
tags, seed, initial skip, start sequence and its origin, ...), its full ``TaskSpec``
as JSON (``task_json``, which round-trips), its demo clips (ids, labels, frame
counts, sources and origins) with the MP4s as ``datasets.Video`` values and its start frame
as a ``datasets.Image`` (PNG).

Media columns are Arrow structs ``{bytes, path}`` with the feature types in the
parquet schema's ``huggingface`` metadata, the layout ``datasets`` writes
itself, so readers of those features (the Hub's viewer among them) see images
and videos rather than bytes. The
clips are stored as ``Video(decode=False)``: decoding a ``Video`` needs
torchcodec (and torch), which the benchmark does not depend on, so a row gives
``{"bytes": <mp4>, "path": "videos/<sha256>.mp4"}`` and the bytes decode with
imageio (``vical.demos.render.decode_mp4``); with torchcodec installed,
``ds.cast_column("demo_videos", List(Video()))`` turns them into decoders.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path
from string import Template
from typing import TYPE_CHECKING, Any

from vical.run.results import file_sha256
from vical.spec import TaskSpec, get_task, select_tasks

if TYPE_CHECKING:
    # datasets ships no type information: these are Any to mypy, named for the reader
    import numpy as np
    import numpy.typing as npt
    from datasets import Dataset, DatasetInfo, Features

# the card template ships inside the package so that an installed vical can build the card
CARD_TEMPLATE = Path(__file__).with_name("card_template.md")
SPLIT = "test"
DATA_FILE = f"data/{SPLIT}-00000-of-00001.parquet"
MANIFEST = "manifest.json"


def _features() -> Features:
    from datasets import Features, Image, List, Value, Video

    s = Value("string")
    return Features(
        {
            "id": s,
            "env": s,
            "variant": s,
            "kind": s,
            "name": s,
            "paper_id": s,
            "family": s,
            "sim_id": s,
            "package": s,
            "rules_basic": s,
            "rules_detailed": s,
            "actions": List(s),
            "max_steps": Value("int32"),
            "frame_skip": Value("int32"),
            "action_steps": Value("int32"),
            "seed": Value("int64"),
            "initial_skip": Value("int32"),
            "init_actions": List(s),
            "init_source": s,
            "init_origin": s,
            "tags_types": List(s),
            "tags_memory": s,
            "tags_dynamics": s,
            "scoring_family": s,
            "task_json": s,
            "demo_ids": List(s),
            "demo_labels": List(s),
            "demo_n_frames": List(Value("int32")),
            "demo_sources": List(s),
            "demo_origins": List(s),
            "demo_videos": List(Video(decode=False)),
            "demo_frames_total": Value("int32"),
            "start_frame": Image(),
            "start_frame_sha256": s,
        }
    )


def _png(frame: npt.NDArray[np.uint8]) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(frame, "RGB").save(buf, format="PNG", optimize=False, compress_level=6)
    return buf.getvalue()


def task_row(task: TaskSpec, videos_dir: Path | None = None) -> dict[str, Any]:
    """One dataset row for a task; writes its demo MP4s into ``videos_dir`` when given."""
    from vical.demos import load_demo_package
    from vical.envs import frame_sha256, make_env

    env = make_env(task)
    try:
        start = env.reset()
    finally:
        env.close()
    videos = load_demo_package(task)
    for v in videos:
        if videos_dir is not None:
            p = videos_dir / f"{v.sha256}.mp4"
            if not p.exists():
                # named by content: workers writing the same clip write the same bytes
                part = p.with_name(f".{p.name}.{os.getpid()}")
                part.write_bytes(v.mp4)
                os.replace(part, p)
    e, var = task.env, task.variant
    return {
        "id": task.id,
        "env": e.env,
        "variant": var.variant,
        "kind": var.kind,
        "name": e.name,
        "paper_id": e.paper_id,
        "family": e.family,
        "sim_id": e.sim_id,
        "package": e.package,
        "rules_basic": e.rules.basic,
        "rules_detailed": e.rules.detailed,
        "actions": task.action_names,
        "max_steps": task.max_steps,
        "frame_skip": e.frame_skip,
        "action_steps": e.action_steps,
        "seed": var.seed,
        "initial_skip": var.initial_skip,
        "init_actions": list(var.init_actions),
        "init_source": var.init_source,
        "init_origin": var.init_origin,
        "tags_types": list(e.tags.types),
        "tags_memory": e.tags.memory,
        "tags_dynamics": e.tags.dynamics,
        "scoring_family": e.scoring.family,
        "task_json": task.model_dump_json(),
        "demo_ids": [c.id for c in var.demos],
        "demo_labels": [v.label for v in videos],
        "demo_n_frames": [v.n_frames for v in videos],
        "demo_sources": [c.source for c in var.demos],
        "demo_origins": [c.origin for c in var.demos],
        # the path names the copy under videos/; the bytes make the parquet self-contained
        "demo_videos": [{"bytes": v.mp4, "path": f"videos/{v.sha256}.mp4"} for v in videos],
        "demo_frames_total": sum(v.n_frames for v in videos),
        "start_frame": {"bytes": _png(start), "path": None},
        "start_frame_sha256": frame_sha256(start),
    }


def row_to_task(row: dict[str, Any]) -> TaskSpec:
    """Rebuild the TaskSpec of a dataset row, checking the flat fields agree with it."""
    task = TaskSpec.model_validate_json(row["task_json"])
    checks = {
        "id": task.id,
        "env": task.env.env,
        "variant": task.variant.variant,
        "actions": task.action_names,
        "max_steps": task.max_steps,
        "frame_skip": task.env.frame_skip,
        "seed": task.variant.seed,
        "initial_skip": task.variant.initial_skip,
        "init_actions": list(task.variant.init_actions),
        "tags_types": list(task.env.tags.types),
        "rules_basic": task.env.rules.basic,
        "demo_ids": [c.id for c in task.variant.demos],
        "init_origin": task.variant.init_origin,
        "demo_origins": [c.origin for c in task.variant.demos],
    }
    for k, v in checks.items():
        if row[k] != v:
            raise ValueError(
                f"row {row['id']}: field {k} = {row[k]!r} disagrees with task_json ({v!r})"
            )
    return task


def write_manifest(root: Path) -> dict[str, Any]:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name != MANIFEST)
    entries = {
        p.relative_to(root).as_posix(): {"sha256": file_sha256(p), "bytes": p.stat().st_size}
        for p in files
    }
    manifest = {"format": "vical-dataset-manifest/1", "files": entries}
    (root / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return manifest


def verify_dataset(root: Path | str) -> list[str]:
    """Problems found against the manifest (empty list: the folder is intact)."""
    root = Path(root)
    mp = root / MANIFEST
    if not mp.is_file():
        return [f"{mp}: manifest missing"]
    manifest = json.loads(mp.read_text())["files"]
    problems = []
    for rel, meta in sorted(manifest.items()):
        p = root / rel
        if not p.is_file():
            problems.append(f"{rel}: missing")
        elif file_sha256(p) != meta["sha256"]:
            problems.append(f"{rel}: sha256 differs from the manifest")
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if (
            p.is_file()
            and p.name != MANIFEST
            and rel not in manifest
            and not rel.startswith(".cache")
        ):
            problems.append(f"{rel}: not in the manifest")
    return problems


def write_parquet(
    rows: list[dict[str, Any]], path: Path, features: Features | None = None
) -> DatasetInfo:
    """Write the rows as the split's parquet file; return its ``datasets.DatasetInfo``.

    ``features``: the configuration's features (default: the task rows').

    The Arrow table is made straight from the features' schema (which carries their
    ``huggingface`` metadata), not through ``Dataset.from_list``: encoding a media value
    whose ``path`` names an existing file drops its bytes, and the relative
    ``videos/<sha256>.mp4`` may well exist in the working directory.
    """
    import datasets
    import pyarrow as pa
    import pyarrow.parquet as pq

    features = _features() if features is None else features
    table = pa.Table.from_pylist(rows, schema=features.arrow_schema)
    ds = datasets.Dataset(datasets.table.InMemoryTable(table))
    if ds.features != features:  # the schema metadata did not carry the feature types
        raise RuntimeError(f"parquet features differ from the declared ones: {ds.features}")
    ds.to_parquet(str(path))
    # the sizes are those of the file read back, as datasets measures them when it loads it
    # pyarrow's inline types leave read_table unannotated (unused-ignore: the package's
    # non-strict mypy config does not report the call)
    table_back = pq.read_table(path)  # type: ignore[no-untyped-call, unused-ignore]
    back = datasets.table.table_cast(table_back, features.arrow_schema)
    split = datasets.SplitInfo(name=SPLIT, num_bytes=back.nbytes, num_examples=back.num_rows)
    return datasets.DatasetInfo(
        features=features,
        splits=datasets.SplitDict({SPLIT: split}),
        download_size=path.stat().st_size,
        dataset_size=back.nbytes,
    )


def provenance_table(tasks: list[TaskSpec]) -> str:
    """The card's provenance table: per environment and over all, how many start
    sequences are the paper's, generated or human-recorded, and how many distinct demo
    clips come from search, scripted or human players (counted from the task data by
    :func:`vical.spec.origin_counts`)."""
    from vical.spec import CLIP_ORIGINS, INIT_ORIGINS, origin_counts

    by_env: dict[str, list[TaskSpec]] = {}
    for t in tasks:
        by_env.setdefault(t.env.env, []).append(t)
    head = (
        ["environment", "tasks"]
        + [f"starts: {o}" for o in INIT_ORIGINS]
        + [f"clips: {o}" for o in CLIP_ORIGINS]
    )
    lines = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join(["---"] + ["--:"] * (len(head) - 1)) + "|",
    ]

    def row(name: str, ts: list[TaskSpec]) -> str:
        c = origin_counts(ts)
        cells = [name, str(len(ts))]
        cells += [str(c["starts"][o]) for o in INIT_ORIGINS]
        cells += [str(c["clips"][o]) for o in CLIP_ORIGINS]
        return "| " + " | ".join(cells) + " |"

    lines += [row(env, ts) for env, ts in sorted(by_env.items())]
    lines.append(row("**all**", tasks))
    return "\n".join(lines)


def provenance_summary(tasks: list[TaskSpec]) -> str:
    """The card's provenance in a sentence, counted from the tasks' data."""
    from vical.spec import origin_counts

    c = origin_counts(tasks)
    st, cl = c["starts"], c["clips"]
    return textwrap.fill(
        f"Of the {sum(st.values())} start sequences, {st['paper']} are the paper's (its "
        f"Figure 5), {st['generated']} generated by seeded recipes and {st['human']} "
        f"recorded by people; of the {sum(cl.values())} distinct demonstration clips, "
        f"{cl['search']} come from search experts, {cl['scripted']} from scripted programs "
        f"and {cl['human']} from people.",
        width=80,
        break_on_hyphens=False,
    )


def render_card(
    stats: dict[str, Any],
    n_tasks: int,
    info: DatasetInfo | None = None,
    template: Path = CARD_TEMPLATE,
    wm_info: DatasetInfo | None = None,
    tasks: list[TaskSpec] | None = None,
) -> str:
    """The dataset card: ``vical/dataset/card_template.md`` filled with the statistics.

    ``tasks``: the folder's tasks, whose start and clip origins fill the provenance
    table (default: every task).

    ``info`` (the ``datasets.DatasetInfo`` that :func:`write_parquet` returns) becomes
    the header's ``dataset_info`` block (features, splits, sizes), after ``configs``.
    ``wm_info``: the same for the world-model configuration ``wm``, when the folder
    has one (its config entry, its ``dataset_info`` and a section are then added).
    """
    from vical.demos.stats import format_stats, stats_table

    card_tasks = select_tasks(None) if tasks is None else tasks
    tpl = Template(template.read_text())
    text = tpl.substitute(
        n_tasks=n_tasks,
        data_file=DATA_FILE,
        split=SPLIT,
        stats_table=stats_table(stats),
        stats_details=format_stats(stats, table=False),
        size_category="n<1K",
        provenance_table=provenance_table(card_tasks),
        provenance_summary=provenance_summary(card_tasks),
    )
    if info is None:
        return text
    import datasets
    import yaml
    from huggingface_hub import DatasetCardData

    head, sep, body = text.partition("\n---\n")
    if not (head.startswith("---\n") and sep):
        raise ValueError(f"{template}: the card must open with a YAML header between '---' lines")
    meta = yaml.safe_load(head[4:])
    if "dataset_info" in meta:
        raise ValueError(f"{template}: dataset_info is written by the build, not the template")
    card_data = DatasetCardData()
    infos = {"default": info}
    if wm_info is not None:
        from vical.wm.hf import WM_CONFIG, WM_DATA_FILE

        infos[WM_CONFIG] = wm_info
        meta["configs"].append(
            {"config_name": WM_CONFIG, "data_files": [{"split": SPLIT, "path": WM_DATA_FILE}]}
        )
        body += _WM_SECTION.format(
            split=SPLIT, path=WM_DATA_FILE, n=wm_info.splits[SPLIT].num_examples
        )
    datasets.info.DatasetInfosDict(infos).to_dataset_card_data(card_data)
    meta["dataset_info"] = card_data["dataset_info"]
    header = yaml.safe_dump(meta, sort_keys=False, allow_unicode=True, width=100)
    return f"---\n{header}---\n{body}"


_WM_SECTION = """
## World-model cases (configuration `wm`)

`{path}` ({n} rows, split `{split}`; `load_dataset(DIR, "wm")`): one row per
world-model case. A case gives the last frames the simulator showed
(`context_frames`, with the actions between them in `context_actions`), a fixed
`intervention` (canonical action names) and the simulator's true frame after
each of its actions (`truth_frames`), with its specification: the initial
condition, the permitted intervention, the required change and the protected
state (facts read from simulator state, as JSON) and the evidence rule. Cases of
one context (`group`) differ only in their intervention and lead to visibly
different outcomes. `case_json` holds the whole case (`vical.wm.hf.row_to_case`).
"""


def _task_row_job(job: tuple[str, str]) -> dict[str, Any]:
    task_id, videos_dir = job
    return task_row(get_task(task_id), Path(videos_dir))


def task_rows(
    tasks: list[TaskSpec],
    videos_dir: Path,
    workers: int | None = None,
    on_abort: Callable[[], None] | None = None,
) -> list[dict[str, Any]]:
    """:func:`task_row` for every task, in task order, on ``workers`` processes
    (default: one per core) through :func:`vical.run.pool.run_pool`, the pool that
    evaluation and verification use. A task that fails stops the build, naming it.
    ``on_abort`` runs when a second signal makes the process exit at once."""
    from vical.run.pool import run_pool

    rows: dict[str, dict[str, Any]] = {}

    def on_result(job: tuple[str, str], row: Any, error: BaseException | None) -> bool:
        if error is not None:
            raise RuntimeError(f"{job[0]}: {type(error).__name__}: {error}") from error
        rows[job[0]] = row
        return True

    jobs = [(t.id, str(videos_dir)) for t in tasks]
    n = max(1, min(workers or os.cpu_count() or 1, len(jobs) or 1))
    run_pool(_task_row_job, jobs, n, on_result, on_abort=on_abort)
    return [rows[t.id] for t in tasks]


def build_dataset(
    out: Path | str,
    patterns: str | None = None,
    wm_cases: Path | str | None = None,
    workers: int | None = None,
) -> Path:
    """Build the dataset folder for the selected tasks (all by default) at ``out``.

    Rows are made on ``workers`` processes (default: one per core; :func:`task_rows`).

    ``wm_cases``: a world-model case folder (``vical wm build``) to publish as the
    second configuration, ``wm`` (``wm/test-00000-of-00001.parquet``).

    Writes into a temporary sibling folder and renames it into place, so a
    finished folder is never half-written. Rendering goes through the demo cache.

    SIGINT/SIGTERM (when called from the main thread) raise
    :class:`vical.run.pool.Interrupted` after removing the temporary folder;
    ``out`` is then left as it was. A signal that arrives during the final
    rename is ignored, since the folder is complete by then. A second signal
    exits the process at once with status 130, also without leftovers.
    """
    from vical.demos.stats import demo_stats

    out = Path(out)
    tasks = select_tasks(patterns)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    umask = os.umask(0o022)
    os.umask(umask)
    os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it private; the dataset is not
    old = out.parent / f"{tmp.name}-old"
    from vical.run.pool import Interrupted, SignalScope

    # first signal: KeyboardInterrupt here, then Interrupted once tmp is removed; a
    # second: remove tmp and exit at once; never during the final rename
    def remove_tmp() -> None:
        shutil.rmtree(tmp, ignore_errors=True)

    with SignalScope(remove_tmp) as stop:
        try:
            (tmp / "videos").mkdir()
            (tmp / "data").mkdir()
            rows = task_rows(tasks, tmp / "videos", workers, on_abort=remove_tmp)
            info = write_parquet(rows, tmp / DATA_FILE)
            wm_info = None if wm_cases is None else _write_wm(Path(wm_cases), tmp)
            stats = demo_stats(tasks, resolutions=True)
            card = render_card(stats, len(tasks), info, wm_info=wm_info, tasks=tasks)
            (tmp / "README.md").write_text(card)
            (tmp / "stats.json").write_text(json.dumps(stats, indent=1, sort_keys=True) + "\n")
            write_manifest(tmp)
            with stop.deferred():
                # move the previous build aside first: out is never half-deleted
                if out.exists():
                    os.replace(out, old)
                os.replace(tmp, out)
        except KeyboardInterrupt:
            if stop.received is None:
                raise
            raise Interrupted(stop.received) from None
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
            shutil.rmtree(old, ignore_errors=True)
    return out


def _write_wm(cases_dir: Path, root: Path) -> DatasetInfo:
    """The world-model configuration's parquet file from a case folder; its DatasetInfo."""
    from vical.wm.cases import is_held_out, load_cases
    from vical.wm.hf import WM_DATA_FILE, case_row, wm_features

    if is_held_out(cases_dir):
        raise ValueError(f"{cases_dir}: held-out world-model cases are never published")

    rows = [case_row(c, cases_dir) for c in load_cases(cases_dir)]
    (root / WM_DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    return write_parquet(rows, root / WM_DATA_FILE, wm_features())


def load_dataset_folder(
    root: Path | str, offline: bool = True, config: str | None = None
) -> Dataset:
    """``datasets.load_dataset`` on a built folder (offline by default); its test split.

    ``config``: ``"wm"`` for the world-model cases (default: the tasks)."""
    if offline:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
    import datasets

    # Read through a private, throw-away cache: the shared Hugging Face cache keys a
    # local folder by its name and config, so a folder rebuilt at the same path could
    # be read back as its old contents (seen: a 342-task folder loading as 25 rows).
    with tempfile.TemporaryDirectory(prefix="vical-ds-cache-") as cache:
        return datasets.load_dataset(
            str(root), config, split=SPLIT, cache_dir=cache, keep_in_memory=True
        )


def push_dataset(root: Path | str, repo: str, dry_run: bool = False) -> list[str]:
    """Upload the folder to the Hub as a dataset repo; with ``dry_run`` only list the files."""
    root = Path(root)
    problems = verify_dataset(root)
    if problems:
        raise ValueError(
            "refusing to push a folder that fails verification: " + "; ".join(problems)
        )
    files = sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())
    if dry_run:
        return files
    from huggingface_hub import HfApi

    HfApi().upload_folder(folder_path=str(root), repo_id=repo, repo_type="dataset")
    return files
