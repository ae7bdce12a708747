"""Monte-Carlo simulation of a training run through failures and spot preemptions.

A run needs `work_s` seconds of failure-free compute on N GPUs (n nodes). Per trial:

- It checkpoints after every `interval_s` (tau) of compute; training blocks for C
  (`checkpoint_s`) per checkpoint. The copy is durable `checkpoint_write_s` (w) after the
  blocking part ends (w = 0: a synchronous checkpoint); a failure before it lands loses back
  to the previous durable checkpoint.
- Failures (hardware and software) arrive as a Poisson process at the job rate N r
  (failures.py) while the job runs or checkpoints; each costs the work since the last durable
  checkpoint plus a restart R (`restart_s`). Failures during restarts and waits are ignored.
- On spot capacity, preemptions arrive at K x the per-node rate (spot.py) for K spot nodes.
  With notice >= C + w (time to a durable copy) the job trains on through the notice and
  starts an emergency checkpoint C + w before its end, so a preemption costs C + w of it;
  with a shorter notice the work since the last durable checkpoint is lost. The nodes go at
  the notice's end.

Strategies (billing: GPU-seconds held x price, restarts included):

- on_demand: N GPUs at the on-demand price for the whole wall time.
- spot: N spot GPUs. A preemption takes the job's whole spot allocation (it is released and
  re-acquired, as managed-job recovery does); after an exponential wait, unbilled, the job
  restarts in the spot model's `restart_s`, billed.
- reserved_plus_spot: B reserved GPUs billed for the whole wall time plus N - B spot GPUs.
  Model (elastic): with its spot GPUs gone the job restarts (R) on the B reserved GPUs and
  trains at B / N of full speed (data-parallel shrink, same global batch by gradient
  accumulation, linear scaling assumed) with failure rate B r and the same C; when the spot
  capacity returns it takes a checkpoint (C + w) and restarts on all N (spot `restart_s`),
  the spot GPUs billed from their return. B = 0 is the spot strategy; B = N is on-demand at
  the reserved price.

Every trial jumps from event to event: a period of running ends at min(next interruption,
capacity return, finish), drawn in closed form, and the checkpoints inside it are counted by
arithmetic, so the cost is one vectorised step per event, not per second or per checkpoint.
Draw i of every random stream belongs to event i of each trial, so runs that differ only in
tau or R see the same interruptions (common random numbers: smooth interval scans), and a
scan's intervals step together as the rows of one array.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from infraplan.errors import InputError, UnknownNameError
from infraplan.reliability.checkpoint import CheckpointPlan, daly_interval_s
from infraplan.checks import check_number
from infraplan.reliability.failures import FailureModel, llama3_failure_model
from infraplan.reliability.outcomes import IntervalScan, RunDistribution, Samples, Stat
from infraplan.reliability.spot import SpotModel

HOUR_S = 3600.0
STRATEGIES = ("on_demand", "spot", "reserved_plus_spot")
MAX_EVENTS = 2_000_000  # per trial; beyond this the plan cannot finish in any useful time
MAX_TRIALS = 100_000  # per strategy: p90 is settled to ~0.1% long before this
# Work budget of one strategy, in trial-events: over the groups of intervals stepped as one
# array (_simulate), the group's most events per trial x (its intervals x trials +
# STEP_TRIALS). A vectorised event step costs ~30 us of NumPy overhead plus ~30 ns per
# element (measured on one core: 25-60 us per step at 1-1,000 trials, ~340 us at 10,000),
# so the overhead is worth STEP_TRIALS = 1,000 elements and the budget is about 30 s.
# 15T tokens of Llama 3.1 405B on 16,384 H100s, 1,000 trials, scanned: ~1e8.
MAX_TRIAL_EVENTS = 1e9
STEP_TRIALS = 1000
_BLOCK = 64  # events per block of random draws
GROUP_ELEMENTS = 65_536  # trials x intervals stepped as one array (0.5 MB a float array)


@dataclass(frozen=True)
class TrainingRun:
    """What the run needs and what its checkpoints and restarts cost."""

    work_s: float  # failure-free compute time W
    num_gpus: int
    checkpoint_s: float  # blocking time C per checkpoint
    restart_s: float  # R: detect, reschedule, reload after a failure
    on_demand_usd_per_gpu_hour: float
    checkpoint_write_s: float = 0.0  # durable this long after the blocking copy; 0: sync
    gpus_per_node: int = 8
    failures: FailureModel = field(default_factory=llama3_failure_model)

    def __post_init__(self) -> None:
        for name, bounds in (("work_s", {"gt": 0}), ("checkpoint_s", {"gt": 0}),
                             ("restart_s", {"ge": 0}), ("on_demand_usd_per_gpu_hour", {"ge": 0}),
                             ("checkpoint_write_s", {"ge": 0})):
            check_number(f"TrainingRun.{name}", getattr(self, name), **bounds)
        for name in ("num_gpus", "gpus_per_node"):
            check_number(f"TrainingRun.{name}", getattr(self, name), ge=1, integer=True)

    @property
    def nodes(self) -> int:
        return -(-self.num_gpus // self.gpus_per_node)

    @classmethod
    def from_checkpoint_plan(cls, plan: CheckpointPlan, *, asynchronous: bool, **fields):
        """C and w from a checkpoint plan: async blocks for the host copy and is durable after
        the upload (write_s); sync blocks for the whole write."""
        return cls(checkpoint_s=plan.blocking_s,
                   checkpoint_write_s=plan.write_s if asynchronous else 0.0, **fields)


@dataclass(frozen=True)
class _Mode:
    """Rates and prices of one strategy, resolved."""

    fail_full_per_s: float
    fail_shrunk_per_s: float
    preempt_per_s: float
    shrunk_speed: float  # B / N; 0: the job is paused without its spot GPUs
    notice_s: float
    wait_mean_s: float
    spot_restart_s: float
    spot_usd_per_s: float  # all spot GPUs together
    fixed_usd_per_s: float  # billed for the whole wall time (on-demand or reserved GPUs)


def _mode(run: TrainingRun, strategy: str, spot: SpotModel | None, reserved_gpus: int,
          reserved_usd_per_gpu_hour: float | None) -> _Mode:
    if strategy not in STRATEGIES:
        raise UnknownNameError("strategy", strategy, STRATEGIES)
    r, n = run.failures.rate_per_gpu_s, run.num_gpus
    if strategy == "on_demand":
        return _Mode(n * r, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0,
                     n * run.on_demand_usd_per_gpu_hour / HOUR_S)
    spot = SpotModel() if spot is None else spot
    reserved = reserved_gpus if strategy == "reserved_plus_spot" else 0
    if not 0 <= reserved <= n or reserved % run.gpus_per_node and reserved != n:
        raise InputError(f"reserved_gpus must be a multiple of gpus_per_node "
                         f"({run.gpus_per_node}) in [0, num_gpus={n}], got {reserved}")
    reserved_price = 0.0
    if reserved:
        if reserved_usd_per_gpu_hour is None or not reserved_usd_per_gpu_hour >= 0:
            raise InputError(f"reserved_usd_per_gpu_hour must be >= 0 for reserved_plus_spot, "
                             f"got {reserved_usd_per_gpu_hour}",
                             fix="pass the reserved (committed-use) price per GPU-hour")
        reserved_price = reserved_usd_per_gpu_hour
    spot_gpus = n - reserved
    spot_nodes = -(-spot_gpus // run.gpus_per_node)
    return _Mode(n * r, reserved * r, spot.job_preemption_rate_per_s(spot_nodes),
                 reserved / n, spot.notice_s, spot.capacity_wait_mean_s, spot.restart_s,
                 spot_gpus * spot.price_usd_per_gpu_hour(run.on_demand_usd_per_gpu_hour)
                 / HOUR_S, reserved * reserved_price / HOUR_S)


def _emergency_saves(run: TrainingRun, mode: _Mode) -> bool:
    # the notice must cover the blocking copy and the upload: the node vanishes at its end
    return mode.notice_s >= run.checkpoint_s + run.checkpoint_write_s


def _daly(run: TrainingRun, mode: _Mode) -> float:
    """Daly's interval for the rate of interruptions that lose work: failures, plus
    preemptions when the notice is too short to save (inf when none does)."""
    lossy = mode.fail_full_per_s + (0.0 if _emergency_saves(run, mode) else mode.preempt_per_s)
    return math.inf if lossy == 0 else daly_interval_s(run.checkpoint_s, 1.0 / lossy)


def _held(run: TrainingRun, daly: float) -> float:
    """Daly's interval held to at least the upload w (one upload in flight: a checkpoint
    cannot start before the last one is durable) and at most the work (a longer interval
    takes no checkpoint either)."""
    return min(max(daly, run.checkpoint_write_s), run.work_s)


def _default_grid(run: TrainingRun, held: float) -> np.ndarray:
    """Daly (held, _held) x 1/4 ... 4, 25 points, geometric, none shorter than the upload
    w: a shorter interval would start a checkpoint before the last one is durable (the
    model would take overlapping uploads for free)."""
    lo = max(0.25 * held, run.checkpoint_write_s)
    hi = max(4.0 * held, lo)
    return np.geomspace(lo, hi, 25) if hi > lo else np.array([lo])


def _events_per_trial(run: TrainingRun, mode: _Mode, tau: float) -> float:
    """Expected interruptions of one trial at interval tau. A cycle of tau + C of up-time
    survives the work-losing rate h with probability exp(-h (tau + C)), so it takes
    exp(h (tau + C)) attempts on average: expm1 of it failures per cycle, W / tau cycles. An
    interval longer than the work takes no checkpoint: the run is one cycle (tau = W). Every
    preemption is an event too, and with a shrink the capacity's return another."""
    lossy = mode.fail_full_per_s + (0.0 if _emergency_saves(run, mode) else mode.preempt_per_s)
    tau = min(tau, run.work_s)
    returns = 2.0 if mode.shrunk_speed > 0 else 1.0
    return (run.work_s / tau) * math.expm1(min(lossy * (tau + run.checkpoint_s), 700.0)) + \
        returns * run.work_s * mode.preempt_per_s


def _check_work(run: TrainingRun, mode: _Mode, intervals_s: list[float], trials: int) -> None:
    """Refuse, before drawing anything, runs whose events per trial are astronomical or
    whose total work (MAX_TRIAL_EVENTS) would take minutes: say so instead of looping."""
    events = [_events_per_trial(run, mode, tau) for tau in intervals_s]
    worst = max(range(len(events)), key=events.__getitem__)
    if events[worst] > MAX_EVENTS:
        lossy = mode.fail_full_per_s + (0.0 if _emergency_saves(run, mode)
                                        else mode.preempt_per_s)
        gap_s = 1 / lossy if lossy else math.inf
        raise InputError(f"the run would need about {events[worst]:.3g} restarts per trial: "
                         f"interruptions every {gap_s:.4g} s against a checkpoint interval "
                         f"of {intervals_s[worst]:.4g} s",
                         fix="checkpoint more often, or use fewer GPUs")
    per_group = max(1, GROUP_ELEMENTS // trials)  # as _simulate steps them
    groups = [events[i:i + per_group] for i in range(0, len(events), per_group)]
    work = sum(max(g) * (len(g) * trials + STEP_TRIALS) for g in groups)
    if work > MAX_TRIAL_EVENTS:
        raise InputError(
            f"the run is too long to draw: about {max(events):,.0f} events per "
            f"trial x {trials:,} trials x {len(events)} checkpoint interval(s) is "
            f"{work:.2g} trial-events (counting each step as {STEP_TRIALS:,} trials of "
            f"overhead), over the budget of {MAX_TRIAL_EVENTS:.0e} (about 30 s)",
            fix="use fewer trials (run.trials), one interval instead of a scan of 25 "
                "(run.optimise_interval: false), or fewer training.tokens")


def _simulate(run: TrainingRun, mode: _Mode, taus: list[float], trials: int, seed: int
              ) -> list[Samples]:
    """The trials at each interval of `taus`, several intervals to one array (rows), as
    many as GROUP_ELEMENTS allows: every row draws the same streams (common random
    numbers), so a group steps once per event where one interval at a time stepped once per
    event and interval (a scan of 25 intervals at 20 trials: 17 x less NumPy overhead)."""
    per_group = max(1, GROUP_ELEMENTS // trials)
    return [samples for start in range(0, len(taus), per_group)
            for samples in _simulate_group(run, mode, taus[start:start + per_group], trials,
                                           seed)]


@np.errstate(divide="ignore", invalid="ignore")  # rates of 0 give inf gaps, on purpose
def _simulate_group(run: TrainingRun, mode: _Mode, taus: list[float], trials: int, seed: int
                    ) -> list[Samples]:
    rng = np.random.default_rng(seed)
    work, c, w = run.work_s, run.checkpoint_s, run.checkpoint_write_s
    tau = np.array(taus, float)[:, None]  # one row per interval, one column per trial
    shape = (len(taus), trials)
    cycle = tau + c  # compute tau, then block C: snapshot i ends at up-time i * cycle
    saves = _emergency_saves(run, mode)
    shrinks = mode.shrunk_speed > 0  # else the job pauses while its spot GPUs are gone
    h_full = mode.fail_full_per_s + mode.preempt_per_s
    p = np.zeros(shape)  # progress (seconds of full-speed work) at the last (re)start
    full = np.ones(shape, bool)  # False: shrunk onto the reserved GPUs
    up_s, up_shrunk_s, wait_s = np.zeros(shape), np.zeros(shape), np.zeros(shape)
    fails, fails_shrunk, preempts, returns = (np.zeros(shape, np.int64) for _ in range(4))
    speed, h, h_pre, y = 1.0, h_full, mode.preempt_per_s, np.inf
    for i in range(MAX_EVENTS):
        if i % _BLOCK == 0:  # draw i of each stream is event i of every trial
            if (p >= work).all():
                break
            hits, waits = rng.standard_exponential((2, _BLOCK, trials))
            kinds = rng.random((_BLOCK, trials))
        e_hit, wait, u = hits[i % _BLOCK], waits[i % _BLOCK] * mode.wait_mean_s, \
            kinds[i % _BLOCK]
        if shrinks:
            speed = np.where(full, 1.0, mode.shrunk_speed)
            h = np.where(full, h_full, mode.fail_shrunk_per_s)
            h_pre = full * mode.preempt_per_s
            y = np.where(full, np.inf, wait)  # the spot capacity comes back
        x = e_hit / h  # up-time to the next failure or preemption (inf at rate 0)
        z = np.minimum(x, y)
        # compute left, and one checkpoint per full tau of it except at the very end
        compute_left = (work - p) / speed
        k = np.maximum(np.ceil(compute_left * ((1 - 1e-12) / tau) - 1.0), 0.0)
        finish_up = compute_left + k * c
        fin = finish_up <= z  # finished trials have nothing left: they stay finished
        stop = ~fin
        # progress when stopped, and at the last durable snapshot (lands at i * cycle + w)
        j = np.floor(z / cycle)
        now = p + speed * (j * tau + np.minimum(z - j * cycle, tau))
        durable = p + (speed * tau) * (j if w == 0 else np.maximum(np.floor((z - w) / cycle),
                                                                  0.0))
        cap = stop & (y < x)
        pre = stop & (u * h < h_pre)  # which process fired: P(preemption) = h_pre / h
        if saves:  # trains through the notice, less the emergency checkpoint at its end
            gained = speed * (mode.notice_s - c - w)
            done = pre & (now + gained >= work)  # finishes within the notice
            finish_up = np.where(done, z + (work - now) / speed, finish_up)
            fin, stop, pre = fin | done, stop & ~done, pre & ~done
            now = np.where(pre, now + gained, now)
        fail = stop & ~pre & ~cap
        p = np.where(fin, work, np.where(fail | (pre & (not saves)), durable, now))
        up = np.where(fin, finish_up, z)
        up_s += up
        fails += fail
        preempts += pre
        if shrinks:
            up_shrunk_s += np.where(full, 0.0, up)
            fails_shrunk += fail & ~full
            returns += cap
            full = (full & ~pre) | cap
        else:
            wait_s += np.where(pre, wait, 0.0)
    else:
        raise InputError(f"simulation stopped after {MAX_EVENTS:,} events per trial",
                         fix="checkpoint more often")
    # fixed costs by event: failure R; preemption notice (its training counted in p above),
    # then either R (shrink onto the reserved GPUs) or an unbilled wait and the spot
    # restart; a return of spot capacity a planned checkpoint (C + w) and the spot restart.
    # Spot GPUs are billed while held.
    r, notice, spot_restart = run.restart_s, mode.notice_s, mode.spot_restart_s
    scale_up = c + w + spot_restart
    if shrinks:
        wall = up_s + r * (fails + preempts) + notice * preempts + scale_up * returns
        spot_held = (up_s - up_shrunk_s + r * (fails - fails_shrunk) + notice * preempts
                     + scale_up * returns)
    else:
        wall = up_s + r * fails + (notice + spot_restart) * preempts + wait_s
        spot_held = wall - wait_s
    cost = mode.fixed_usd_per_s * wall + mode.spot_usd_per_s * spot_held
    return [Samples(wall_s=wall[i], cost_usd=cost[i], failures=fails[i],
                    preemptions=preempts[i]) for i in range(len(taus))]


def _summarise(run: TrainingRun, strategy: str, samples: Samples, *, trials: int, seed: int,
               interval_s: float, source: str, daly: float, scan: IntervalScan | None = None
               ) -> RunDistribution:
    return RunDistribution(
        strategy=strategy, trials=trials, seed=seed, interval_s=interval_s,
        interval_source=source, daly_interval_s=daly, wall_s=Stat.of(samples.wall_s),
        goodput=Stat.of(run.work_s / samples.wall_s), cost_usd=Stat.of(samples.cost_usd),
        interruptions=Stat.of(samples.failures + samples.preemptions),
        preemptions=Stat.of(samples.preemptions), samples=samples, scan=scan)


def simulate_run(run: TrainingRun, strategy: str = "on_demand", *,
                 spot: SpotModel | None = None, reserved_gpus: int = 0,
                 reserved_usd_per_gpu_hour: float | None = None,
                 interval_s: float | None = None, optimise_interval: bool = False,
                 interval_grid_s: np.ndarray | None = None, trials: int = 1000,
                 seed: int = 0) -> RunDistribution:
    """Distribution of wall time, goodput, cost and interruptions of `run` under `strategy`.

    The checkpoint interval is `interval_s` if given, else Daly's (checkpoint.py) for the
    rate of work-losing interruptions, raised to the upload w when shorter (source "upload");
    with `optimise_interval` it is the grid point (default _default_grid: Daly x 1/4 ... 4,
    none below the upload) with the least mean wall time, and `scan` holds the curve (a
    given `interval_s` is refused with it, since it would not be used).
    Deterministic for a given seed. Refused before any draw: more than MAX_TRIALS trials, or
    more work than MAX_TRIAL_EVENTS (see _check_work)."""
    mode = _mode(run, strategy, spot, reserved_gpus, reserved_usd_per_gpu_hour)
    check_number("trials", trials, ge=1, le=MAX_TRIALS, integer=True)
    check_number("seed", seed, ge=0, integer=True)
    if interval_s is not None:
        check_number("interval_s", interval_s, gt=0, fix="omit it to use Daly's interval")
        if optimise_interval:
            raise InputError("interval_s and optimise_interval=True: a given interval is not "
                             "scanned", fix="pass one of them")
    if interval_grid_s is not None and not optimise_interval:
        raise InputError("interval_grid_s is scanned only with optimise_interval=True",
                         fix="pass optimise_interval=True, or drop interval_grid_s")
    daly = _daly(run, mode)
    held = _held(run, daly)
    if not optimise_interval:
        tau, source = (float(interval_s), "given") if interval_s is not None else \
            (held, "upload" if held > daly else "daly")
        _check_work(run, mode, [tau], trials)
        return _summarise(run, strategy, _simulate(run, mode, [tau], trials, seed)[0],
                          trials=trials, seed=seed, interval_s=tau, source=source, daly=daly)
    grid = _default_grid(run, held) if interval_grid_s is None \
        else np.asarray(interval_grid_s, float)
    if grid.size == 0 or not np.all((grid > 0) & np.isfinite(grid)):
        raise InputError("interval_grid_s must be a non-empty list of intervals > 0")
    _check_work(run, mode, [float(tau) for tau in grid], trials)
    runs = _simulate(run, mode, [float(tau) for tau in grid], trials, seed)
    mean_wall = np.array([s.wall_s.mean() for s in runs])
    best = int(np.argmin(mean_wall))
    scan = IntervalScan(intervals_s=grid, mean_wall_s=mean_wall,
                        mean_goodput=np.array([np.mean(run.work_s / s.wall_s) for s in runs]),
                        best_interval_s=float(grid[best]), daly_interval_s=daly,
                        upload_s=run.checkpoint_write_s)
    return _summarise(run, strategy, runs[best], trials=trials, seed=seed,
                      interval_s=float(grid[best]), source="scan", daly=daly, scan=scan)


def compare_strategies(run: TrainingRun, *, spot: SpotModel | None = None,
                       reserved_gpus: int = 0, reserved_usd_per_gpu_hour: float | None = None,
                       **options) -> dict[str, RunDistribution]:
    """All three strategies with the same seed; reserved_plus_spot only when B > 0."""
    names = STRATEGIES if reserved_gpus else STRATEGIES[:2]
    return {name: simulate_run(run, name, spot=spot, reserved_gpus=reserved_gpus,
                               reserved_usd_per_gpu_hour=reserved_usd_per_gpu_hour, **options)
            for name in names}
