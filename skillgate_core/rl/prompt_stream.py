"""The order in which training prompts are drawn: seeded, endless, and identical after a resume.

Epoch e is a seeded permutation of the training rows (seed = hash of the run seed and e). Each Ray
worker draws from its own interleaved share of that endless sequence (worker r takes positions
r, r + W, r + 2W, ...), so workers never draw the same prompt in a step and the draws of one worker
do not depend on how many groups another rejected. A worker's state is one integer, its cursor,
saved in every checkpoint: a resumed run continues each worker's sequence exactly where the
checkpoint left it.

    stream = PromptStream(n_rows=100, seed=0, rank=1, world_size=2)
    i = stream.next()          # row index; stream.cursor is what a checkpoint stores
"""

from __future__ import annotations

import hashlib
import random
from dataclasses import dataclass, field
from functools import lru_cache

__all__ = ["PromptStream", "epoch_order"]


@lru_cache(maxsize=8)
def epoch_order(n_rows: int, seed: int, epoch: int) -> tuple[int, ...]:
    """Row indices of one epoch, a permutation that depends only on (n_rows, seed, epoch)."""
    digest = hashlib.sha256(f"skillgate-prompt-order::{seed}::{epoch}".encode()).hexdigest()
    order = list(range(n_rows))
    random.Random(int(digest[:16], 16)).shuffle(order)
    return tuple(order)


@dataclass
class PromptStream:
    """One worker's share of the endless seeded prompt sequence."""

    n_rows: int
    """Training rows to draw from."""
    seed: int
    """Run seed."""
    rank: int = 0
    """This worker's rank."""
    world_size: int = 1
    """Workers sharing the sequence."""
    cursor: int = 0
    """Draws this worker has made so far (the only state; checkpointed)."""
    drawn: list[int] = field(default_factory=list)
    """Row indices drawn since the last `take_drawn()` (for metrics and the resume test)."""

    def __post_init__(self) -> None:
        if self.n_rows < 1:
            raise ValueError("the prompt stream needs at least one training row")
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} outside world size {self.world_size}")

    def next(self) -> int:
        """The next row index of this worker's share."""
        position = self.cursor * self.world_size + self.rank
        epoch, offset = divmod(position, self.n_rows)
        self.cursor += 1
        index = epoch_order(self.n_rows, self.seed, epoch)[offset]
        self.drawn.append(index)
        return index

    def give_back(self, count: int) -> None:
        """Undo the last `count` draws: the next `next()` calls return those rows again, in the same order
        (rollouts: groups played ahead but not judged)."""
        if not 0 <= count <= min(self.cursor, len(self.drawn)):
            raise ValueError(f"give_back({count}): only {min(self.cursor, len(self.drawn))} draws can be undone")
        self.cursor -= count
        del self.drawn[len(self.drawn) - count:]

    def take_drawn(self) -> list[int]:
        """The indices drawn since the last call, clearing the list."""
        out, self.drawn = self.drawn, []
        return out
