"""Environment variables: set_env and set_envs."""
import mlrun

fn = mlrun.new_function("env-job", kind="job", image="mlrun/mlrun")
fn.set_env(name="MY_ENV", value="MY_VAL")
fn.set_envs(env_vars={"MY_ENV": "MY_VAL", "SECOND_ENV": "SECOND_VAL"})
names = [e["name"] if isinstance(e, dict) else e.name for e in fn.spec.env]
assert names == ["MY_ENV", "SECOND_ENV"], names
