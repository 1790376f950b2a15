"""get_or_create_ctx outside a run makes a local context that commits as completed.

From MLRun's repository (github.com/mlrun/mlrun, commit c43870ff8eb19f3b35e16d48b956a6fd9caed427), tests/run/test_run.py::test_get_or_create_ctx_run_kind; the same calls and asserted values, the
test's assets (tests/run/assets, tests/run/common.py) written here, pytest.raises as
try/except.
Fails on MLRun 1.12.1 (drift since that commit): get_or_create_ctx outside a run wants an active project (MLRunMissingProjectError).
"""
import mlrun

# varify the default run kind is local
context = mlrun.get_or_create_ctx("ctx")
assert context.labels.get("kind") == "local", context.labels
assert context.state == "running", context.state
context.commit(completed=True)
assert context.state == "completed", context.state
