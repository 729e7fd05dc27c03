"""`skillgate sql` (and warehouse.query) is truly read-only: one SELECT, no file, network, setting or
catalog change; every other statement kind is refused with a message saying why."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner
from wh_scenario import Scenario

from deployments.cli import app
from warehouse import query
from warehouse.sql_guard import ReadOnlySqlError

runner = CliRunner()


def _refused(statement: str) -> str:
    res = runner.invoke(app, ["sql", statement])
    assert res.exit_code == 2, (statement, res.output)
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    return " ".join(res.output.split())


REFUSED = {
    "copy": ("copy (select * from run) to '{out}/runs.csv'", "COPY", "writes files"),
    "copy-from": ("copy run from '{out}/runs.csv'", "COPY", "writes files"),
    "export": ("export database '{out}/dump'", "EXPORT", "writes files"),
    "attach": ("attach '{out}/other.duckdb' as other", "ATTACH", "other databases"),
    "detach": ("detach other", "DETACH", "other databases"),
    "use": ("use memory", "SET", "settings"),
    "install": ("install httpfs", "LOAD", "extensions"),
    "load": ("load json", "LOAD", "extensions"),
    "pragma": ("pragma enable_profiling", "PRAGMA", "settings"),
    "set": ("set enable_external_access = true", "SET", "settings"),
    "reset": ("reset threads", "SET", "settings"),
    "create-table": ("create table t (a int)", "CREATE", "changes the warehouse"),
    "create-temp": ("create temp table t as select 1", "CREATE", "changes the warehouse"),
    "create-secret": ("create secret (type s3, key_id 'x', secret 'y')", "CREATE", "changes the warehouse"),
    "insert": ("insert into config values ('x', 'y', '{{}}')", "INSERT", "changes the warehouse"),
    "update": ("update run set stage = 'x'", "UPDATE", "changes the warehouse"),
    "delete": ("delete from run", "DELETE", "changes the warehouse"),
    "drop": ("drop table run_end", "DROP", "changes the warehouse"),
    "alter": ("alter table run add column x int", "ALTER", "changes the warehouse"),
    "checkpoint": ("checkpoint", "CALL", "one SELECT"),
    "vacuum": ("vacuum", "VACUUM", "one SELECT"),
    "transaction": ("begin transaction", "TRANSACTION", "one SELECT"),
    "two-statements": ("select 1; copy (select 1) to '{out}/x.csv'", "2 statements", "one at a time"),
    "explain-copy": ("explain analyze copy (select 1) to '{out}/x.csv'", "COPY", "writes files"),
}


@pytest.mark.parametrize("kind", sorted(REFUSED))
def test_every_statement_kind_that_is_not_a_select_is_refused(scenario: Scenario, tmp_path: Path, kind: str):
    statement, what, why = REFUSED[kind]
    target = tmp_path / "out"
    target.mkdir()
    statement = statement.format(out=target)
    out = _refused(statement)
    assert "read-only" in out and what in out and why in out, out
    assert list(target.iterdir()) == [], "nothing may be written"
    with pytest.raises(ReadOnlySqlError):
        query(statement, state=scenario.state)


@pytest.mark.parametrize(
    "statement",
    [
        "select * from read_text('/etc/hostname')",
        "select * from read_csv('/etc/passwd')",
        "select * from glob('/etc/*')",
        "select * from read_parquet('https://example.com/x.parquet')",
    ],
)
def test_a_select_cannot_read_files_or_the_network(scenario: Scenario, statement: str):
    out = _refused(statement)
    assert "reads only the warehouse" in out and "file system operations are disabled" in out, out


def test_a_bare_file_name_is_not_read_as_a_table(scenario: Scenario):
    out = _refused("select * from '/etc/hostname'")  # DuckDB's replacement scan is off with file access
    assert "Table with name /etc/hostname does not exist" in out
    assert Path("/etc/hostname").read_text().strip() not in out


def test_reading_queries_still_work(scenario: Scenario):
    for statement in ("select count(*) as n from run", "with r as (select * from v_run) select count(*) from r",
                      "describe run", "show tables", "summarize run_end", "explain select * from v_run",
                      "from v_run select run_id", "select * from metric_lineage('exp-1/eval70-step-20/trial_success')"):
        res = runner.invoke(app, ["sql", statement])
        assert res.exit_code == 0, (statement, res.output)
    assert query("select count(*) from run", state=scenario.state).rows == [(4,)]
    assert query("-- a comment first\nexplain select 1", state=scenario.state).rows
    with pytest.raises(ReadOnlySqlError, match="got COPY"):
        query("/* c */ -- c\nexplain copy (select 1) to 'x.csv'", state=scenario.state)


def test_the_locked_connection_refuses_on_its_own(scenario: Scenario, tmp_path: Path):
    """The second wall alone (no statement check): COPY, ATTACH, LOAD and re-enabling access all fail."""
    from warehouse import read_connection
    from warehouse.sql_guard import lock_down

    with read_connection(scenario.state) as con:
        lock_down(con)
        for statement in (f"copy (select 1) to '{tmp_path}/x.csv'", f"attach '{tmp_path}/y.duckdb' as y",
                          "load httpfs", "set enable_external_access = true", "set lock_configuration = false"):
            with pytest.raises(duckdb.Error):
                con.execute(statement)
        assert con.execute("select count(*) from run").fetchone() == (4,)
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "y.duckdb").exists()
