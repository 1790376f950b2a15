"""code_to_function(code_output=) writes the function's code."""
import json, os
import mlrun

cells = ["# mlrun: start-code\ndef handler(context):\n    return 'ok'\n# mlrun: end-code\n"]
nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                 "execution_count": None} for c in cells],
      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open("gen.ipynb", "w"))
fn = mlrun.code_to_function("gen", filename="gen.ipynb", kind="job", code_output=".")
assert os.path.exists("gen.py")
