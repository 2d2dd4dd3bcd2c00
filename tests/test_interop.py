"""vical against third-party implementations nobody on this project wrote.

* A LiteLLM proxy (``interop`` marker; ``nox -s interop`` installs it in a virtualenv
  of its own and names its ``litellm`` command in ``$VICAL_LITELLM``): its mock models
  answer both OpenAI APIs, and its rate-limit and server errors are LiteLLM's own, so
  the client's handling is checked against a server whose error bodies we did not write.
* ``ffprobe`` (FFmpeg) over the demonstration MP4s of a dataset build: codec, pixel
  format, frame rate and frame count as the dataset rows state them. The default suite
  probes a small build; ``nox -s interop`` probes every clip of a full build
  (``$VICAL_INTEROP_DATASET``).

The other third-party checks live beside the code they check: Gymnasium's
``check_env`` in tests/test_gym.py and the OpenSSL recipe for bundle signatures in
tests/test_submit_openssl.py.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from conftest import HANG

from vical.run.results import load_infrastructure_failures, load_results

FFPROBE = shutil.which("ffprobe")
MASTER_KEY = "sk-vical-interop-0123456789abcdef"
# A fixed reply whose action is legal in Taxi (Down is in its vocabulary).
TAXI_REPLY = "[Action:Down]\nMoving one row down toward the passenger."


# ---------------------------------------------------------------- ffprobe over MP4s


def _probe(mp4: Path) -> dict:
    out = subprocess.run(
        [
            FFPROBE or "ffprobe",
            "-v",
            "error",
            "-count_frames",
            "-select_streams",
            "v:0",
            "-show_entries",
            "stream=codec_name,pix_fmt,r_frame_rate,nb_read_frames",
            "-of",
            "json",
            str(mp4),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    (stream,) = json.loads(out.stdout)["streams"]
    return stream


def _check_dataset_videos(folder: Path) -> int:
    """Probe every clip the dataset rows name; returns how many were probed."""
    rows = pq.read_table(next((folder / "data").glob("*.parquet"))).to_pylist()
    seen: dict[str, int] = {}
    for row in rows:
        for video, n_frames in zip(row["demo_videos"], row["demo_n_frames"], strict=True):
            seen[video["path"]] = n_frames
    assert seen, f"{folder} holds no demonstration videos"
    bad = []
    for rel, n_frames in sorted(seen.items()):
        s = _probe(folder / rel)
        got = (s["codec_name"], s["pix_fmt"], s["r_frame_rate"], int(s["nb_read_frames"]))
        if got != ("h264", "yuv420p", "1/1", n_frames):
            bad.append(f"{rel}: ffprobe says {got}, the row says (h264, yuv420p, 1/1, {n_frames})")
    assert not bad, "\n".join(bad)
    return len(seen)


needs_ffprobe = pytest.mark.skipif(
    FFPROBE is None, reason="ffprobe not installed (apt-get install ffmpeg; .ci/run does)"
)


@needs_ffprobe
def test_ffprobe_reads_the_clips_of_a_small_build_as_the_rows_state(tmp_path):
    out = tmp_path / "ds"
    subprocess.run(
        [
            *(sys.executable, "-m", "vical.cli", "dataset", "build", "--out", str(out)),
            *("--tasks", "taxi/*,pong/*,lavacrossing/*,flappybird/*"),
        ],
        check=True,
        capture_output=True,
        timeout=600,
    )
    assert _check_dataset_videos(out) >= 4


@needs_ffprobe
def test_ffprobe_check_catches_a_clip_that_disagrees_with_its_row(tmp_path):
    """The check above can fail: a clip re-encoded at another frame rate is reported."""
    ffmpeg = shutil.which("ffmpeg")
    if ffmpeg is None:
        pytest.skip("ffmpeg not installed")
    folder = tmp_path / "ds"
    (folder / "data").mkdir(parents=True)
    (folder / "videos").mkdir()
    clip = folder / "videos" / "x.mp4"
    subprocess.run(
        [
            *(ffmpeg, "-v", "error", "-f", "lavfi", "-i", "color=c=red:s=64x64:r=2:d=3"),
            *("-pix_fmt", "yuv420p", "-c:v", "libx264", str(clip)),
        ],
        check=True,
        timeout=120,
    )
    import pyarrow as pa

    table = pa.table(
        {"demo_videos": [[{"path": "videos/x.mp4"}]], "demo_n_frames": [[3]]},
    )
    pq.write_table(table, folder / "data" / "test-00000-of-00001.parquet")
    with pytest.raises(AssertionError, match=r"videos/x\.mp4"):
        _check_dataset_videos(folder)


@pytest.mark.interop
@needs_ffprobe
def test_ffprobe_reads_every_clip_of_a_full_build():
    folder = os.environ.get("VICAL_INTEROP_DATASET")
    if not folder:
        pytest.fail("set VICAL_INTEROP_DATASET to a full dataset build (nox -s interop does)")
    root = Path(folder)
    probed = _check_dataset_videos(root)
    # every clip file of the build was probed (clips shared by tasks are stored once)
    assert probed == len(list((root / "videos").glob("*.mp4")))
    rows = pq.read_table(next((root / "data").glob("*.parquet"))).num_rows
    assert rows == 342


# ---------------------------------------------------------------- LiteLLM proxy


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def litellm_proxy(tmp_path_factory):
    exe = os.environ.get("VICAL_LITELLM") or shutil.which("litellm")
    if not exe:
        pytest.fail(
            "the LiteLLM proxy is not installed: run `nox -s interop`, or set VICAL_LITELLM "
            "to a `litellm` command from `pip install 'litellm[proxy]'`"
        )
    folder = tmp_path_factory.mktemp("litellm")
    models = {
        "mock-taxi": TAXI_REPLY,
        "mock-429": "litellm.RateLimitError",
        "mock-500": "litellm.InternalServerError",
    }
    lines = ["model_list:"]
    for name, reply in models.items():
        lines += [
            f"  - model_name: {name}",
            "    litellm_params:",
            f"      model: openai/{name}",
            "      api_key: unused",
            f"      mock_response: {json.dumps(reply)}",
        ]
    # LiteLLM retries failed calls itself by default; none here, so each of our
    # requests meets exactly one LiteLLM error.
    lines += ["router_settings:", "  num_retries: 0", "litellm_settings:", "  num_retries: 0"]
    config = folder / "config.yaml"
    config.write_text("\n".join(lines) + "\n")
    port = _free_port()
    env = {
        **os.environ,
        "LITELLM_MASTER_KEY": MASTER_KEY,
        # no download of the model price map, no telemetry: the machine is offline
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LITELLM_TELEMETRY": "False",
    }
    log = (folder / "proxy.log").open("wb")
    proc = subprocess.Popen(
        [exe, "--config", str(config), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    while True:
        try:
            with urllib.request.urlopen(f"{url}/health/liveliness", timeout=2):
                break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                pytest.fail(f"LiteLLM proxy did not start:\n{(folder / 'proxy.log').read_text()}")
            time.sleep(0.5)
    yield f"{url}/v1"
    proc.terminate()
    try:
        proc.wait(timeout=HANG)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


def _eval(endpoint: str, backend: str, model: str, out: Path, *extra: str):
    return subprocess.run(
        [
            *(sys.executable, "-m", "vical.cli", "eval", "--backend", backend),
            *("--endpoint", endpoint, "--model", model, "--api-key-env", "VICAL_INTEROP_KEY"),
            *("--tasks", "taxi/state1", "--out", str(out), "--workers", "1", "--no-report"),
            *extra,
        ],
        env={**os.environ, "VICAL_INTEROP_KEY": MASTER_KEY, "COLUMNS": "80"},
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.interop
@pytest.mark.parametrize("backend", ["openai-chat", "openai-responses"])
def test_litellm_proxy_serves_a_whole_episode(litellm_proxy, tmp_path, backend):
    out = tmp_path / "run"
    r = _eval(litellm_proxy, backend, "mock-taxi", out)
    assert r.returncode == 0, r.stderr
    (result,) = load_results(out)
    assert not load_infrastructure_failures(out)
    # every decision took LiteLLM's mock answer; the episode ran to its decision budget
    decisions = [
        json.loads(line)
        for line in (out / "episodes" / "taxi__state1__r0" / "log.jsonl").read_text().splitlines()
        if json.loads(line)["type"] == "decision"
    ]
    assert decisions and {d["action"] for d in decisions} == {"Down"}
    assert result.steps == len(decisions)
    # the usage LiteLLM reports is what the run records
    assert result.usage.get("input_tokens", 0) > 0 and result.usage.get("output_tokens", 0) > 0


@pytest.mark.interop
def test_litellm_rate_limit_fails_the_preflight_with_one_line(litellm_proxy, tmp_path):
    r = _eval(litellm_proxy, "openai-chat", "mock-429", tmp_path / "run")
    assert r.returncode == 2, r.stderr
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "429" in errors[0] and litellm_proxy in errors[0]
    assert "Traceback" not in r.stderr


@pytest.mark.interop
@pytest.mark.parametrize("model", ["mock-429", "mock-500"])
def test_litellm_errors_mid_run_are_infrastructure_failures(litellm_proxy, tmp_path, model):
    out = tmp_path / "run"
    r = _eval(
        litellm_proxy,
        "openai-chat",
        model,
        out,
        "--no-preflight",
        "--transport-retries",
        "1",
        "--max-retry-after",
        "2",
    )
    assert r.returncode == 1, r.stderr
    assert load_results(out) == []  # never scored
    (failure,) = load_infrastructure_failures(out)
    assert (failure.task_id, failure.run_index) == ("taxi/state1", 0)
    assert "Traceback" not in r.stderr
