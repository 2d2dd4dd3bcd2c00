"""The Kubernetes manifests under docker/k8s/: valid against the Kubernetes API schema
(kubernetes-validate, strict: no unknown field), and consistent with vical's command line
and with each other (shard count, volume, image, run folder)."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import typer
import yaml

from vical.cli import app

kv = pytest.importorskip("kubernetes_validate", reason="kubernetes-validate is in the dev extra")

K8S = Path(__file__).resolve().parents[1] / "docker" / "k8s"
# the oldest Kubernetes with every field the Job uses as GA (backoffLimitPerIndex: 1.33)
OLDEST = "1.33.0"


def _docs(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((K8S / name).read_text()) if d]


def _job(name: str) -> dict:
    return next(d for d in _docs(name) if d["kind"] == "Job")


def _env(container: dict) -> dict[str, dict]:
    return {e["name"]: e for e in container.get("env", [])}


@pytest.mark.parametrize("name", ["eval-job.yaml", "merge-job.yaml", "verify-job.yaml"])
@pytest.mark.parametrize("version", [OLDEST, kv.latest_version()])
def test_manifests_validate_against_the_kubernetes_schema(name, version):
    docs = _docs(name)
    assert docs
    for doc in docs:
        kv.validate(doc, version, strict=True)


def test_the_validator_rejects_a_misspelt_field():
    job = copy.deepcopy(_job("eval-job.yaml"))
    job["spec"]["completionsMode"] = job["spec"].pop("completionMode")
    with pytest.raises(kv.ValidationError):
        kv.validate(job, OLDEST, strict=True)


def test_each_pod_runs_its_own_shard_of_one_run():
    job = _job("eval-job.yaml")
    spec = job["spec"]
    assert spec["completionMode"] == "Indexed"
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never"
    (c,) = pod["containers"]
    env = _env(c)
    shards = int(env["SHARDS"]["value"])
    assert spec["completions"] == shards and spec["parallelism"] <= shards
    index = env["SHARD"]["valueFrom"]["fieldRef"]["fieldPath"]
    assert index == "metadata.annotations['batch.kubernetes.io/job-completion-index']"
    args = c["args"]
    assert args[0] == "eval"
    assert args[args.index("--shard") + 1] == "$(SHARD)/$(SHARDS)"
    out = args[args.index("--out") + 1]
    assert "$(SHARD)" in out and out.startswith("/runs/$(RUN)/")
    # every $(VAR) the arguments use is defined in the container's env
    used = {v for a in args for v in re.findall(r"\$\((\w+)\)", a)}
    assert used <= set(env)
    # the API key comes from a Secret, never a literal
    assert "secretKeyRef" in env[args[args.index("--api-key-env") + 1]]["valueFrom"]
    # exit 2 (a bad option) fails the index at once instead of retrying it
    (rule,) = spec["podFailurePolicy"]["rules"]
    assert rule["action"] == "FailIndex" and rule["onExitCodes"]["values"] == [2]


@pytest.mark.parametrize("name", ["eval-job.yaml", "verify-job.yaml"])
def test_every_option_an_indexed_job_passes_is_a_vical_option(name):
    (c,) = _job(name)["spec"]["template"]["spec"]["containers"]
    args = c["args"]
    command = typer.main.get_command(app).commands[args[0]]
    known = {o for p in command.params for o in [*p.opts, *p.secondary_opts]}
    flags = [a for a in args if a.startswith("--")]
    assert "--shard" in flags and "--out" in flags
    assert set(flags) <= known, set(flags) - known
    assert args[args.index("--shard") + 1] == "$(SHARD)/$(SHARDS)"
    assert "$(SHARD)" in args[args.index("--out") + 1]
    used = {v for a in args for v in re.findall(r"\$\((\w+)\)", a)}
    assert used <= set(_env(c))
    spec = _job(name)["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == int(_env(c)["SHARDS"]["value"])


def test_merge_reads_the_shards_where_the_eval_job_wrote_them():
    ev, mg = _job("eval-job.yaml"), _job("merge-job.yaml")
    (ce,) = ev["spec"]["template"]["spec"]["containers"]
    (cm,) = mg["spec"]["template"]["spec"]["containers"]
    assert ce["image"] == cm["image"]
    assert _env(ce)["RUN"]["value"] == _env(cm)["RUN"]["value"]
    claim = {
        v["persistentVolumeClaim"]["claimName"]
        for j in (ev, mg)
        for v in j["spec"]["template"]["spec"]["volumes"]
    }
    pvc = next(d for d in _docs("eval-job.yaml") if d["kind"] == "PersistentVolumeClaim")
    assert claim == {pvc["metadata"]["name"]}
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]
    mounts = {m["mountPath"] for c in (ce, cm) for m in c["volumeMounts"]}
    assert mounts == {"/runs"}
    script = " ".join(cm["args"])
    out = ce["args"][ce["args"].index("--out") + 1]  # /runs/$(RUN)/shard-$(SHARD)
    pattern = out.replace("$(RUN)", '"$RUN"').replace("$(SHARD)", "*")
    assert f"vical merge {pattern} --out" in script
