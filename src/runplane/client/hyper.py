"""Hyperparameter runs: one child run per parameter set, then a parent run that records the
best child's results.

Each child is an ordinary run of the function (its own resources, process or pod, record), so
children wait for capacity like any run and ``parallel_runs`` bounds how many are submitted at
once. The parent is a small run of its own, recorded like the others: its results are the
best child's, with ``best_iteration``, and its ``iteration_results`` artifact is the table of
every child's parameters and results.
"""

from __future__ import annotations

import ast
import base64
import csv
import itertools
import json
import random
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runplane.errors import InvalidValueError, NotFoundError
from runplane.spec.function import BuildSpec, Function, FunctionKind
from runplane.spec.resources import Resources
from runplane.spec.run_options import RunOptions
from runplane.spec.task import HyperParamOptions

if TYPE_CHECKING:
    from runplane.client import Backend
    from runplane.client.calls import Call
    from runplane.client.handle import RunHandle

#: The default number of samples of the ``random`` strategy.
RANDOM_SAMPLES = 10

#: The parent run's handler: it records what the client found.
_PARENT_CODE = """
def select(context, best_iteration: int, best_results: dict, iterations: list, error: str = ""):
    import csv
    import io

    columns = []
    for row in iterations:
        columns += [column for column in row if column not in columns]
    table = io.StringIO()
    writer = csv.DictWriter(table, fieldnames=columns)
    writer.writeheader()
    writer.writerows(iterations)
    context.log_artifact("iteration_results", body=table.getvalue(), local_path="results.csv")
    if error:
        raise RuntimeError(error)
    context.log_results(best_results)
    context.log_result("best_iteration", best_iteration)
"""


def parameter_sets(
    hyperparams: Mapping[str, list[Any]], options: HyperParamOptions
) -> list[dict[str, Any]]:
    """The parameter set of each child, by the options' strategy."""
    strategy = options.strategy or ("list" if options.param_file else "grid")
    if options.param_file:
        return _from_file(options.param_file, strategy, options)
    if strategy == "custom":
        raise InvalidValueError(
            "hyper_param_options.strategy",
            "custom",
            "a custom search runs in the handler, with context.get_child_context()",
            "with context.get_child_context(p1=1) as child: ...",
        )
    return _combine(dict(hyperparams), strategy, options)


def _combine(
    values: dict[str, list[Any]], strategy: str, options: HyperParamOptions
) -> list[dict[str, Any]]:
    names = list(values)
    if strategy == "list":
        lengths = {len(items) for items in values.values()}
        if len(lengths) > 1:
            raise InvalidValueError(
                "hyperparams",
                {name: len(items) for name, items in values.items()},
                "the list strategy takes the n-th value of every list: lists of one length",
                "{'p1': [1, 2], 'p2': [10, 20]}",
            )
        return [dict(zip(names, row, strict=True)) for row in zip(*values.values(), strict=True)]
    if strategy == "random":
        count = options.max_iterations or RANDOM_SAMPLES
        chooser = random.Random()
        return [{name: chooser.choice(values[name]) for name in names} for _ in range(count)]
    return [dict(zip(names, row, strict=True)) for row in itertools.product(*values.values())]


def _from_file(path: str, strategy: str, options: HyperParamOptions) -> list[dict[str, Any]]:
    file = Path(path)
    if not file.is_file():
        raise NotFoundError(f"param_file: {path!r} does not exist")
    text = file.read_text(encoding="utf-8")
    if file.suffix.lower() == ".json":
        data = json.loads(text)
        if isinstance(data, list):
            return [dict(row) for row in data]
        if isinstance(data, dict):
            return _combine({k: list(v) for k, v in data.items()}, strategy, options)
        raise InvalidValueError("param_file", path, "a JSON list of sets or a mapping of lists")
    rows = list(csv.DictReader(text.splitlines()))
    if not rows:
        raise InvalidValueError("param_file", path, "a CSV header and one row per set")
    return [{key: _scalar(value) for key, value in row.items()} for row in rows]


def _scalar(text: str) -> Any:
    """A CSV cell as the number or boolean it spells, else the text."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def selector_of(selector: str | None) -> tuple[str, str] | None:
    """``"max.accuracy"`` as ``("max", "accuracy")``; a bare name means ``max``."""
    if not selector:
        return None
    direction, dot, key = selector.partition(".")
    if not dot:
        return "max", selector
    if direction not in ("max", "min") or not key:
        raise InvalidValueError(
            "selector", selector, "a selector is [max.|min.]<result>", "'max.accuracy'"
        )
    return direction, key


def condition_of(expression: str | None) -> Callable[[Mapping[str, Any]], bool] | None:
    """``"accuracy >= 0.9"`` as a test of a child's results: comparisons of results and
    literals, with ``and``/``or``/``not``. Nothing else is evaluated."""
    if not expression:
        return None
    try:
        tree = ast.parse(expression, mode="eval").body
    except SyntaxError:
        raise InvalidValueError(
            "stop_condition", expression, "a comparison of results", "'accuracy >= 0.9'"
        ) from None

    def value(node: ast.expr, results: Mapping[str, Any]) -> Any:
        if isinstance(node, ast.Constant):
            return node.value
        if isinstance(node, ast.Name):
            return results.get(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand, results)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not value(node.operand, results)
        if isinstance(node, ast.BoolOp):
            parts = (value(item, results) for item in node.values)
            return all(parts) if isinstance(node.op, ast.And) else any(parts)
        if isinstance(node, ast.Compare):
            left = value(node.left, results)
            for operator, right_node in zip(node.ops, node.comparators, strict=True):
                right = value(right_node, results)
                if left is None or right is None or not _compare(operator, left, right):
                    return False
                left = right
            return True
        raise InvalidValueError(
            "stop_condition",
            expression,
            "comparisons of result names and literals, with and/or/not",
            "'accuracy >= 0.9'",
        )

    value(tree, {})  # refuse what it cannot evaluate now, not after the first child
    return lambda results: bool(value(tree, results))


def _compare(operator: ast.cmpop, left: Any, right: Any) -> bool:
    checks: dict[type[ast.cmpop], Callable[[Any, Any], bool]] = {
        ast.Gt: lambda a, b: a > b,
        ast.GtE: lambda a, b: a >= b,
        ast.Lt: lambda a, b: a < b,
        ast.LtE: lambda a, b: a <= b,
        ast.Eq: lambda a, b: a == b,
        ast.NotEq: lambda a, b: a != b,
    }
    try:
        return checks[type(operator)](left, right)
    except (KeyError, TypeError):
        return False


def run_iterations(service: Backend, call: Call, watch: bool) -> RunHandle:
    """Run every child, then the parent; returns the parent's handle."""
    from runplane.client.handle import RunHandle

    sets = parameter_sets(call.hyperparams, call.search)
    chosen = selector_of(call.search.selector)
    stop = condition_of(call.search.stop_condition)
    window = call.search.parallel_runs or (1 if stop else len(sets))
    rows: list[dict[str, Any]] = []
    errors = 0
    for batch in _batches(list(enumerate(sets, start=1)), window):
        handles = [(n, s, _submit_child(service, call, n, s)) for n, s in batch]
        for number, params, handle in handles:
            record = handle.wait()
            rows.append(
                {
                    "iter": number,
                    "uid": record.uid,
                    "state": record.state.value,
                    **{f"param.{k}": v for k, v in params.items()},
                    **{f"output.{k}": v for k, v in record.results.items()},
                }
            )
            errors += record.state.value != "completed"
            if watch:
                sys.stdout.write(
                    f"iteration {number}/{len(sets)} {record.state.value}: "
                    f"{json.dumps(record.results, default=str)}\n"
                )
        if stop and any(stop(_outputs(row)) for row in rows[-len(batch) :]):
            break
        if call.search.max_errors is not None and errors > call.search.max_errors:
            break
    best, error = _best(rows, chosen, errors, call.search.max_errors)
    parent = _parent_function(call.fn)
    best_results = _outputs(rows[best - 1]) if best else {}
    params = {"best_iteration": best, "best_results": best_results, "iterations": rows}
    record = service.submit(parent, RunOptions(params={**params, "error": error}))
    handle = RunHandle(service, record.uid)
    handle.wait()
    return handle


def _batches(items: list[Any], size: int) -> Iterator[list[Any]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def _submit_child(service: Backend, call: Call, number: int, params: dict[str, Any]) -> Any:
    from runplane.client.handle import RunHandle

    child = call.fn.model_copy(deep=True)
    child.set_label("runplane.io/iteration", str(number))
    options = call.options.model_copy(update={"params": {**call.options.params, **params}})
    record = service.submit(child, options, source_dir=call.source_dir)
    return RunHandle(service, record.uid)


def _outputs(row: Mapping[str, Any]) -> dict[str, Any]:
    return {key[len("output.") :]: value for key, value in row.items() if key.startswith("output.")}


def _best(
    rows: list[dict[str, Any]], chosen: tuple[str, str] | None, errors: int, max_errors: int | None
) -> tuple[int, str]:
    """The best completed child's number (0 when none), and why the search failed, if it did."""
    done = [row for row in rows if row["state"] == "completed"]
    if not done:
        return 0, f"all {len(rows)} iterations failed"
    if max_errors is not None and errors > max_errors:
        return 0, f"{errors} iterations failed, more than max_errors={max_errors}"
    if chosen is None:
        return done[0]["iter"], ""
    direction, key = chosen
    scored = [row for row in done if isinstance(_outputs(row).get(key), int | float)]
    if not scored:
        return 0, f"selector: no iteration logged a numeric result {key!r}"
    pick = max if direction == "max" else min
    return pick(scored, key=lambda row: _outputs(row)[key])["iter"], ""


def _parent_function(fn: Function) -> Function:
    """The parent run's function: the function's identity and placement, the recording
    handler for code, and no resources of its own (it only records)."""
    parent = fn.model_copy(deep=True)
    parent.kind = FunctionKind.JOB
    parent.spec.build = BuildSpec(
        source=base64.b64encode(_PARENT_CODE.encode()).decode(), filename="iterations.py"
    )
    parent.spec.command = ""
    parent.spec.handler = "select"
    parent.spec.returns = []
    parent.spec.resources = Resources()
    parent.spec.retries = 0
    return parent
