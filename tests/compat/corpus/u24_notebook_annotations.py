"""Converting notebooks to function: start-code, end-code and ignore."""
import json
import mlrun

cells = [
    "# mlrun: start-code\n\ndef sub_handler():\n    return 'hello world'\n",
    "# mlrun: ignore\n\ndef sub_handler():\n    return 'I will be ignored!'\n",
    "def handler(context, event=None):\n    return sub_handler()\n\n# mlrun: end-code\n",
]
nb = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": [],
                 "execution_count": None} for c in cells],
      "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
json.dump(nb, open("nb.ipynb", "w"))
some_function = mlrun.code_to_function("some-function-name", filename="nb.ipynb", kind="job")
run = some_function.run(name="some-function-name", handler="handler", local=True)
assert run.outputs["return"] == "hello world"
