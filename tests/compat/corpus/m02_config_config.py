"""mlrun.config.config."""
import mlrun

config = mlrun.config.config
print(config.default_function_priority_class_name, config.function_defaults.preemption_mode)
