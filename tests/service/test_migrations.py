"""Replicas that start together on one database migrate it once; a database a newer runplane
migrated is refused in words (an older replica restarted during a rolling upgrade, an image
rolled back)."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import Engine, text

from runplane.errors import ConfigError
from runplane.service import db


def test_replicas_starting_together_migrate_once(
    empty_database: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    upgrades: list[str] = []
    real_upgrade = db.upgrade

    def counted(engine: Engine) -> None:
        upgrades.append(threading.current_thread().name)
        real_upgrade(engine)

    monkeypatch.setattr(db, "upgrade", counted)
    start = threading.Barrier(4)
    engines: list[Engine] = []
    errors: list[BaseException] = []

    def replica() -> None:
        start.wait()
        try:
            engines.append(db.connect(empty_database))
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=replica, name=f"replica-{i}") for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors, errors
    assert len(upgrades) == 1, upgrades
    with engines[0].connect() as connection:
        versions = connection.execute(text("SELECT version_num FROM alembic_version")).all()
    assert versions == [(db.HEAD,)]
    for engine in engines:
        engine.dispose()


def test_a_database_a_newer_runplane_migrated_is_refused_in_words(empty_database: str) -> None:
    engine = db.connect(empty_database)
    with engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999_newer'"))
    engine.dispose()
    with pytest.raises(ConfigError) as refused:
        db.connect(empty_database)
    message = str(refused.value)
    assert "schema revision 9999_newer" in message
    assert "a newer runplane migrated it" in message
    assert "password" not in message


def test_a_database_with_runs_gains_their_resizes(empty_database: str) -> None:
    from alembic import command
    from alembic.config import Config
    from sqlalchemy import create_engine, insert

    from runplane.runs import ResizeRecord, RunState
    from runplane.runtimes.events import RunEvent
    from runplane.service.db import MIGRATIONS
    from runplane.service.db.models import RUNS
    from runplane.service.records import RunStore

    from .run_rows import run_row

    engine = create_engine(empty_database)
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0010")
    row = run_row(1000.0, project="old", state="running", function={"kind": "job"})
    with engine.begin() as connection:
        connection.execute(insert(RUNS), [row])  # the runs table as of 0010
    engine.dispose()
    store = RunStore(db.connect(empty_database))
    try:
        before = store.get(row["uid"])
        assert before.resizes == []
        grown = ResizeRecord(1001.0, 1, 128 << 20, 256 << 20, None, None, "near its limit")
        store.apply_many([RunEvent(row["uid"], RunState.RUNNING, reason="Resized", resize=grown)])
        assert store.get(row["uid"]).resizes == [grown]
        assert store.list_runs(project="old")[0].resizes == [grown]
    finally:
        store.close()
