"""Reducing a campaign's findings, and naming each bug by what its failure depends on.

The pieces a campaign's reduction is made of; when each runs is bot.reduce.campaign's
call (the first finding of a kind while fuzzing, the rest after, within `reduce.share`).
The order spends the time where a maintainer looks first: one finding of each kind
(verdict and pre-reduction signature) before the second of any kind, and new
regressions before what head brought in, before persistent bugs, before fixed ones. A
reduced trigger is then tried at other dtypes (bot.reduce.generalize), and named by its
canonical structure and what the failure needs; two findings whose reductions converge
to one name are one bug, and the later is folded into the earlier as an occurrence.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterable
from pathlib import Path

import onnx

from backends.client import WorkerClient
from backends.death import optimizer_site
from backends.memory import out_of_memory
from backends.results import Status
from backends.spec import BackendSpecError, parse_backend, spec_level
from bot.config import ReduceSettings
from bot.findings.bundle import BundleError, DtypeEvidence, Finding
from bot.findings.records import FindingRecords
from bot.findings.store import relative_to_root
from bot.findings.summary import FindingRef, seen_union
from bot.reduce.blame import blame
from bot.reduce.candidates import (
    CandidateJudge,
    ClientPool,
    SameBug,
    ShowsBug,
    StillFails,
    StillPasses,
    reduce_bundle,
)
from bot.reduce.form_blame import name_guilty_form
from bot.reduce.generalize import TriggerOutcome, dtype_evidence, generalized_name
from bot.reduce.reduced import Reduced
from bot.reduce.rewrite_blame import name_guilty_rewrite
from bot.reduce.workers import SidePools, SideRun
from oracles.bug_identity import crash_site_fingerprint, form_fingerprint, kernel_fingerprint, rewrite_fingerprint
from oracles.judging import Judging
from oracles.references import Validity
from oracles.sides import CrossVerdict, Localization, label_rank
from oracles.verdict import Judgement, Symptom, Verdict


def finding_level(finding: Finding) -> str | None:
    """The level the finding's case ran at, from its spec (None for a finding from before
    specs were recorded: its side's own)."""
    return spec_level(finding.spec)


def input_form(model: onnx.ModelProto) -> str:
    """`uint8[3,4]`: the type and shape of a model's first input, how a report lists where
    a bug was seen."""
    if not model.graph.input:
        return "no inputs"
    t = model.graph.input[0].type.tensor_type
    dims = ",".join(str(d.dim_value) if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim)
    return f"{onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name}[{dims}]"


def reduction_order(refs: Iterable[FindingRef]) -> list[FindingRef]:
    """One of each kind first (a kind: verdict and signature before reduction), each group
    in label order (oracles.sides.LABEL_PRECEDENCE: what a PR check fails on first), then
    the rest in that order: when time runs out, what is left is most
    likely a second sighting of a bug already reduced."""
    ranked = sorted(refs, key=lambda r: label_rank(r.across))
    kinds: set[tuple[str, str]] = set()
    first: list[FindingRef] = []
    rest: list[FindingRef] = []
    for ref in ranked:
        kind = (ref.verdict.value, ref.signature)
        (rest if kind in kinds else first).append(ref)
        kinds.add(kind)
    return first + rest


def reduce_one(
    bundle: Path, finding: Finding, guard: str | None, pools: SidePools, cfg: ReduceSettings, shared: str | None = None
) -> Reduced | None:
    """The reduced bundle of `finding`, kept at `bundle` and named in memory (its record is
    written once, when the campaign has named it: bot.reduce.reduced), or None when it did
    not reproduce (a flaky bug slips through k runs now and then; it stays unreduced rather
    than misnamed). `guard`, for a regression, is the side that must keep getting each
    candidate right; `shared`, for a persistent bug, the side that must keep failing it the
    same way; a bug that needs the optimizer keeps the failing side's lowest level right."""
    failing = finding.side
    also: list[ShowsBug] = [StillPasses(pools.pool(guard), guard, pools.judging)] if guard else []
    if shared:
        also.append(StillFails(finding, pools.pool(shared), shared, pools.judging))
    local = finding.localization
    if local is not None and local.depends_on_optimization:
        also.append(StillPasses(pools.pool(failing, local.level), f"{failing} at {local.level}", pools.judging))
    try:
        path = reduce_bundle(
            bundle,
            cfg.budget,
            max_tests=cfg.max_tests,
            backend=str(pools.spec(failing)),
            also=also,
            pool=pools.pool(failing),
            judging=pools.judging,
        )
    except BundleError as e:
        print(f"warning: {bundle}: not reduced: {e}", file=sys.stderr)
        return None
    except (MemoryError, RuntimeError) as e:
        if not out_of_memory(e):
            raise
        print(f"warning: {bundle}: not reduced: it asks for more memory than the bot's bound", file=sys.stderr)
        return None
    reduced = Reduced.load(path)
    if not fails_fresh(reduced, pools.side_run(failing), pools.judging):
        print(
            f"warning: {bundle}: not reduced: the reduced trigger fails only in a worker that ran others",
            file=sys.stderr,
        )
        shutil.rmtree(path, ignore_errors=True)
        return None
    name_reduced(reduced, pools, failing)
    return reduced


def name_reduced(reduced: Reduced, pools: SidePools, failing: str) -> None:
    """The names the failing side's build gives the reduced trigger, each pass seeing what the
    ones before it learned: relocalization decides whether a rewrite is asked for, and a
    death the optimizer's pass names is not blamed on a tensor."""
    local = reduced.finding.localization
    if local is not None and not local.depends_on_optimization:
        moved = relocalize(reduced, pools.pool(failing, local.level), pools.judging)
        if moved is not None:
            reduced.learn(localization=moved)
    elif local is None and (lowest := pools.pool(failing).lowest_level) not in (None, reduced.finding.backend.level):
        # the campaign's finding holds no lowest-level run: unasked here too, a reduced trigger
        # and one asked were two reports of one complex STFT defect (onnxruntime 1.18.0)
        found = relocalize(reduced, pools.pool(failing, lowest), pools.judging, lowest)
        if found is not None:
            reduced.learn(localization=found)
    site = name_optimizer_death(reduced, pools.side_run(failing))
    if site:
        reduced.learn(kernel=site)
    blamed = name_first_wrong(reduced, pools.pool(failing), pools.judging)
    if blamed:
        reduced.learn(blamed=blamed)
    form = name_guilty_form(reduced, pools.pool(failing), pools.judging)
    if form:
        reduced.learn(form=form)
    rewrite = name_guilty_rewrite(reduced, pools.side_run(failing), pools.judging)
    if rewrite:
        reduced.learn(rewrite=rewrite)


def fails_fresh(reduced: Reduced, side: SideRun, judging: Judging) -> bool:
    """Whether the reduced trigger fails its original's way in a worker that ran nothing
    before it, in one of a few fresh processes (oracles.asking), as the campaign asked of the original.
    A reduction's candidates all run in one long-lived worker: onnxruntime 1.30.0's "wrap"
    Pad reads past its input, and one reduced to a Pad beside a TopK failed there, while its
    repro passed 6 runs of 6 on 1.30.0 (a maintainer would close it as not reproducible)."""
    spec = parse_backend(side.spec)
    case = reduced.case()

    def in_a_fresh_worker() -> bool:
        pool = side.pool(spec)
        try:
            return SameBug(reduced.finding, pool, judging).holds(case)
        finally:
            pool.close()

    return judging.asking.shown_once(in_a_fresh_worker)


def relocalize(reduced: Reduced, lowest: ClientPool, judging: Judging, level: str | None = None) -> Localization | None:
    """What the build's lowest level says of the reduced trigger, for a finding whose
    original failed there too (None: as the original): what else the original held may be
    what failed there. A float64 MatMul -> Div became a FusedMatMul wrong at `all` and right
    at `disable`, while its original was wrong at both; named "not needing the optimizer",
    it was a second report beside the same FusedMatMul's that did. `level`: the lowest
    level, for a finding the campaign never localized (its answer is then kept either way)."""
    finding = reduced.finding
    level = level or (finding.localization.level if finding.localization else None)
    if level is None:
        return None
    same = SameBug(finding, lowest, judging)
    case = reduced.case()
    if finding.localization is None:
        low = same.judge(case)
        return None if low is None else Localization.read(level, low, finding)
    # right on every ask, or it stays as it was: a bug that reads stray memory is right now and then
    right = judging.asking.every_showing(lambda: same.judge(case), lambda j: j.verdict is Verdict.pass_)
    return None if right is None else Localization.read(level, right[0], finding)


def name_first_wrong(reduced: Reduced, pool: ClientPool, judging: Judging) -> str:
    """The first tensor the build computed wrong, upstream of the wrong output or the
    crashing node (bot.reduce.blame); "" when none is found or the finding is neither."""
    if reduced.finding.verdict not in (Verdict.wrong_result, Verdict.crash):
        return ""
    found = blame(reduced.bundle, pool, judging)
    return found.name if found is not None else ""


def name_optimizer_death(reduced: Reduced, side: SideRun) -> str:
    """Where in the optimizer the worker died, for a signal at compile ("" otherwise): the
    reduced model runs once more in a worker that logs each transformer
    (backends.death.optimizer_site). Triggers differ (a Cast before a Shape, a branch beside
    it) where the pass they crash does not; the pass names the bug. A build or backend
    that does not log its passes leaves the structural name."""
    finding = reduced.finding
    if finding.verdict is not Verdict.crash or finding.symptom == Symptom.exception or finding.stage != "compile":
        return ""
    try:
        spec = parse_backend(f"{side.spec},trace=1")
    except BackendSpecError:
        return ""
    client = WorkerClient(spec, side.python, side.timeout_s)
    try:
        result = client.run(reduced.bundle.model.SerializeToString(), reduced.bundle.inputs)
    finally:
        client.close()
    return optimizer_site(result.stderr_tail) if result.status is Status.crash else ""


def generalize(reduced: Reduced, failing: str, guard: str | None, pools: SidePools) -> DtypeEvidence | None:
    """The dtypes the reduced trigger fails and passes at, judged on the same builds."""
    bundle = reduced.bundle
    same = SameBug(reduced.finding, pools.pool(failing), pools.judging, Validity.of(bundle.model, bundle.reference))
    outcome = TriggerOutcome(same, CandidateJudge(pools.pool(guard), pools.judging) if guard else None)
    return dtype_evidence(reduced.case(), outcome)


def across_after_reduction(
    reduced: Reduced, base: str, pools: SidePools, otherwise: CrossVerdict = CrossVerdict.new_in_head
) -> CrossVerdict:
    """What a finding with a provisional label is, once reduced on head's failure: base is
    asked about the trigger. Right is a regression (hidden behind an op base lacked, or
    behind another failure of base's on the original); the same failure is a bug both builds
    share; declining it, or raising where head's bug is a wrong answer, leaves head's bug new
    in head; failing it differently again keeps `otherwise`, the provisional label, unless
    that is `new_in_head`: base ran the trigger and failed, so both builds fail it
    (`persistent`, by the verdict table), whatever base's own bug is.

    The label is a claim about base, so base is asked as the campaign asks a side (k runs,
    oracles.asking): base is right only when every run is right. Asked once, a base that
    reads stray memory and was right that once made a bug both builds share a regression.
    Runs that disagree leave the provisional label."""
    same = SameBug(reduced.finding, pools.pool(base), pools.judging)
    case = reduced.case()
    runs = pools.judging.asking.claim(lambda: same.judge(case))
    labels = {_base_says(j, same, otherwise) for j in runs}
    return labels.pop() if len(labels) == 1 else otherwise


def _base_says(j: Judgement | None, same: SameBug, otherwise: CrossVerdict) -> CrossVerdict:
    """The label one of base's runs of the reduced trigger gives it."""
    if j is None or j.undefined or j.verdict is Verdict.unsupported:
        return CrossVerdict.new_in_head
    if j.verdict is Verdict.pass_:
        return CrossVerdict.new_regression
    if same.matches(j):
        return CrossVerdict.persistent
    if j.verdict.is_bug and j.verdict is not same.original.verdict and same.original.verdict is Verdict.wrong_result:
        # base raises or dies where head computes a wrong answer: base gave no answer to be
        # wrong with (onnxruntime 1.17.3 refuses a complex STFT that 1.18.0 computes wrong),
        # and the repro, which checks values, cannot tell on base
        return CrossVerdict.new_in_head
    if otherwise is CrossVerdict.new_in_head and j.verdict.is_bug:
        return CrossVerdict.persistent
    return otherwise


def rename_finding(
    ref: FindingRef, bundle: Path, reduced: Reduced, records: FindingRecords, ev: DtypeEvidence | None
) -> bool:
    """Give `ref` (whose bundle is at `bundle`) its final name; False when that name belongs to
    an earlier finding, whose occurrences then absorb this one's. Its evidence may give it
    two names, the rewrite it needs and the check or kernel that failed; either one shared
    with an earlier finding makes it that finding. onnxruntime's QDQ selectors fail eight
    kernels, eight checks, one rewrite; its normalization kernels refuse one element with one
    check, whether a LayerNormalization runs it or the SimplifiedLayerNormalization a fusion
    made (that trigger needs the fusion): one report each."""
    finding, model = reduced.finding, reduced.bundle.model
    signature, fp = generalized_name(model, finding, finding.backend.name, ev)
    if finding.blamed or (finding.verdict is Verdict.wrong_result and finding.kernel):
        fp = kernel_fingerprint(finding, ref.across or "")
    elif finding.verdict is Verdict.crash and (finding.symptom == Symptom.exception or finding.kernel):
        # by the generalized message: TVM names the dtype it refused ("... is T.int32", "... is
        # T.int64"), which generalization turns into T; two reports of one check before
        fp = crash_site_fingerprint(finding.model_copy(update={"signature": signature}), ref.across or "")
    keys = [rewrite_fingerprint(finding, ref.across or ""), fp] if finding.rewrite else [fp]
    if finding.form:
        keys.insert(0, form_fingerprint(finding, ref.across or ""))
    kept, store = records.kept, records.store
    same = next((o for o in kept.findings if o is not ref and set(o.keys or [o.fingerprint]) & set(keys)), None)
    fp = keys[0] if same is None else same.fingerprint
    ref.keys = seen_union([fp], keys)
    if same is not None:
        same.keys = seen_union([fp], same.keys, keys)
    ref.triggers = seen_union(ref.triggers, [signature])
    if finding.localization is not None:  # the reduced trigger's own (relocalize)
        ref.depends_on_optimization = finding.localization.depends_on_optimization
    ref.reduced_path = relative_to_root(reduced.path, store.root)
    ref.reduced_nodes = len(model.graph.node)
    ref.precision = finding.comparison.precision_scale if finding.comparison else None  # as its report shows it
    reduced.learn(signature=signature, fingerprint=fp, dtypes=ev, across=ref.across or "")
    reduced.save()  # on disk before the store hears of the name
    records.rename(ref, fp, signature)
    store.offer(fp, bundle)
    return not any(other is not ref and other.fingerprint == fp for other in kept.findings)
