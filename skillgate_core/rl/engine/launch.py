"""Run one per-worker training function on N Ray Train workers, or in this process; same function.

The per-worker function takes a `WorkerContext` and your (picklable) config, runs collectively on
every rank, and returns something small and picklable (metrics, output paths; no torch tensors:
Ray refuses them, so both paths do; save tensors under ctx.run_dir and return the path). By the time it is
called a torch.distributed process group exists (gloo on CPU, NCCL on GPU), this rank's device is
selected and LOCAL_RANK / RANK / WORLD_SIZE are set, so `skillgate_core.rl.engine` can build
DeepSpeed engines. The launcher returns every rank's return value, in rank order.

    def train_worker(ctx: WorkerContext, cfg: MyConfig) -> dict:
        engine = build_engine(cfg.model_dir, cfg.engine)
        ...
        return {"rank": ctx.rank, "loss": loss}

    result = launch_ray(train_worker, cfg, LaunchConfig(num_workers=2))   # Ray Train TorchTrainer
    result = run_in_process(train_worker, cfg)                            # no Ray: world 1, or torchrun's

Ray: a local cluster is started (include_dashboard=False, num_cpus sized for the machine) unless
$RAY_ADDRESS (or LaunchConfig.ray_address) names one to join, or Ray is already initialised by the
caller (then the caller's runtime env must carry PYTHONPATH: see `worker_env`). Workers do not
inherit the driver's sys.path: they get PYTHONPATH = this checkout + LaunchConfig.pythonpath +
the driver's PYTHONPATH, and the state-dir / cache variables (SKILLGATE_HOME, TORCH_EXTENSIONS_DIR,
HF_HOME, ...). The function must therefore live in an importable module, not in __main__.
Each run gets RunConfig(storage_path, name) with a unique name (reusing a name makes Ray resume
that run: pass resume=True to mean it) and FailureConfig(max_failures). Results come back as
the Ray result's return value (rank 0 gathers all ranks'), not through ray.train.report, which
costs ~2 s a call here; call `ctx.report` only to hand Ray a checkpoint.

`run_in_process` needs no Ray: a world of 1 on a free local port, or, under torchrun, torchrun's
world (RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT in the environment).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skillgate_core.base.interrupts import SignalStop, request_stop, stop_requested
from skillgate_core.base.library_noise import quiet_library_output
from skillgate_core.base.paths import apply_cache_env, state_layout

__all__ = [
    "LaunchConfig",
    "LaunchResult",
    "WorkerContext",
    "WorkerFn",
    "init_ray",
    "launch_ray",
    "run_in_process",
    "unique_run_name",
    "worker_env",
]

# Forwarded from the driver to every worker when set (caches must agree: one compile, one download).
FORWARDED_ENV = (
    "HF_HOME",
    "HF_HUB_OFFLINE",
    "TRANSFORMERS_OFFLINE",
    "TORCH_EXTENSIONS_DIR",
    "TRITON_CACHE_DIR",
    "XDG_CACHE_HOME",
    "MPLCONFIGDIR",
    "TOKENIZERS_PARALLELISM",
    "OMP_NUM_THREADS",
    "DS_ACCELERATOR",
    "NCCL_NVLS_ENABLE",
    "TORCH_SYMM_MEM_DISABLE_MULTICAST",
    "NVSHMEM_DISABLE_NVLS",
)


@dataclass(frozen=True)
class WorkerContext:
    """Who this worker is; handed to the per-worker function."""

    rank: int
    """Global rank, 0..world_size-1."""
    local_rank: int
    """Rank on this node (the CUDA device index on GPU)."""
    world_size: int
    """Number of workers."""
    device: str
    """This rank's device: "cpu" or "cuda:<local_rank>" (already made current)."""
    backend: str
    """torch.distributed backend of the default process group: "gloo" or "nccl"."""
    run_dir: Path
    """This run's directory (RunConfig storage_path / name): shared by all ranks, for outputs."""
    restored_checkpoint: Path | None = None
    """Checkpoint directory Ray restored after a worker failure (None on a fresh start)."""
    under_ray: bool = False
    """True inside a Ray Train worker, False under run_in_process."""

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that writes shared files."""
        return self.rank == 0

    def report(self, metrics: Mapping[str, Any], checkpoint_dir: str | Path | None = None) -> None:
        """ray.train.report(metrics, checkpoint) under Ray (EVERY rank must call it; ~2 s a call);
        ignored under run_in_process. Use it to give Ray a checkpoint to restart from."""
        if not self.under_ray:
            return
        import ray.train

        checkpoint = ray.train.Checkpoint.from_directory(str(checkpoint_dir)) if checkpoint_dir else None
        ray.train.report(dict(metrics), checkpoint=checkpoint)


WorkerFn = Callable[[WorkerContext, Any], Any]
"""fn(ctx, config) -> a small picklable value (or None)."""


@dataclass(frozen=True)
class LaunchConfig:
    """How many workers, where, and how Ray records the run."""

    num_workers: int = 1
    """Ray Train workers (one per GPU with use_gpu)."""
    use_gpu: bool = False
    """One GPU per worker and the NCCL backend; False = CPU workers over gloo."""
    cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each worker."""
    storage_path: str | None = None
    """RunConfig.storage_path (absolute; shared storage on a multi-node cluster); None = SKILLGATE_HOME/ray."""
    name: str | None = None
    """RunConfig.name; None = a unique `unique_run_name(name_prefix)`."""
    name_prefix: str = "skillgate"
    """Prefix of generated run names."""
    resume: bool = False
    """Allow a `name` whose run directory exists (Ray then resumes that run)."""
    max_failures: int = 0
    """FailureConfig.max_failures: worker-group restarts before the run fails."""
    ray_address: str | None = None
    """Cluster to join; None = $RAY_ADDRESS if set, else start a local Ray."""
    local_num_cpus: int | None = None
    """CPUs a local Ray advertises; None = max(machine CPUs, workers x cpus_per_worker)."""
    pythonpath: tuple[str, ...] = ()
    """Extra directories put on the workers' PYTHONPATH (where the per-worker function lives)."""
    env: tuple[tuple[str, str], ...] = ()
    """Extra (name, value) environment variables for the workers."""
    timeout_s: int = 1800
    """torch.distributed timeout of the workers' process group."""

    def __post_init__(self) -> None:
        if self.num_workers < 1:
            raise ValueError("num_workers must be >= 1")
        if self.cpus_per_worker <= 0:
            raise ValueError("cpus_per_worker must be > 0")


@dataclass(frozen=True)
class LaunchResult:
    """What a launch returns."""

    name: str
    """The run name."""
    run_dir: Path
    """storage_path / name (Ray's records of the run, and whatever the workers wrote there)."""
    results: tuple[Any, ...]
    """Each rank's return value, in rank order."""


def unique_run_name(prefix: str = "skillgate") -> str:
    """prefix-YYYYmmdd-HHMMSS-<8 hex>: unique per run (Ray resumes a run whose name it has seen)."""
    return f"{prefix}-{datetime.now(UTC):%Y%m%d-%H%M%S}-{uuid.uuid4().hex[:8]}"


def _checkout_root() -> Path:
    import skillgate_core

    return Path(skillgate_core.__file__).resolve().parent.parent


def worker_env(config: LaunchConfig) -> dict[str, str]:
    """Environment variables every worker gets: PYTHONPATH (this checkout first), SKILLGATE_HOME
    (absolute), the forwarded cache variables, then config.env."""
    paths = [str(_checkout_root()), *(str(Path(p).resolve()) for p in config.pythonpath)]
    paths += [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths)), "SKILLGATE_HOME": str(state_layout().home)}
    env |= {k: os.environ[k] for k in FORWARDED_ENV if k in os.environ}
    env |= dict(config.env)
    return env


def init_ray(config: LaunchConfig) -> bool:
    """Connect to Ray: join config.ray_address / $RAY_ADDRESS, else start a local cluster.

    Returns True if this call initialised Ray (the caller then owns ray.shutdown()), False if Ray
    was already initialised.
    """
    import ray

    if ray.is_initialized():
        return False
    address = config.ray_address or os.environ.get("RAY_ADDRESS")
    runtime_env = {"env_vars": worker_env(config)}
    # The workers' stdout/stderr (Ray Train's controller chatter, library warnings, one line per actor)
    # stay in Ray's session logs: the driver shows progress itself and a failure's traceback comes back
    # with the exception. SKILLGATE_RAY_WORKER_LOGS=1 streams them here again.
    to_driver = os.environ.get("SKILLGATE_RAY_WORKER_LOGS", "") == "1"
    if address:
        runtime_env["env_vars"]["RAY_ADDRESS"] = address  # Ray's own helper actors look it up
        ray.init(address=address, runtime_env=runtime_env, log_to_driver=to_driver, logging_level=logging.WARNING)
    else:
        cpus = config.local_num_cpus or max(os.cpu_count() or 1, int(config.num_workers * config.cpus_per_worker + 0.999))
        ray.init(num_cpus=cpus, include_dashboard=False, runtime_env=runtime_env, log_to_driver=to_driver,
                 logging_level=logging.WARNING)
    return True


def _interruptible(trainer_cls: type) -> type:
    """`trainer_cls` whose Ctrl-C stops the training and then does what this process's own handler does.

    Ray Train replaces the SIGINT handler while `fit()` runs with one that aborts the run's controller
    and later exits through SystemExit (recorded as a failure, `SystemExit: 1`), and never puts the
    previous handler back. This one aborts the controller on the first signal (the Ray workers and
    their DeepSpeed engines stop; on a cluster that outlives this process too), then hands the
    signal to the handler that was there before (the command line's: one line, the stop recorded,
    SignalStop raised), or raises SignalStop itself."""
    import ray

    class Interruptible(trainer_cls):
        def _register_sigint_handler(self, controller: Any) -> None:
            before = signal.getsignal(signal.SIGINT)

            def handler(signum: int, frame: Any) -> None:
                if stop_requested() is None:
                    with contextlib.suppress(Exception):
                        ray.get(controller.abort.remote(), timeout=ABORT_WAIT_S)
                if callable(before) and before is not signal.default_int_handler:
                    before(signum, frame)
                request_stop(signal.Signals(signum).name)
                raise SignalStop(signal.Signals(signum).name)

            signal.signal(signal.SIGINT, handler)

    return Interruptible


ABORT_WAIT_S = 15.0
"""How long a Ctrl-C waits for Ray Train to abort its workers before the driver unwinds anyway."""


def launch_ray(fn: WorkerFn, fn_config: object, config: LaunchConfig) -> LaunchResult:
    """Run fn(ctx, fn_config) on config.num_workers Ray Train workers (TorchTrainer); block until
    done; every rank's return value. Raises Ray's TrainingFailedError if the run fails."""
    import ray
    from ray.train.torch import TorchConfig

    # The classes `ray.train` and `ray.train.torch` export under Train V2 (Ray's default, and what
    # worker_runtime_env and Result.return_value need), named where a type checker can see them.
    from ray.train.v2.api.config import FailureConfig, RunConfig, ScalingConfig
    from ray.train.v2.torch.torch_trainer import TorchTrainer

    name = config.name or unique_run_name(config.name_prefix)
    storage = Path(config.storage_path) if config.storage_path else state_layout().home / "ray"
    storage = storage.resolve()
    run_dir = storage / name
    if run_dir.exists() and not config.resume:
        raise FileExistsError(f"{run_dir} exists: Ray would resume that run; pick a new name or resume=True")
    run_dir.mkdir(parents=True, exist_ok=True)
    started = init_ray(config)
    sigint_before = signal.getsignal(signal.SIGINT)
    try:
        resources: dict[str, float] = {"CPU": config.cpus_per_worker}
        if config.use_gpu:
            resources["GPU"] = 1
        trainer = _interruptible(TorchTrainer)(
            _ray_worker,
            train_loop_config={"fn": fn, "config": fn_config, "run_dir": str(run_dir), "use_gpu": config.use_gpu},
            torch_config=TorchConfig(backend="nccl" if config.use_gpu else "gloo", timeout_s=config.timeout_s),
            scaling_config=ScalingConfig(
                num_workers=config.num_workers, use_gpu=config.use_gpu, resources_per_worker=resources
            ),
            run_config=RunConfig(
                name=name,
                storage_path=str(storage),
                failure_config=FailureConfig(max_failures=config.max_failures),
                worker_runtime_env={"env_vars": worker_env(config)},
            ),
        )
        result = trainer.fit()
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, sigint_before)  # Ray Train's handler would outlive the run otherwise
        if started:
            ray.shutdown()
    results = result.return_value  # a V2 Result (Ray annotates fit() with V1's)
    if results is None or len(results) != config.num_workers:
        raise RuntimeError(f"expected {config.num_workers} worker results, got {results!r}")
    return LaunchResult(name=name, run_dir=run_dir, results=tuple(results))


def _ray_worker(payload: dict[str, Any]) -> list[Any] | None:
    """Ray Train's train_loop_per_worker: build the context, run fn, gather results to rank 0."""
    apply_cache_env()  # fresh process: caches under SKILLGATE_HOME unless the driver forwarded them
    quiet_library_output()  # before DeepSpeed is imported
    import ray.train
    import torch

    rctx = ray.train.get_context()
    rank, local_rank, world = rctx.get_world_rank(), rctx.get_local_rank(), rctx.get_world_size()
    for key, value in (("RANK", rank), ("LOCAL_RANK", local_rank), ("WORLD_SIZE", world)):
        os.environ.setdefault(key, str(value))
    if payload["use_gpu"]:
        from ray.train.torch import get_device

        device = get_device()
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    checkpoint = ray.train.get_checkpoint()
    restored = None
    if checkpoint is not None:
        local = checkpoint.filesystem is not None and checkpoint.filesystem.type_name == "local"
        restored = Path(checkpoint.path if local else checkpoint.to_directory())
    ctx = WorkerContext(
        rank=rank,
        local_rank=local_rank,
        world_size=world,
        device=str(device),
        backend=torch.distributed.get_backend(),
        run_dir=Path(payload["run_dir"]),
        restored_checkpoint=restored,
        under_ray=True,
    )
    return _call_and_gather(payload["fn"], ctx, payload["config"])


def _call_and_gather(fn: WorkerFn, ctx: WorkerContext, fn_config: object) -> list[Any] | None:
    from skillgate_core.rl.engine.collectives import all_gather_objects

    value = _no_tensors(fn(ctx, fn_config))
    gathered = all_gather_objects(value)
    return gathered if ctx.rank == 0 else None


def _no_tensors(value: object) -> Any:
    """Ray refuses torch tensors in a return value; refuse them on both paths alike."""
    import torch

    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            raise TypeError(
                "a worker function returned a torch tensor: return numbers / numpy arrays, or save "
                "tensors under ctx.run_dir and return the path"
            )
        if isinstance(item, Mapping):
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set):
            stack.extend(item)
    return value


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _env(values: Mapping[str, str]) -> Iterator[None]:
    previous = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in previous.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _destroy_process_group() -> None:
    import torch.distributed as dist

    ds_comm = sys.modules.get("deepspeed.comm.comm")
    if ds_comm is not None and getattr(ds_comm, "cdb", None) is not None:
        ds_comm.destroy_process_group()  # also drops DeepSpeed's cached group handles
    elif dist.is_initialized():
        dist.destroy_process_group()


def run_in_process(
    fn: WorkerFn, fn_config: object, *, run_dir: str | Path | None = None, use_gpu: bool | None = None
) -> LaunchResult:
    """Run fn(ctx, fn_config) here, without Ray (tests, debugging, torchrun).

    World: torchrun's when its variables are set, else 1 (a private port on 127.0.0.1). An existing
    process group is reused and left alone; one created here is destroyed on return. use_gpu None =
    CUDA when available (NCCL), else CPU (gloo). Returns every rank's value (all_gather).
    """
    import torch
    import torch.distributed as dist

    from skillgate_core.rl.engine.collectives import all_gather_objects

    gpu = torch.cuda.is_available() if use_gpu is None else use_gpu
    torchrun = all(k in os.environ for k in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"))
    env = {} if torchrun else {
        "RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0",
        "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
    }  # fmt: skip
    with _env(env):
        local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        if gpu:
            torch.cuda.set_device(local_rank)
        created = not dist.is_initialized()
        if created:
            dist.init_process_group(backend="nccl" if gpu else "gloo", init_method="env://")
        try:
            name = all_gather_objects(unique_run_name("local"))[0]  # one name for every rank
            directory = Path(run_dir) if run_dir else state_layout().home / "ray" / name
            directory.mkdir(parents=True, exist_ok=True)
            ctx = WorkerContext(
                rank=dist.get_rank(),
                local_rank=local_rank,
                world_size=dist.get_world_size(),
                device=f"cuda:{local_rank}" if gpu else "cpu",
                backend=dist.get_backend(),
                run_dir=directory,
            )
            results = all_gather_objects(_no_tensors(fn(ctx, fn_config)))
        finally:
            if created:
                _destroy_process_group()
    return LaunchResult(name=name, run_dir=directory, results=tuple(results))
