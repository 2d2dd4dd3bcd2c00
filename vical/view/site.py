"""The viewer as a tree of files: served by ``vical view``, written by ``--export``.

The page loads everything by relative path, and its data as small scripts
(``data/*.js``, each calling ``vicalData(name, value)``) rather than by
``fetch``: a browser refuses ``fetch`` on ``file://`` pages but runs scripts, so
one page works both from the local server and from an exported folder opened
from disk. The tree::

    index.html                          the page
    static/view.js  static/view.css     its script and style
    data/index.js                       runs and the task × runs table
    data/ep/<run>/<episode>.js          one episode: turns, texts, scores, demos
    frames/<run>/<episode>/<i>.png      frame i of an episode (saved or replayed)
    demos/<env>__<variant>/<i>.mp4      demonstration video i of a task

The server answers a path only when it asks for it (one episode at a time);
the export writes every path, episode by episode.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

from vical.run.results import EvalResult
from vical.view.data import Catalog, ViewError, episode_frames
from vical.view.web import HttpError, Reply, asset

_PACKAGE = "vical.view"
EPISODE_DATA = re.compile(r"^data/ep/(r\d+)/([A-Za-z0-9_.\-]+)\.js$")
_FRAME = re.compile(r"^frames/(r\d+)/([A-Za-z0-9_.\-]+)/(\d+)\.png$")
_DEMO = re.compile(r"^demos/([a-z0-9_\-]+)__([A-Za-z0-9_.\-]+)/(\d+)\.mp4$")
STATIC = ("view.js", "view.css")


def data_script(name: str, value: object) -> bytes:
    """``vicalData("<name>", <json>);`` with ``<`` escaped, so no text can end a script."""
    body = json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")
    return f"vicalData({json.dumps(name)},{body});\n".encode()


def page(catalog: Catalog, path: str) -> Reply:
    """The file at ``path`` (relative, no leading slash) of the viewer's tree."""
    try:
        if path in ("", "index.html"):
            return asset(_PACKAGE, "index.html")
        if path.startswith("static/"):
            return asset(_PACKAGE, path.removeprefix("static/"))
        if path == "data/index.js":
            return 200, "text/javascript; charset=utf-8", data_script("index", catalog.index())
        m = EPISODE_DATA.match(path)
        if m:
            key, ep = m.groups()
            value = catalog.episode(key, ep)
            return 200, "text/javascript; charset=utf-8", data_script(f"ep/{key}/{ep}", value)
        m = _FRAME.match(path)
        if m:
            key, ep, i = m.groups()
            return 200, "image/png", catalog.frame(key, ep, int(i))
        m = _DEMO.match(path)
        if m:
            env, variant, i = m.groups()
            return 200, "video/mp4", catalog.demo_mp4(f"{env}/{variant}", int(i))
    except (ViewError, KeyError, ValueError) as e:  # unknown run, episode, task or index
        raise HttpError(404, str(e)) from None
    raise HttpError(404, f"no page {path}")


def _write_frames(job: tuple[str, str, str]) -> int:
    """Write one episode's frames (saved, or replayed) as ``<dest>/<i>.png``; how many."""
    folder, result_json, dest = job
    pngs = episode_frames(Path(folder), EvalResult.model_validate_json(result_json))
    Path(dest).mkdir(parents=True, exist_ok=True)
    for i, png in enumerate(pngs):
        (Path(dest) / f"{i}.png").write_bytes(png)
    return len(pngs)


def export(
    catalog: Catalog,
    out: Path,
    on_episode: Callable[[int, int, str], None] | None = None,
    workers: int = 1,
) -> Path:
    """Write the whole tree under ``out`` (replaced if it is an earlier export).

    Writes into ``out.partial`` and renames it into place at the end, so an
    interrupted export leaves the previous one whole. Frames that must be
    replayed are the slow part: ``workers`` processes replay episodes in
    parallel (:func:`vical.run.pool.run_pool`; Ctrl-C stops them and removes the
    partial folder). Returns ``out/index.html``.
    """
    from vical.run.pool import run_pool

    out = Path(out)
    if out.exists() and not (out / "index.html").is_file() and any(out.iterdir()):
        raise ViewError(f"{out} exists and is not a viewer export; choose an empty folder")
    tmp = out.with_name(out.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)

    def put(rel: str, data: bytes) -> None:
        p = tmp / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data)

    try:
        for rel in ("index.html", *(f"static/{n}" for n in STATIC)):
            put(rel, page(catalog, rel)[2])
        put("data/index.js", page(catalog, "data/index.js")[2])
        jobs = []
        tasks_done: set[str] = set()
        for run in catalog.runs:
            for ep in sorted(run.results):
                detail = catalog.episode(run.key, ep)
                put(f"data/ep/{run.key}/{ep}.js", data_script(f"ep/{run.key}/{ep}", detail))
                folder = run.folder / "episodes" / ep
                dest = tmp / "frames" / run.key / ep
                jobs.append((str(folder), run.results[ep].model_dump_json(), str(dest)))
                task = detail["task"]
                if task not in tasks_done:
                    tasks_done.add(task)
                    env, _, variant = task.partition("/")
                    for d in detail["demos"]:
                        mp4 = catalog.demo_mp4(task, d["index"])
                        put(f"demos/{env}__{variant}/{d['index']}.mp4", mp4)
        done = 0
        failed: list[str] = []

        def on_result(
            job: tuple[str, str, str], value: object, error: BaseException | None
        ) -> bool:
            nonlocal done
            done += 1
            if error is not None:
                failed.append(f"{Path(job[0]).name}: {error}")
                return False
            if on_episode is not None:
                on_episode(done, len(jobs), Path(job[0]).name)
            return True

        run_pool(_write_frames, jobs, max(1, min(workers, len(jobs) or 1)), on_result)
        if failed:
            raise ViewError(f"cannot write the frames of {failed[0]}")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out / "index.html"
