"""Verification of a world-model bundle (``kind: "wm"``): each case's truth derived
again and every prediction re-scored.

:func:`wm_case_budget` checks the run's case ids before any work (the contexts
rebuilt are at most the published ones); :func:`verify_wm` rebuilds the cases from
the simulators (or reads a case folder) and re-scores the predictions
(:func:`vical.wm.evaluate.rescore`). ``vical wm verify`` reaches it through
:func:`vical.submit.verify.verify_bundle` with ``accept_wm``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vical.run.pool import run_pool
from vical.submit.verdict import EpisodeVerdict, Verdict, VerifyError, first_line


def wm_case_budget(ids: Any, rebuilt: bool) -> dict[str, list[int]]:
    """The case numbers of a world-model run's case ids, by scenario, checked before any
    work: each id is ``<scenario>/<number>``, none twice, and, when the cases are rebuilt
    from the simulators, of a published scenario and within the published case set
    (:data:`vical.wm.cases.CONTEXTS` contexts of :data:`vical.wm.cases.BRANCHES` cases
    per scenario), so the contexts rebuilt are at most the published ones."""
    import re

    from vical.wm.cases import BRANCHES, CONTEXTS, SCENARIO_TOPICS

    known = set(SCENARIO_TOPICS)
    limit = CONTEXTS * BRANCHES
    if not ids or (rebuilt and len(ids) > len(known) * limit):
        raise VerifyError("schema", f"wm: {len(ids)} cases, not between 1 and {len(known) * limit}")
    out: dict[str, list[int]] = {}
    seen: set[str] = set()
    for cid in ids:
        m = re.fullmatch(r"([A-Za-z0-9_.-]{1,80})/(\d{1,6})", cid) if isinstance(cid, str) else None
        if m is None:
            raise VerifyError("schema", f"wm: case id {str(cid)[:40]!r} is not <scenario>/<number>")
        if rebuilt and m.group(1) not in known:  # (a case folder may hold other scenarios)
            raise VerifyError("schema", f"wm: case {cid}: unknown scenario {m.group(1)!r}")
        if cid in seen:
            raise VerifyError("schema", f"wm: case {cid} listed twice")
        seen.add(cid)
        number = int(m.group(2))
        if rebuilt and number >= limit:
            raise VerifyError(
                "budget",
                f"wm: case {cid} is beyond the published {limit} cases of its scenario; "
                "refused before rebuilding any context (pass the case folder it was made on)",
            )
        out.setdefault(m.group(1), []).append(number)
    return out


def verify_wm(
    root: Path,
    manifest: dict[str, Any],
    signer: str,
    cases_dir: Path | None,
    scratch: Path,
    workers: int = 1,
) -> Verdict:
    """Verify a world-model bundle: re-derive each case's truth and re-score the predictions.

    ``cases_dir``: the case folder to check against (each case must be the one the
    run was made on); without one, the run's scenarios are rebuilt from the
    simulators into ``scratch``, as far as the run's cases reach. One verdict per case; the signed summary must be
    the run's ``summary.json``, which must re-derive from the re-computed scores.
    """
    from vical.bounded import MemberError, parse_json
    from vical.wm.cases import BRANCHES, build
    from vical.wm.evaluate import MANIFEST, SUMMARY, rescore

    run = root / "wm"
    try:
        run_manifest = parse_json((run / MANIFEST).read_bytes())
        claimed = parse_json((run / SUMMARY).read_bytes())
    except OSError as e:
        raise VerifyError("schema", f"world-model run files unreadable: {e}") from None
    except MemberError as e:
        raise VerifyError("schema", f"wm/{MANIFEST} or wm/{SUMMARY}: {e}") from None
    if not isinstance(run_manifest, dict) or not isinstance(run_manifest.get("cases"), list):
        raise VerifyError("schema", f"wm/{MANIFEST}: no list of cases")
    ids = run_manifest["cases"]
    if manifest.get("summary") != claimed:
        raise VerifyError("consistency", f"the signed summary is not wm/{SUMMARY}")
    numbers = wm_case_budget(ids, rebuilt=cases_dir is None)
    if cases_dir is None:
        names = sorted(numbers)
        # only as many contexts as the run's cases reach (case number // branches), within
        # the published case set: the work is known before any of it is done
        contexts = 1 + max(n // BRANCHES for ns in numbers.values() for n in ns)
        try:
            build(scratch, names, contexts=contexts, workers=workers, pool=run_pool)
        except RuntimeError as e:
            raise VerifyError(
                "consistency", f"the cases cannot be rebuilt here: {first_line(e)}"
            ) from None
        cases_dir = scratch
    try:
        problems = rescore(run, cases_dir, workers=workers, pool=run_pool)
    except (ValueError, OSError, KeyError, TypeError) as e:
        raise VerifyError("predictions", f"wm: {first_line(e)}") from None
    episodes = []
    for cid in ids:
        mine = [p for p in problems if p.startswith(f"{cid}:")]
        episodes.append(EpisodeVerdict(cid, not mine, mine))
    general = [p for p in problems if not any(p.startswith(f"{c}:") for c in ids)]
    if general:
        episodes.append(EpisodeVerdict("wm", False, general))
    return Verdict(
        ok=not problems,
        manifest=manifest,
        episodes=episodes,
        partial=False,
        signer=signer,
    )
