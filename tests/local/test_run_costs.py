"""What a queued run of the embedded default costs its service in SQL statements
(:mod:`runplane.meters`), a unit that does not depend on the machine: a statement more on the
path of every run fails here, where a timed test would pass or fail with the machine's load.
Time per run is measured by ``bench/local_runs.py``."""

from __future__ import annotations

from collections import Counter

from runplane import meters
from runplane.spec.run_options import RunOptions

RUNS = 20

#: Statements per run, at most, by kind. Its record: the run, its first transition and
#: attempt, and its state's count (4 INSERT, in a transaction: 1 BEGIN). Then its events
#: (pending, running, completed), in bursts the recorder shares between runs; at most, each
#: in a burst of its own: a transaction (3 BEGIN) loading the burst's runs (3 SELECT),
#: changing their rows (3 UPDATE) and attempts (2 UPDATE: the start and the end), adding the
#: transitions (3 INSERT) and the counts' changes (3 INSERT). Then the waiter's read of its
#: end: its row, transitions, attempts and artifacts (4 SELECT, 1 BEGIN). Bursts shared by
#: several runs cost less per run (about 13 statements in all, queued). One more of SELECT and
#: INSERT for the service's own rounds meanwhile (aborts asked for, usage samples).
BUDGETS = {"BEGIN": 5.0, "INSERT": 11.0, "UPDATE": 5.0, "SELECT": 8.0}


def _statements() -> Counter[str]:
    return Counter(
        {
            dict(labels)["kind"]: count
            for (meter, labels), count in meters.counts().items()
            if meter == "sql_statements"
        }
    )


def test_a_queued_runs_statements_stay_within_their_budget(service, make_function):
    fn = make_function("def handler(context, x: int = 1):\n    return x\n")
    fn.with_requests(cpu="100m", mem="32Mi")
    assert service.wait(service.submit(fn).uid, timeout=60).state == "completed"  # warm-up
    before = _statements()
    uids = [service.submit(fn, RunOptions(params={"x": i})).uid for i in range(RUNS)]
    ended = [service.wait(uid, timeout=120) for uid in uids]
    spent = _statements() - before
    assert [record.state for record in ended] == ["completed"] * RUNS
    per_run = {kind: spent[kind] / RUNS for kind in spent}
    over = {kind: n for kind, n in per_run.items() if n > BUDGETS.get(kind, 0.0)}
    assert not over, f"statements per run over the budget {BUDGETS}: {per_run}"
