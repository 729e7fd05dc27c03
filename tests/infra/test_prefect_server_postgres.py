"""PREFECT_DB=postgres: infra/prefect_server.sh runs the server on a real (throwaway) PostgreSQL.

The cluster is started here with initdb/pg_ctl on a free port; the script gets only the asyncpg URL.
The deployments and the work pool must land in PostgreSQL (not in a SQLite file under PREFECT_HOME),
and the password must not appear in what the script prints or records.
"""

from __future__ import annotations

import pytest
from pg_cluster import PASSWORD, missing_reason, pg_cluster
from services import (
    alive,
    free_ports,
    leftovers,
    prefect_services,
    run_script,
    service_env,
    wait_no_leftovers,
)

pytestmark = [pytest.mark.slow, pytest.mark.e2e]


@pytest.mark.skipif(missing_reason() is not None, reason=str(missing_reason()))
def test_prefect_server_on_postgres(tmp_path):
    home = tmp_path / "home"
    (port,) = free_ports()
    with pg_cluster() as pg:
        env = service_env(home, PREFECT_PORT=str(port), PREFECT_DB="postgres",
                          PREFECT_API_DATABASE_CONNECTION_URL=pg.url)
        with prefect_services(env) as started:
            status = run_script("prefect_server.sh", "status", env=env)
            assert f"database postgresql postgres@127.0.0.1:{pg.port}/prefect" in status.stdout
            printed = started.stdout + started.stderr + status.stdout + (home / "logs" / "server.db").read_text()
            assert PASSWORD not in printed

            # Prefect's schema, the deployments of prefect.yaml and the work pool live in PostgreSQL.
            tables = set(pg.sql("select table_name from information_schema.tables where table_schema = 'public'"))
            assert {"flow_run", "deployment", "work_pool", "alembic_version"} <= tables
            deployments = set(pg.sql("select name from deployment"))
            assert {"init-model", "rl-train", "eval70-nightly"} <= deployments
            assert pg.sql("select name from work_pool") == ["skillgate-process"]
            assert pg.sql("select count(*) from worker w join work_pool p on p.id = w.work_pool_id "
                          "where p.name = 'skillgate-process'") == ["1"]
            assert not (home / "prefect" / "prefect.db").exists()
            # The worker (and so every flow run) never sees the database password.
            worker = int((home / "logs" / "worker.pid").read_text())
            assert PASSWORD.encode() not in open(f"/proc/{worker}/environ", "rb").read()

        assert not wait_no_leftovers(home)
        server_pids = pg.server_pids()
        assert server_pids  # PostgreSQL outlives the Prefect server: it is not the script's to stop
    assert not leftovers(home)
    assert not any(alive(p) for p in server_pids), "postgres left running"
