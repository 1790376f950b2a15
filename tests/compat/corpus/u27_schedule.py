"""Scheduling a job with a cron expression (needs a service)."""
import mlrun

open("job.py", "w").write("def handler(context):\n    pass\n")
fn = mlrun.code_to_function("nightly", filename="job.py", kind="job", handler="handler")
fn.run(schedule="0 * * * *")
