"""Environment variables from a Kubernetes secret."""
import mlrun

fn = mlrun.new_function("secret-env", kind="job", image="mlrun/mlrun")
fn.set_env_from_secret("AWS_KEY", secret="aws-creds", secret_key="key")
print(fn.spec.env)
