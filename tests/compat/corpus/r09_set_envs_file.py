"""Environment variables: set_envs from a file."""
import mlrun

open("env.txt", "w").write("MY_ENV=MY_VAL\nSECOND_ENV=SECOND_VAL\n")
fn = mlrun.new_function("env-job", kind="job", image="mlrun/mlrun")
fn.set_envs(file_path="env.txt")
assert len(fn.spec.env) == 2
