"""Catching MLRun's error classes."""
import mlrun

try:
    mlrun.import_function("does-not-exist.yaml")
except (mlrun.errors.MLRunNotFoundError, mlrun.errors.MLRunInvalidArgumentError, OSError):
    print("not found, as expected")
