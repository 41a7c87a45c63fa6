"""KAI's queue orders and reclaim limits, one scenario per rule (README "Scheduling"):

- allocation order is hierarchical: the department by its own totals with the job, then
  the project inside it, each by (allocated + job) / max(deserved, fair share);
- which queue gives up work first is that order reversed, where "over its fair share"
  never outranks rank for GPU-only work;
- reclaim places its job and the victims again together, in allocation order;
- a victim's queue may lose work while, before the loss, it holds more than
  max(deserved, fair share) capped by its limit; ratios count only when the claimant
  would end above its own fair share."""

from __future__ import annotations

from dataclasses import replace
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from gitops_sched.engine import schedule
from gitops_sched.engine.actions.reclaim import reclaim
from gitops_sched.engine.actions.victims import (
    VictimPool,
    evict,
    ranks_ahead,
    replace_together,
    still_running,
    surely_ranks_ahead,
)
from gitops_sched.engine.apply import apply_decisions
from gitops_sched.engine.pools import ran_in
from gitops_sched.engine.session import Entry, Session, Victim, job_order
from gitops_sched.engine.types import (
    EvictReason,
    Gpu,
    Job,
    Node,
    PodPlacement,
    Policy,
    QueueSpec,
    Snapshot,
)
from gitops_sched.engine.usage import Usage
from tests.conftest import examples
from tests.engine_builders import allocated, department, job, nodes, policy, project, snapshot
from tests.strategies import (
    GPU_MEMORY_MIB,
    V100,
    pool_quota_snapshots,
    train_jobs,
    two_waves,
)
from tests.test_engine_kai_parity import (
    bound,
    evicted,
    evictions,
    is_running,
    on,
    placement,
    running,
    settled,
)
from tests.test_engine_properties import two_settles

# -- allocation order: department first, then project -----------------------------------------


def test_allocate_serves_the_department_within_its_quota_before_a_project_below_its_share():
    # x1 uses all of department x's quota of 4, y1 holds 3 of y's 4; one GPU is free and
    # running work is protected by the minimum runtime. x2 (0 of its quota of 2) would
    # come first in a flat list of projects, but its department would pass its quota with
    # the job while y stays within it: the department decides first, y1 gets the GPU
    pol = policy(
        project("x1", 2, "x", reclaim_min_runtime_s=3600),
        project("x2", 2, "x"),
        project("y1", 4, "y", reclaim_min_runtime_s=3600),
        departments=(department("x", 4), department("y", 4)),
    )
    work = [
        *(running(f"x1-{i}", "x1", 1, on("n-0", i)) for i in range(4)),
        *(running(f"y1-{i}", "y1", 1, on("n-1", i)) for i in range(3)),
        job("x2-new", "x2", submitted=1),
        job("y1-new", "y1", submitted=2),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 2, gpus=4), work), now=60.0))
    assert bound(history) == ["y1-new"]
    assert not evicted(history)
    assert not is_running(final, "x2-new")


# -- which queue gives up work first ----------------------------------------------------------


def test_reclaim_takes_from_the_lower_rank_before_the_queue_over_its_fair_share():
    # hi (rank 1, no claim on spare GPUs) holds 3 on a fair share of 1; lo (rank 0) holds 5
    # of its fair share of 5; both are over their deserved quota of 1. c claims 2 GPUs of
    # its quota: being over its fair share does not put hi before rank for GPU-only work,
    # so lo, the lower rank, gives both; the threshold keeps lo from taking them back
    pol = policy(
        project("c", 2),
        project("hi", 1, over_quota_rank=1, weight=0),
        project("lo", 1),
        reclaim_threshold=2.5,
    )
    work = [
        *(running(f"hi-{i}", "hi", 1, on("n-0", i)) for i in range(3)),
        *(running(f"lo-{i}", "lo", 1, on("n-0", 3 + i), started=i) for i in range(5)),
        job("c-1", "c", submitted=10),
        job("c-2", "c", submitted=11),
    ]
    _, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=8), work), now=100.0))
    assert sorted(evicted(history)) == ["lo-3", "lo-4"]
    assert [allocated(history[-1], p) for p in ("c", "hi", "lo")] == [2, 3, 3]


def test_reclaim_takes_from_the_department_that_gives_up_work_first():
    # departments x (rank 1, no spare share) and y (rank 0) both hold 6, over their
    # quotas of 3 and 5; x1 is over its fair share, y1 is not. z1 claims 1 GPU of its
    # quota: the departments are judged first, and y, the lower rank, gives it
    pol = policy(
        project("x1", 3, "x"),
        project("y1", 5, "y"),
        project("z1", 2, "z"),
        departments=(
            department("x", 3, over_quota_rank=1, weight=0),
            department("y", 5),
            department("z", 2),
        ),
    )
    work = [
        *(running(f"x1-{i}", "x1", 1, on("n-0", i)) for i in range(6)),
        *(running(f"y1-{i}", "y1", 1, on("n-1", i)) for i in range(6)),
        job("z1-1", "z1", submitted=10),
    ]
    decisions = schedule(replace(snapshot(pol, nodes("n", 2, gpus=6), work), now=100.0))
    assert [(e.job.split("-")[0], e.reason) for e in decisions.evictions] == [
        ("y1", EvictReason.RECLAIM)
    ]


# -- reclaim re-places victims and claimant together ------------------------------------------


def test_a_job_never_reclaims_from_a_queue_that_ranks_ahead_of_its_own():
    # h (rank 1, no spare share) holds 3 GPUs on a fair share of 1; c (rank 0) holds 1 of
    # its fair share of 2 and asks for 1 more. Neither would be within its deserved quota
    # with its job, so h ranks ahead: placed again together, h's job takes its GPU back
    # first and c's job does not fit -- nothing is evicted
    pol = policy(project("c", 1), project("h", 1, over_quota_rank=1, weight=0))
    work = [
        *(running(f"h-{i}", "h", 1, on("n-0", i)) for i in range(3)),
        running("c-run", "c", 1, on("n-0", 3)),
        job("c-new", "c", submitted=10),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=4), work), now=100.0))
    assert not evicted(history)
    assert not is_running(final, "c-new")


def test_a_job_within_its_deserved_quota_reclaims_from_a_higher_rank():
    # the same, but c's quota is 2: within it with the job, c ranks ahead of h
    pol = policy(project("c", 2), project("h", 1, over_quota_rank=1, weight=0))
    work = [
        *(running(f"h-{i}", "h", 1, on("n-0", i), started=i) for i in range(3)),
        running("c-run", "c", 1, on("n-0", 3)),
        job("c-new", "c", submitted=10),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=4), work), now=100.0))
    assert evicted(history) == ["h-2"]
    assert is_running(final, "c-new")


def test_a_reclaimers_extra_pod_uses_room_its_victim_that_ranks_ahead_cannot_use():
    # h (rank 1, no quota) holds the only GPU; c (quota 0.5) reclaims it for the gang of
    # c-gang (1 of 2 pods of 0.1), within its quota and so ahead of h. c-more fills c's
    # quota; then h-whole ranks ahead of c-gang's extra pod (both over quota, h the higher
    # rank) and is offered the GPU first, but a whole GPU shared by c's work within its
    # quota is no room for it: the extra pod takes what is left, h-whole stays stopped
    pol = policy(project("c", 0.5), project("h", 0, over_quota_rank=1, weight=0))
    work = [
        running("h-whole", "h", 1, on("n-0", 0)),
        job("c-gang", "c", 0.1, pods=2, min_available=1, submitted=1),
        job("c-more", "c", 0.4, submitted=2),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=1), work), now=100.0))
    assert evictions(history) == [("h-whole", EvictReason.RECLAIM)]
    assert [len(placement(final, j)) for j in ("c-gang", "c-more", "h-whole")] == [2, 1, 0]
    assert [allocated(history[-1], p) for p in ("c", "h")] == [0.6, 0.0]


def test_an_elastic_victim_that_loses_its_gang_is_ranked_by_its_gang():
    # h-elastic (3 pods of 1 GPU, at least 2) fills h's share and more; c (1 of its share
    # of 3) asks for 2. Its extra pod is not enough, so its gang goes too. Placed again
    # together, h asks for its gang (2 GPUs: over h's quota of 1, behind c) -- not for the
    # extra pod alone (1 GPU, within h's quota: it would rank ahead), which cannot start
    # without the gang -- so c's job is placed first and the whole job stays stopped, as
    # KAI (GetTasksToAllocate asks for a job's gang first) would decide
    pol = policy(project("c", 2), project("h", 1))
    pods = (on("n-0", i, index=i) for i in range(3))
    work = [
        running("h-elastic", "h", 1, *pods, pods=3, min_available=2),
        running("c-run", "c", 1, on("n-0", 3), type="inference"),
        job("c-new", "c", 2, submitted=10),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=4), work), now=100.0))
    assert evictions(history) == [("h-elastic", EvictReason.RECLAIM)]
    assert is_running(final, "c-new")
    assert not placement(final, "h-elastic")


def test_placed_again_together_an_elastic_victims_gang_goes_before_its_extra_pods():
    # h (rank 1) ranks ahead of c (rank 0), neither within its quota. With h-elastic's
    # extra pod and then its gang stopped for c-one, the gang takes its GPUs back first,
    # then the extra pod its own: nothing is left for c-one. The extra pod offered before
    # its gang could not start, and c-one would have taken its GPU from a queue ahead
    pol = policy(project("c", 0), project("h", 0, over_quota_rank=1))
    pods = (on("n-0", i, index=i) for i in range(3))
    work = [
        running("h-elastic", "h", 1, *pods, pods=3, min_available=2),
        job("c-one", "c", 1, submitted=10),
    ]
    session = Session(snapshot(pol, nodes("n", 1, gpus=3), work))
    claimant = session.jobs["c-one"]
    extra = session.jobs["h-elastic"].placement[2:]
    taken = [
        evict(session, Victim("h-elastic", pods, frozenset()), EvictReason.RECLAIM, claimant)
        for pods in (extra, None)
    ]
    assert not replace_together(session, claimant, taken, lambda: True)


def test_a_victims_pod_given_back_never_runs_twice():
    # p4's elastic j0 (4 pods, at least 2) gives its pods 3 and 2 and p1 its 3-GPU job for
    # p2's 4-GPU job, which takes pod 3's GPU. Given back, pod 3 moves to a free GPU under
    # the lowest index not running (2); pod 2 may not then run again where it ran under
    # the same index (it did: the cycle bound a second pod 2 and lost pod 3), so it runs
    # there as pod 3: the job runs pods 0-3 once each
    pol = policy(
        *(project(f"p{i}", quota, age=float(i)) for i, quota in ((0, 4), (1, 0), (2, 3), (4, 0)))
    )
    pods = (on("n-0", gpu, index=i) for i, gpu in enumerate((6, 0, 7, 1)))
    work = [
        running("j0", "p4", 1, *pods, pods=4, min_available=2, priority=40),
        running("j1", "p1", 3, on("n-0", 2, 3, 5), priority=60, started=1.0),
        job("new0", "p2", 4, submitted=100),
    ]
    snap = replace(snapshot(pol, nodes("n", 1, gpus=8), work), now=1000.0)
    after = apply_decisions(snap, schedule(snap))
    assert sorted(pod.index for pod in placement(after, "j0")) == [0, 1, 2, 3]


# -- how far a victim's queue may drop --------------------------------------------------------


def test_a_queue_over_its_share_may_lose_the_job_that_takes_it_below():
    # b holds 4 GPUs in one job, over its fair share of 3; a (1 of its fair share of 3)
    # asks for 2. Judged before the loss, b may lose the job, which leaves it with 0
    pol = policy(project("a", 1), project("b", 1))
    work = [
        running("a-run", "a", 1, on("n-0", 0), type="inference"),
        running("b-big", "b", 4, on("n-0", 1, 2, 3, 4)),
        job("a-two", "a", 2, submitted=10),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=6), work), now=100.0))
    assert evicted(history) == ["b-big"]
    assert is_running(final, "a-two")
    assert [allocated(history[-1], p) for p in ("a", "b")] == [3, 0]


def b_at_its_share(b_groups: tuple[str, ...]) -> Snapshot:
    """b holds 3 of its fair share of 3 on the node a's 2-GPU job must use (group x); y
    has 2 free GPUs; b's work may use `b_groups` (every group if empty)."""
    pol = policy(project("a", 1), project("b", 1))
    work = [
        running("a-run", "a", 1, on("x-0", 0), type="inference"),
        *(running(f"b-{i}", "b", 1, on("x-0", 1 + i), node_groups=b_groups) for i in range(3)),
        job("a-two", "a", 2, node_groups=("x",), submitted=10),
    ]
    snap = snapshot(pol, (*nodes("x", 1, gpus=4), *nodes("y", 1, gpus=2)), work)
    return replace(snap, now=100.0)


def test_a_queue_at_its_share_loses_nothing():
    # the same with b holding 3 of its fair share of 3 on the node a must use, b's work
    # pinned there too (so nothing can make way by moving to y)
    final, history = settled(b_at_its_share(("x",)))
    assert not evicted(history)
    assert not is_running(final, "a-two")


def test_work_of_a_queue_at_its_share_that_may_run_elsewhere_makes_way_by_moving():
    # the same with b's work free to use y: consolidation (which counts the cluster's
    # free GPUs, as KAI's does) moves two of b's jobs there, so a's job runs and b still
    # holds its 3 GPUs -- restarted, not lost
    final, history = settled(b_at_its_share(()))
    assert is_running(final, "a-two")
    assert {e.reason for d in history for e in d.evictions} == {EvictReason.CONSOLIDATE}
    assert [allocated(history[-1], p) for p in ("a", "b")] == [3, 3]
    moved = [j for j in final.jobs if j.project == "b" and j.placement[0].node == "y-0"]
    assert len(moved) == 2


def test_a_hard_limit_caps_the_share_a_victim_keeps():
    # b's fair share is 4 but its hard limit 3 caps what it may keep: holding 4 (started
    # before the limit was lowered), it gives one GPU to a
    pol = policy(project("a", 2), project("b", 2, limit=3))
    work = [
        running("a-run", "a", 2, on("n-0", 0, 1)),
        *(running(f"b-{i}", "b", 1, on("n-0", 2 + i), started=i) for i in range(4)),
        job("a-more", "a", submitted=10),
    ]
    final, history = settled(replace(snapshot(pol, nodes("n", 1, gpus=6), work), now=100.0))
    assert evicted(history) == ["b-3"]
    assert is_running(final, "a-more")


# -- property: reclaim never takes from a queue that ranks ahead ------------------------------


class _Watched(Session):
    """A cycle's session that notes, each time reclaim places a job that has reclaimed in
    that run of reclaim, whether it comes first in allocation order against each queue
    whose work it stopped in that run and that still waits to be placed again: the rule
    KAI's solvers follow (the preemptor and its victims' jobs popped from one
    JobsOrderByQueues), judged at the moment the engine serves the claimant.

    A queue is ranked as that order ranks it, by its first waiting entry: a project by its
    stopped victim that comes first in job order, a department by its first such project
    (Session.project_order_key). Judging each victim alone would be stricter than the rule:
    the claimant may come between a queue's first job and its second, which, ranked alone
    with its smaller gain, would come first. Nor does a victim's fate later in the cycle
    count: a later action may place it again (it was stopped all the same) or evict it
    again for its own reasons (its project's preempt).

    Only pods that could be placed on their own wait: an elastic job's extra pod stopped
    along with its gang waits for the gang (Job.starts_short), so the job waits as its
    gang, as KAI's GetTasksToAllocate asks for a job's gang before any further pod."""

    def __init__(self, snapshot: Snapshot, carried: Usage | None = None) -> None:
        super().__init__(snapshot, carried)
        self.first: dict[tuple[str, tuple[PodPlacement, ...]], list[tuple[str, bool]]] = {}
        self.reclaim_since: int | None = None  # evictions before the running reclaim's
        _SESSIONS.append(self)

    def bind(
        self, job: Job, pods: tuple[PodPlacement, ...], started_at: float | None = None
    ) -> None:
        self.first.pop((job.key, pods), None)
        # a claimant placed by reclaim, not a victim given its place back
        if started_at is None and self.reclaim_since is not None:
            claimant = (self.jobs[job.key], self.wanted_gpus(job), (0,))
            self.first[(job.key, pods)] = [
                (queue, self.serves_before(claimant, entry))
                for queue, entry in self._waiting(job).items()
            ]
        super().bind(job, pods, started_at)

    def _waiting(self, claimant: Job) -> dict[str, Entry]:
        """The first waiting entry of each queue the claimant stopped work of in this run
        of reclaim that allocation order compares it with: each project of its own
        department, the first project of every other department."""
        assert self.reclaim_since is not None
        projects: dict[str, Entry] = {}
        for taken in self.evictions[self.reclaim_since :]:
            victim = self.jobs.get(taken.job)  # None: stopped for good (limits)
            if victim and taken.by == claimant.key and taken.reason is EvictReason.RECLAIM:
                stopped = tuple(p for p in taken.pods if p not in victim.placement)
                if stopped and not victim.starts_short(len(stopped)):
                    gain = self.placed_gpus(victim, stopped)
                    entry = (ran_in(self, victim, stopped), gain, job_order(victim))
                    known = projects.get(victim.project)
                    if known is None or entry[2] < known[2]:
                        projects[victim.project] = entry
        own = self.department_of(claimant.project)
        queues: dict[str, Entry] = {}
        for name, entry in sorted(projects.items()):
            department = self.department_of(name)
            if department == own:
                queues[name] = entry
                continue
            known = queues.get(department)
            key = self.project_order_key(name, entry[0], entry[1])
            if known is None or key < self.project_order_key(known[0].project, *known[:2]):
                queues[department] = entry
        return queues


def _watched_reclaim(session: Session) -> None:
    """reclaim, telling a _Watched session which of its evictions that run makes."""
    assert isinstance(session, _Watched)
    session.reclaim_since = len(session.evictions)
    try:
        reclaim(session)
    finally:
        session.reclaim_since = None


_SESSIONS: list[_Watched] = []


@st.composite
def ranked_waves(draw: st.DrawFn) -> tuple[Snapshot, tuple[Job, ...]]:
    """One group of 1-GPU-per-job V100 nodes shared by 2-4 projects of 1-2 departments
    with random quotas (0-2), weights and over-quota ranks (0-2): a first wave of work
    that fills much of it, then a second wave an hour later -- where reclaim between
    queues of every rank and share happens often."""
    nodes = tuple(
        Node(f"n{i}", "v100", V100, tuple(Gpu(k, GPU_MEMORY_MIB[V100]) for k in range(4)))
        for i in range(draw(st.integers(1, 3)))
    )
    names = [f"dept-{i}" for i in range(draw(st.integers(1, 2)))]
    projects = tuple(
        QueueSpec(
            f"p{i}",
            float(draw(st.integers(0, 2))),
            draw(st.sampled_from([1.0, 2.0])),
            over_quota_rank=draw(st.integers(0, 2)),
            parent=draw(st.sampled_from(names)),
            age=float(i),
        )
        for i in range(draw(st.integers(2, 4)))
    )
    departments = tuple(
        QueueSpec(d, sum(p.deserved for p in projects if p.parent == d), 1.0, age=float(i))
        for i, d in enumerate(names)
    )
    policy = Policy(departments, projects)
    first = train_jobs(draw, policy, 14)
    more = tuple(
        replace(j, name=f"more-{j.name}", submitted=100 + j.submitted)
        for j in train_jobs(draw, policy, 10)
    )
    return Snapshot(policy, nodes, first), more


@settings(max_examples=examples(60), deadline=None)
@given(st.one_of(ranked_waves(), two_waves(), pool_quota_snapshots().map(lambda s: (s, ()))))
def test_reclaim_never_takes_from_a_queue_that_ranks_ahead_of_the_claimants(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    """KAI places the reclaimer and its victims again in allocation order, so a victim
    left stopped never belongs to a queue that ranks ahead of the reclaimer's: checked
    at every committed placement reclaim makes of a job that reclaimed in that run (see
    _Watched), over random clusters, with and without per-node-group quotas, through
    every cycle of two settles."""
    _SESSIONS.clear()
    with (
        mock.patch("gitops_sched.engine.cycle.Session", _Watched),
        mock.patch("gitops_sched.engine.cycle.reclaim", _watched_reclaim),
    ):
        two_settles(*case)
    for session in _SESSIONS:
        claimants = {e.by for e in session.evictions if e.reason is EvictReason.RECLAIM}
        for bind in session.binds:
            if bind.job in claimants and (bind.job, bind.pods) in session.first:
                for queue, first in session.first[(bind.job, bind.pods)]:
                    assert first, (bind, queue)


def _checked_skip(session: Session, job: Job, gain: float, project: str, known: dict) -> bool:
    """surely_ranks_ahead, checked against ranks_ahead for each of the project's victims."""
    sure = surely_ranks_ahead(session, job, gain, project, known)
    if sure:
        for victim in VictimPool(session, EvictReason.RECLAIM).victims(project):
            if still_running(session, victim):
                assert ranks_ahead(session, job, gain, victim), (job.key, victim)
    return sure


@settings(max_examples=examples(60), deadline=None)
@given(st.one_of(ranked_waves(), two_waves(), pool_quota_snapshots().map(lambda s: (s, ()))))
def test_skipping_queues_that_surely_rank_ahead_changes_no_decision(
    case: tuple[Snapshot, tuple[Job, ...]],
) -> None:
    """Reclaim skips a project whose every victim would rank ahead of the claimant without
    trying them (victims.surely_ranks_ahead), only to save time: each skipped project's
    victims all do rank ahead, and every cycle of two settles decides exactly as when
    each victim is tried."""
    target = "gitops_sched.engine.actions.reclaim.surely_ranks_ahead"
    with mock.patch(target, _checked_skip):
        skipping = two_settles(*case)
    with mock.patch(target, lambda *_: False):
        trying = two_settles(*case)
    assert skipping == trying
