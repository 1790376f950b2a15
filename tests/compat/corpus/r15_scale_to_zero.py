"""Cheat sheet: scale to zero."""
import mlrun

fn = mlrun.new_function("serve", kind="nuclio", image="mlrun/mlrun")
fn.spec.min_replicas = 0  # zero value is mandatory for scale to zero
fn.spec.max_replicas = 2
fn.set_config(
    key="spec.scaleToZero.scaleResources",
    value=[{"metricName": "nuclio_processor_handled_events_total", "windowSize": "30m",
            "threshold": 0}],
)
