"""Volumes: auto-mount."""
import mlrun

fn = mlrun.new_function("auto", kind="job", image="mlrun/mlrun")
fn.apply(mlrun.auto_mount())
