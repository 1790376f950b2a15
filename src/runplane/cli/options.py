"""Building a function from a file and flags, shared by the commands that run or deploy one."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click

from runplane import names
from runplane.errors import SHOWN_DIGITS, InvalidValueError, RunplaneError
from runplane.spec.bounds import MAX_GPUS
from runplane.spec.function import Function
from runplane.spec.numbers import is_whole
from runplane.spec.quantity import parse_quantity
from runplane.spec.run_options import RunOptions


class WholeNumber(click.ParamType[int]):
    """A whole number from ``low`` to ``high``. A refused value is named cut short: a flag
    given a number of thousands of digits gets one line back, not the number."""

    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        self.low = low
        self.high = high

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        text = str(value).strip()
        digits = text.removeprefix("-").removeprefix("+")
        allowed = f"the allowed range is {self.low} to {self.high}"
        if not is_whole(text):
            short = text if len(text) <= 24 else f"{text[:20]}... ({len(text)} characters)"
            self.fail(f"{short!r} is not a whole number; {allowed}")
        if len(digits.lstrip("0")) > SHOWN_DIGITS:  # said in a few words, not written out
            self.fail(f"a number of {len(digits)} digits is out of range; {allowed}")
        number = int(text)
        if not self.low <= number <= self.high:
            self.fail(f"{number} is out of range; {allowed}")
        return number

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return f"{self.low}..{self.high}"


def load_function(source: str, name: str | None, handler: str | None, kind: str | None) -> Function:
    """A function from an exported YAML/JSON file or from a Python file, its code embedded."""
    from runplane.spec import code_to_function, import_function
    from runplane.spec.loaders import embed_command

    if Path(source).suffix == ".py":
        return code_to_function(
            name=name or "", filename=source, handler=handler or "", kind=kind or "job"
        )
    fn = import_function(source)
    if handler:
        fn.spec.handler = handler
    return embed_command(fn)


def parse_pairs(flag: str, pairs: Sequence[str], example: str) -> dict[str, str]:
    """``k=v`` flags as a mapping, with the flag named in the error."""
    parsed: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InvalidValueError(flag, pair, "the form is key=value", example)
        parsed[key] = value
    return parsed


#: The flags of a run's options (:class:`~runplane.spec.run_options.RunOptions`), for every
#: command that starts or schedules runs.
RUN_OPTIONS: list[Callable[[Any], Any]] = [
    click.option(
        "--param",
        "params",
        multiple=True,
        metavar="KEY=VALUE",
        help="Handler parameter, converted to its annotated type.",
    ),
    click.option(
        "--threshold",
        "thresholds",
        multiple=True,
        metavar="STATE=TIME",
        help="State threshold for this run, e.g. running='1 min'.",
    ),
]


def run_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give ``command`` the flags of :data:`RUN_OPTIONS`, and the run's options they make as
    its ``given`` argument."""

    @functools.wraps(command)
    def with_options(
        *args: Any, params: Sequence[str], thresholds: Sequence[str], **kwargs: Any
    ) -> Any:
        given = RunOptions(
            params=parse_pairs("--param", params, "--param epochs=3"),
            state_thresholds=parse_pairs("--threshold", thresholds, "--threshold running='1 min'"),
        )
        return command(*args, given=given, **kwargs)

    decorated: Callable[..., Any] = with_options
    for option in reversed(RUN_OPTIONS):
        decorated = option(decorated)
    return decorated


RESOURCE_OPTIONS: list[Callable[[Any], Any]] = [
    click.option("--cpu", help="CPU request, e.g. 1 or 500m."),
    click.option("--memory", "--mem", "memory", help="Memory request, e.g. 1Gi or 512M."),
    click.option("--limit-cpu", help="CPU limit."),
    click.option("--limit-memory", help="Memory limit."),
    click.option("--gpus", type=WholeNumber(0, MAX_GPUS), help="GPUs (request = limit)."),
    click.option("--gpu-type", default=names.GPU, show_default=True),
    click.option(
        "--node-selector",
        multiple=True,
        metavar="KEY=VALUE",
        help="Node label to require; repeat to AND several.",
    ),
    click.option("--preemption-mode", type=click.Choice(["none", "prevent", "constrain", "allow"])),
    click.option("--priority", help="Priority class name."),
    click.option("--env", multiple=True, metavar="NAME=VALUE", help="Environment variable."),
    click.option(
        "--replicas",
        type=int,
        help="Replicas: serving pods, mpijob workers, dask workers, spark executors.",
    ),
]


def resource_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(RESOURCE_OPTIONS):
        command = option(command)
    return command


def apply_resource_options(fn: Function, options: dict[str, Any]) -> Function:
    """Apply the flags on top of what the function already has (patching, not replacing)."""
    for flag, kind, example in (
        ("cpu", "cpu", "--cpu 500m"),
        ("memory", "memory", "--memory 512Mi"),
        ("limit_cpu", "cpu", "--limit-cpu 2"),
        ("limit_memory", "memory", "--limit-memory 1Gi"),
    ):
        if options.get(flag) is not None:
            parse_quantity("--" + flag.replace("_", "-"), options[flag], kind, example)
    if options.get("cpu") is not None or options.get("memory") is not None:
        fn.with_requests(mem=options.get("memory"), cpu=options.get("cpu"), patch=True)
    if options.get("limit_cpu") is not None or options.get("limit_memory") is not None:
        fn.with_limits(mem=options.get("limit_memory"), cpu=options.get("limit_cpu"), patch=True)
    if options.get("gpus") is not None:
        fn.gpus(options["gpus"], gpu_type=options["gpu_type"])
    if options.get("node_selector"):
        selector = parse_pairs(
            "--node-selector",
            options["node_selector"],
            "--node-selector app.iguazio.com/lifecycle=non-preemptible",
        )
        fn.with_node_selection(node_selector={**fn.spec.node_selector, **selector})
    if options.get("preemption_mode"):
        fn.with_preemption_mode(options["preemption_mode"])
    if options.get("priority"):
        fn.with_priority_class(options["priority"])
    if options.get("env"):
        fn.set_envs(env_vars=parse_pairs("--env", options["env"], "--env MY_ENV=MY_VAL"))
    if options.get("replicas") is not None:
        fn._replace("spec", replicas=options["replicas"])
    return fn


#: Fields the commands' flags set, and the example a command line should show for them (the
#: SDK's own errors show the SDK call).
CLI_EXAMPLES = {
    "params": "--param epochs=3",
    "run(state_thresholds=...)": "--threshold running='1 min'",
    "priority_class_name": "--priority high",
    "with_limits(gpus=...)": "--gpus 1",
    "spec.resources.limits.memory": "--limit-memory 256Mi",
    "spec.resources.limits.cpu": "--limit-cpu 2",
    "spec.resources.requests.memory": "--memory 512Mi",
    "spec.resources.requests.cpu": "--cpu 500m",
    "with_limits(gpu_type=...)": "--gpu-type nvidia.com/gpu",
    "spec.node_selector": "--node-selector app.iguazio.com/lifecycle=non-preemptible",
    "node_selector": "--node-selector app.iguazio.com/lifecycle=non-preemptible",
    "env name": "--env MY_ENV=MY_VAL",
}


def in_cli_words(error: RunplaneError) -> str:
    """The error's message, its example in command-line syntax where a flag sets the field."""
    if isinstance(error, InvalidValueError):
        field = error.field
        for prefix, example in CLI_EXAMPLES.items():
            if field == prefix or field.startswith((f"{prefix}[", f"{prefix} ", f"{prefix}.")):
                return str(InvalidValueError(field, error.value, error.allowed, example))
    return str(error)
