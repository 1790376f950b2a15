"""Reading the configuration MLRun code reads."""
import mlrun

print(mlrun.mlconf.default_function_priority_class_name)
print(mlrun.mlconf.valid_function_priority_class_names)
print(mlrun.mlconf.function_defaults.preemption_mode)
