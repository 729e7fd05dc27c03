"""A throwaway PostgreSQL cluster for one test: initdb in a temp dir, pg_ctl on a free port, then stopped.

PostgreSQL refuses to run as root, so as root the cluster runs as the `postgres` system user
(`runuser -u postgres`, from Debian's postgresql package) in a folder it owns; otherwise as the
current user. Nothing of the machine's own PostgreSQL (if any) is used or touched.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from services import alive, free_ports

PASSWORD = "sg-test-secret"  # host connections need it (scram-sha-256), so the URL carries a password


def pg_bin() -> Path | None:
    """The folder of initdb/pg_ctl/postgres (Debian keeps them off PATH), or None when not installed."""
    found = shutil.which("initdb")
    if found:
        return Path(os.path.realpath(found)).parent
    versions = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(p.split("/")[4]))
    return Path(versions[-1]).parent if versions else None


def missing_reason() -> str | None:
    """Why the cluster cannot run here (for pytest.skip), or None."""
    if pg_bin() is None:
        return "PostgreSQL server binaries (initdb, pg_ctl) not found: apt-get install postgresql"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no 'postgres' user to run PostgreSQL as"
        if not shutil.which("runuser"):
            return "running as root without runuser (util-linux) to drop to the postgres user"
    return None


@dataclass(frozen=True)
class Cluster:
    port: int
    data: Path
    database: str
    user: str

    @property
    def url(self) -> str:
        """The SQLAlchemy/asyncpg URL Prefect takes (PREFECT_API_DATABASE_CONNECTION_URL)."""
        return f"postgresql+asyncpg://{self.user}:{PASSWORD}@127.0.0.1:{self.port}/{self.database}"

    def sql(self, query: str) -> list[str]:
        """Run one query through psql over the unix socket; rows as lines (unaligned, tuples only)."""
        out = _as_pg([str(pg_bin() / "psql"), "-h", str(self.data.parent / "sock"), "-p", str(self.port),
                      "-U", self.user, "-d", self.database, "-XAtc", query])
        return out.splitlines()

    def server_pids(self) -> list[int]:
        """The postmaster and its children (backends, checkpointer, ...) alive now."""
        pidfile = self.data / "postmaster.pid"
        if not pidfile.exists():
            return []
        main = int(pidfile.read_text().split()[0])
        ps = subprocess.run(["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True, check=True).stdout
        children = [int(p) for p, pp in (line.split() for line in ps.splitlines()) if int(pp) == main]
        return [pid for pid in [main, *children] if alive(pid)]


def _as_pg(cmd: list[str]) -> str:
    prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
    result = subprocess.run(prefix + cmd, capture_output=True, text=True, timeout=120, cwd="/")
    if result.returncode:
        raise RuntimeError(f"{' '.join(cmd)} exited {result.returncode}: {result.stderr}{result.stdout}")
    return result.stdout


@contextlib.contextmanager
def pg_cluster(database: str = "prefect") -> Iterator[Cluster]:
    """initdb + pg_ctl start on a free port; yields the cluster; always stops it and deletes its files."""
    (port,) = free_ports()
    root = Path(tempfile.mkdtemp(prefix="sg-pg-"))  # short: the socket path must fit in 107 chars
    if os.geteuid() == 0:
        os.chown(root, pwd.getpwnam("postgres").pw_uid, pwd.getpwnam("postgres").pw_gid)
    cluster = Cluster(port=port, data=root / "data", database=database, user="postgres")
    bin_dir = pg_bin()
    try:
        _as_pg(["sh", "-c", f"echo '{PASSWORD}' > {root}/pw && mkdir {root}/sock"])
        _as_pg([str(bin_dir / "initdb"), "-D", str(cluster.data), "-U", cluster.user, "--pwfile", f"{root}/pw",
                "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync"])
        opts = f"-p {port} -k {root}/sock -c listen_addresses=127.0.0.1 -c fsync=off"
        _as_pg([str(bin_dir / "pg_ctl"), "-D", str(cluster.data), "-o", opts, "-l", f"{root}/pg.log", "-w",
                "-t", "60", "start"])
        _as_pg([str(bin_dir / "createdb"), "-h", f"{root}/sock", "-p", str(port), "-U", cluster.user, database])
        yield cluster
    finally:
        if (cluster.data / "postmaster.pid").exists():
            pids = cluster.server_pids()
            with contextlib.suppress(RuntimeError):
                _as_pg([str(bin_dir / "pg_ctl"), "-D", str(cluster.data), "-m", "fast", "-w", "-t", "60", "stop"])
            deadline = time.time() + 20
            while any(alive(p) for p in pids) and time.time() < deadline:
                time.sleep(0.2)
        shutil.rmtree(root, ignore_errors=True)
