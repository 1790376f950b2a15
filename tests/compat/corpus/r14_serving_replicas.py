"""Scaling and auto-scaling: nuclio/serving replicas and HTTP workers."""
import mlrun

fn = mlrun.new_function("serve", kind="serving", image="mlrun/mlrun")
fn.spec.replicas = 2
fn.spec.min_replicas = 1
fn.spec.max_replicas = 4
fn.with_http(workers=8, worker_timeout=10)
assert fn.spec.max_replicas == 4
