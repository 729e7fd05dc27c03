"""Infrastructure attacks: an image build that reaches the network, sandboxes that outlive a killed owner.

- Docker image builds run the task author's RUN lines: they must be as offline as the sandbox
  (network_mode none for builds too), or a task could fetch (or send) anything at build time.
- A run SIGKILLed mid-episode cannot clean up: its bubblewrap session (tmpfs, cgroup) or its
  container stays. Every run entry point (episodes, task check, collect) reaps the orphans of dead
  owners when it starts, and never anything whose owner is alive.
"""

from __future__ import annotations

import secrets

from skillgate_core.envs.sandbox import start_sandbox


def test_image_builds_have_no_network(docker_ready, make_task):
    from skillgate_core.envs.docker_images import docker_client

    nonce = secrets.token_hex(8)  # a fresh image every run: a cached one would prove nothing
    task = make_task(dockerfile=f"FROM ubuntu:24.04\nWORKDIR /app\nLABEL nonce={nonce}\n"
                                "RUN ls /sys/class/net > /app/netifs.txt\n", task_id=f"net-{nonce}")
    box = start_sandbox(task, backend="docker")
    try:
        interfaces = box.read_file("/app/netifs.txt").decode().split()
    finally:
        box.stop()
        docker_client().api.remove_image(box.image, force=True)
    assert interfaces == ["lo"], interfaces  # no eth0: the build had no network
