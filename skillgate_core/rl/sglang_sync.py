"""Server-mode GRPO (rollout_source = "sglang"): the run's SGLang client and the weight push.

    servers = ServerRollouts(cfg, tokenizer, urls=..., model_dir=..., weights_dir=...)   # every rank
    policy = servers.policy(sampling)                 # this rank's rollouts go to the servers
    servers.push(engine, steps_done=3)                # every rank (collective), after each optimizer step

The portable path, used by grpo.py after every optimizer step (and once before the first rollout,
so the servers serve exactly the engine's weights, fresh or resumed): every rank enters the ZeRO-3
gather; rank 0 keeps the full weights, writes them as an HF model dir (one model.safetensors plus
the base model's config and tokenizer files) to `weights_dir/TAG` through a temp folder renamed into
place, asks every server to load it (POST /update_weights_from_disk, then /flush_cache: prefix-cache
KV of the old weights must not serve new rollouts) and deletes the folders of earlier pushes. Then
every rank waits for rank 0's outcome (a barrier that carries it), so no rank starts the next
rollouts on old weights and a failed push stops every rank with the same error. The folder must be
readable by the servers at the same path (the same machine, or a shared filesystem).

The fast path, `NCCLWeightBroadcast`, for GPU clusters (SGLang's "update weights from distributed
group", docs/advanced_features/sglang_for_rl.md): rank 0 forms one NCCL group with every server's
GPUs (POST /init_weights_update_group: rank 0 is the trainer, server i's tensor-parallel ranks follow
at its rank_offset) and, bucket by bucket, broadcasts the gathered tensors while the servers receive
and load them (POST /update_weights_from_distributed): no disk, no host copy. It was written from
SGLang's documentation and source and has NOT run against SGLang or over NCCL here (no CUDA, no
SGLang on the CPU machine); its group join and broadcast run in a test over gloo against a
stand-in receiver. grpo.py uses the disk path.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch

from skillgate_core.agent.policies import SGLangPolicy
from skillgate_core.base.atomic import building_dir
from skillgate_core.policy.local_sampler import SamplingConfig
from skillgate_core.policy.sglang_client import SGLangClient
from skillgate_core.rl.engine import collectives
from skillgate_core.rl.engine.deepspeed_engine import gathered_state_dict, iter_gathered_parameters
from skillgate_core.rl.grpo_config import GRPOConfig

__all__ = [
    "WEIGHTS_MARKER",
    "NCCLWeightBroadcast",
    "ServerRollouts",
    "join_weight_group",
    "push_weights_from_disk",
    "write_weights_dir",
]

WEIGHTS_MARKER = ".skillgate-pushed-weights"
"""A file in every folder `write_weights_dir` makes: only such folders are ever deleted by a later push."""
_WEIGHT_FILES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".safetensors.index.json", ".bin.index.json")


def write_weights_dir(state: dict[str, torch.Tensor], base_model_dir: str | Path, weights_dir: str | Path,
                      tag: str) -> Path:
    """`state` (parameter name -> full tensor, as gathered_state_dict returns it) as an HF model dir
    `weights_dir/tag`: model.safetensors plus every non-weight file of `base_model_dir` (config,
    generation config, tokenizer, chat template). Written to a temp folder, renamed into place, so a
    server never reads half a file. A tied lm_head is absent from the gather; loaders re-tie it."""
    from safetensors.torch import save_file

    base, target = Path(base_model_dir), Path(weights_dir) / tag
    # replace: the same step pushed again (a resumed run). Not durable: the servers load the folder at
    # once (from the page cache) and the next push deletes it, so an fsync would only force the weights
    # to disk on every optimizer step (measured on the dev VM's disk: 0.2 s per 512 MiB, so seconds a
    # step for a 9B model); a crash loses nothing a resumed run does not push again.
    with building_dir(target, replace=True, durable=False) as tmp:
        for path in sorted(base.iterdir()):
            if path.is_file() and not path.name.endswith(_WEIGHT_FILES):
                shutil.copy2(path, tmp / path.name)
        save_file({name: t.detach().contiguous() for name, t in state.items()}, str(tmp / "model.safetensors"),
                  metadata={"format": "pt"})
        (tmp / WEIGHTS_MARKER).write_text(f"{tag}\n")
    return target


def _prune(weights_dir: Path, keep: Path) -> None:
    """Delete earlier pushes (folders holding WEIGHTS_MARKER) other than `keep`."""
    for path in weights_dir.iterdir():
        if path != keep and path.is_dir() and (path / WEIGHTS_MARKER).is_file():
            shutil.rmtree(path, ignore_errors=True)


def push_weights_from_disk(engine: Any, client: SGLangClient | None, *, base_model_dir: str | Path,
                           weights_dir: str | Path, tag: str) -> str:
    """The engine's current weights onto every server, through a folder (module docstring).

    COLLECTIVE: every rank calls it (every rank enters the gather; only rank 0 keeps a copy, writes
    and calls the servers, so other ranks may pass client=None). Returns the folder on rank 0, ''
    elsewhere. Raises on every rank if rank 0's push failed.
    """
    state = gathered_state_dict(engine, only_rank=0)
    path, error, failure = "", None, None
    if collectives.rank() == 0:
        try:
            if client is None:
                raise ValueError("rank 0 needs the SGLang client to push weights")
            target = write_weights_dir(state, base_model_dir, weights_dir, tag)
            del state
            client.update_weights_from_disk(str(target))
            _prune(Path(weights_dir), keep=target)
            path = str(target)
        except Exception as exc:
            error, failure = f"{type(exc).__name__}: {exc}", exc
    outcome = collectives.all_gather_objects(error)  # the barrier: carries rank 0's outcome to every rank
    if failure is not None:
        raise failure
    if outcome[0] is not None:
        raise RuntimeError(f"rank 0 failed to push weights to the SGLang servers: {outcome[0]}")
    return path


class ServerRollouts:
    """rollout_source = "sglang" for one rank: the client it samples through and the disk push."""

    def __init__(self, config: GRPOConfig, tokenizer: Any, *, urls: Sequence[str], model_dir: str | Path,
                 weights_dir: str | Path) -> None:
        self.client = SGLangClient(urls, tokenizer, timeout_s=config.sglang_timeout_s)
        self.model_dir, self.weights_dir = Path(model_dir), Path(weights_dir)

    def check_health(self) -> None:
        """Every server answers /health (raises SGLangError naming the first one that does not)."""
        self.client.check_health()

    def policy(self, sampling: SamplingConfig, name: str = "policy") -> SGLangPolicy:
        return SGLangPolicy(self.client, sampling, name=name)

    def push(self, engine: Any, steps_done: int) -> str:
        """The engine's weights after `steps_done` optimizer steps onto every server (COLLECTIVE)."""
        return push_weights_from_disk(engine, self.client, base_model_dir=self.model_dir,
                                      weights_dir=self.weights_dir, tag=f"step-{steps_done:08d}")

    def close(self) -> None:
        self.client.close()


def join_weight_group(master_address: str, master_port: int, *, world_size: int, rank: int, group_name: str,
                      backend: str = "nccl", timeout_s: float = 600.0) -> Any:
    """Join a process group of its own (not the default one): the same construction SGLang's server
    uses on its side of /init_weights_update_group (sglang/srt/utils: a TCP rendezvous at
    tcp://MASTER:PORT, keys under a PrefixStore named `group_name`, ranks mapped to themselves).
    The group's rank 0 hosts the store. Uses torch.distributed internals that move between releases."""
    import inspect

    from torch.distributed import distributed_c10d as c10d

    timeout = timedelta(seconds=timeout_s)
    store, rank, world_size = next(c10d.rendezvous(f"tcp://{master_address}:{master_port}", rank, world_size,
                                                   timeout=timeout))
    store.set_timeout(timeout)
    store = c10d.PrefixStore(group_name, store)
    options = "backend_options" if "backend_options" in inspect.signature(c10d._new_process_group_helper).parameters \
        else "pg_options"
    group, _ = c10d._new_process_group_helper(world_size, rank, [], c10d.Backend(backend), store,
                                              group_name=group_name,  # type: ignore[arg-type]  # a NewType of str in recent torch only
                                              timeout=timeout, **{options: None})
    c10d._world.pg_group_ranks[group] = {i: i for i in range(world_size)}
    return group


class NCCLWeightBroadcast:
    """The fast weight push (module docstring): rank 0 + every server's GPUs in one group.

        sync = NCCLWeightBroadcast(client, master_address="10.0.0.2", master_port=29600)
        sync.connect()            # rank 0, once; needs every server up
        sync.push(engine)         # every rank, after each optimizer step (collective gather)

    `ranks_per_server[i]` is how many GPUs server i puts in the group (its tp_size; default: read
    from GET /get_server_info, which must report dp_size 1).
    """

    def __init__(self, client: SGLangClient, *, master_address: str, master_port: int,
                 group_name: str = "skillgate_weights", backend: str = "nccl",
                 ranks_per_server: Sequence[int] | None = None, bucket_bytes: int = 512 * 2**20,
                 timeout_s: float = 600.0) -> None:
        self.client, self.master_address, self.master_port = client, master_address, master_port
        self.group_name, self.backend, self.bucket_bytes, self.timeout_s = group_name, backend, bucket_bytes, timeout_s
        self.ranks_per_server = list(ranks_per_server) if ranks_per_server is not None else None
        self.group: Any = None

    def _server_ranks(self) -> list[int]:
        if self.ranks_per_server is not None:
            return self.ranks_per_server
        sizes = []
        for url, info in zip(self.client.urls, self.client.server_info(), strict=True):
            if int(info.get("dp_size", 1)) != 1:
                raise ValueError(f"SGLang server {url} runs dp_size {info.get('dp_size')}: give ranks_per_server")
            sizes.append(int(info.get("tp_size", 1)))
        return sizes

    def connect(self) -> None:
        """Form the group (rank 0 only): every server joins over HTTP while this process joins as rank 0."""
        sizes = self._server_ranks()
        world = 1 + sum(sizes)
        offsets = [1 + sum(sizes[:i]) for i in range(len(sizes))]
        with ThreadPoolExecutor(max_workers=len(sizes)) as pool:
            answers = [pool.submit(self.client.init_weights_update_group, url, master_address=self.master_address,
                                   master_port=self.master_port, rank_offset=offset, world_size=world,
                                   group_name=self.group_name, backend=self.backend)
                       for url, offset in zip(self.client.urls, offsets, strict=True)]
            self.group = join_weight_group(self.master_address, self.master_port, world_size=world, rank=0,
                                           group_name=self.group_name, backend=self.backend, timeout_s=self.timeout_s)
            for answer in answers:
                answer.result()

    def push(self, engine: Any) -> None:
        """Broadcast the engine's weights, bucket by bucket (COLLECTIVE: every rank enters every gather;
        rank 0 alone talks to the servers). Ends with a barrier."""
        root = collectives.rank() == 0
        if root and self.group is None:
            raise RuntimeError("NCCLWeightBroadcast.push before connect()")
        for bucket in iter_gathered_parameters(engine, self.bucket_bytes):
            if root:
                self._send(bucket)
        if root:
            self.client.flush_cache()
        collectives.barrier()

    def _send(self, bucket: list[tuple[str, torch.Tensor]]) -> None:
        names = [name for name, _ in bucket]
        dtypes = [str(t.dtype).removeprefix("torch.") for _, t in bucket]
        shapes = [list(t.shape) for _, t in bucket]
        with ThreadPoolExecutor(max_workers=len(self.client.urls)) as pool:
            # Each server answers once it received and loaded the bucket: ask first, then broadcast.
            answers = [pool.submit(self.client.update_weights_from_distributed, url, names=names, dtypes=dtypes,
                                   shapes=shapes, group_name=self.group_name, flush_cache=False)
                       for url in self.client.urls]
            for _, tensor in bucket:
                torch.distributed.broadcast(tensor.contiguous(), group=self.group, group_src=0)
            for answer in answers:
                answer.result()

    def close(self) -> None:
        """Servers leave the group; this process destroys its side."""
        if self.group is None:
            return
        for url in self.client.urls:
            self.client.destroy_weights_update_group(url, group_name=self.group_name)
        torch.distributed.destroy_process_group(self.group)
        self.group = None
