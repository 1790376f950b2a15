"""Preemption mode: the four modes."""
import mlrun

fn = mlrun.new_function("modes", kind="job", image="mlrun/mlrun")
for mode in ["none", "allow", "constrain", "prevent"]:
    fn.with_preemption_mode(mode=mode)
    assert fn.spec.preemption_mode == mode
