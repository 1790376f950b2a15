"""A handler's signature, read from the embedded code without running it.

Parameters arrive as strings from the command line and as values from the SDK; both are
converted to what the handler's annotations say, and a missing, unknown or unconvertible
parameter is refused before anything runs.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runplane.bootstrap.invocation import INIT_ARGS
from runplane.errors import InvalidValueError
from runplane.spec.bounds import MAX_INT_DIGITS, load_json
from runplane.spec.numbers import whole_number

#: The largest integer a parameter converted from text may be: as large as a JSON body's.
_LARGEST_INT = 10**MAX_INT_DIGITS - 1
_CONVERTIBLE = {"int", "float", "str", "bool", "list", "dict"}
_TRUE = {"true", "1", "yes", "y", "on"}
_FALSE = {"false", "0", "no", "n", "off"}


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    annotation: str | None
    required: bool


@dataclass(frozen=True, slots=True)
class Signature:
    handler: str
    parameters: tuple[Parameter, ...]
    takes_context: bool
    takes_any: bool  # **kwargs
    #: The code reads parameters from a context (``get_param``, ``parameters``): names the
    #: handler does not take are then the context's, not typos.
    reads_params: bool = False

    def accepts(self, name: str) -> bool:
        """Whether ``name`` is passed to the handler as an argument."""
        return self.takes_any or any(p.name == name for p in self.parameters)


def _annotation(node: ast.expr | None) -> str | None:
    if node is None:
        return None
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            node = ast.parse(node.value, mode="eval").body
        except (SyntaxError, ValueError, RecursionError):
            return None  # a string annotation that is no expression converts nothing
    if isinstance(node, ast.Subscript):
        node = node.value
    if isinstance(node, ast.Name) and node.id in _CONVERTIBLE:
        return node.id
    return None


def defined_functions(
    code: str, filename: str = "<code>"
) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """The top-level functions of ``code``; a syntax error is a user error naming the file."""
    return {
        node.name: node
        for node in parse_code(code, filename).body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }


def parse_code(code: str, filename: str = "<code>") -> ast.Module:
    """``code`` parsed; a syntax error is a user error naming the file."""
    try:
        return ast.parse(code, filename=filename)
    except SyntaxError as error:
        raise InvalidValueError(
            "filename",
            filename,
            f"the file must be valid Python ({error.msg} at line {error.lineno})",
        ) from None
    except (ValueError, RecursionError, MemoryError) as error:  # NUL bytes; nesting too deep
        raise InvalidValueError(
            "filename", filename, f"the file must be valid Python ({type(error).__name__})"
        ) from None


def _reads_params(tree: ast.Module) -> bool:
    return any(
        isinstance(node, ast.Attribute) and node.attr in ("get_param", "parameters")
        for node in ast.walk(tree)
    )


@functools.lru_cache(maxsize=128)
def read_signature(code: str, handler: str, filename: str = "<code>") -> Signature:
    """The signature of top-level function ``handler`` in ``code``; remembered, since a
    function is often run many times over (parsing its code is most of a submit's cost)."""
    tree = parse_code(code, filename)
    if "::" in handler:
        return _method_signature(tree, handler, filename)
    functions = {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if handler not in functions:
        raise InvalidValueError(
            "handler",
            handler,
            f"the handler must be a function defined at the top of {filename}; it defines: "
            + (", ".join(functions) or "no functions"),
            f"handler={next(iter(functions))!r}" if functions else "def train(context): ...",
        )
    return _signature(tree, handler, functions[handler])


def _method_signature(tree: ast.Module, handler: str, filename: str) -> Signature:
    """``Class::method``, as MLRun names a method handler: the class is made (given the
    context, when it takes one, and ``_init_args``) and the method called, its first
    parameter (``self``) left out."""
    class_name, _, method = handler.partition("::")
    classes = {node.name: node for node in tree.body if isinstance(node, ast.ClassDef)}
    methods = {
        node.name: node
        for node in (classes[class_name].body if class_name in classes else [])
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
    }
    if method not in methods:
        raise InvalidValueError(
            "handler",
            handler,
            f"a method handler is Class::method, a class defined at the top of {filename} "
            "and one of its methods; it defines the classes: " + (", ".join(classes) or "none"),
            "handler='Trainer::train'",
        )
    node = methods[method]
    without_self = ast.arguments(
        posonlyargs=node.args.posonlyargs[1:],
        args=node.args.args[1:] if not node.args.posonlyargs else node.args.args,
        vararg=node.args.vararg,
        kwonlyargs=node.args.kwonlyargs,
        kw_defaults=node.args.kw_defaults,
        kwarg=node.args.kwarg,
        defaults=node.args.defaults,
    )
    signature = _signature(tree, handler, node, without_self)
    extra = Parameter(INIT_ARGS, "dict", False)
    return dataclasses.replace(signature, parameters=(*signature.parameters, extra))


def _signature(
    tree: ast.Module,
    handler: str,
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    args: ast.arguments | None = None,
) -> Signature:
    args = args or node.args
    positional = [*args.posonlyargs, *args.args]
    defaults_from = len(positional) - len(args.defaults)
    parameters = [
        Parameter(arg.arg, _annotation(arg.annotation), index < defaults_from)
        for index, arg in enumerate(positional)
    ]
    parameters += [
        Parameter(arg.arg, _annotation(arg.annotation), default is None)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults, strict=True)
    ]
    takes_context = bool(parameters) and parameters[0].name in ("context", "ctx")
    if takes_context:
        parameters = parameters[1:]
    return Signature(
        handler,
        tuple(parameters),
        takes_context,
        args.kwarg is not None,
        reads_params=takes_context and _reads_params(tree),
    )


def _convert(field: str, value: Any, annotation: str | None) -> Any:
    if annotation is None or not isinstance(value, str) or annotation == "str":
        if annotation in ("int", "float") and isinstance(value, bool):
            raise InvalidValueError(field, value, f"the handler expects {annotation}", "3")
        if annotation == "float" and isinstance(value, int):
            return float(value)
        return value
    if annotation == "int":
        try:
            return whole_number(field, value, -_LARGEST_INT, _LARGEST_INT)
        except InvalidValueError:
            raise _not_a(field, value, annotation) from None
    try:
        if annotation == "float":
            number = float(value)
            if not math.isfinite(number):  # no JSON number: it could not be recorded
                raise ValueError(value)
            return number
        if annotation == "bool":
            if value.lower() in _TRUE:
                return True
            if value.lower() in _FALSE:
                return False
            raise ValueError(value)
        parsed = load_json(value)  # bounded: depth, huge integers, NaN, as a request body
        if not isinstance(parsed, list if annotation == "list" else dict):
            raise ValueError(value)
        return parsed
    except InvalidValueError as error:
        if error.field != "body":  # JSON, but beyond what a run's parameters may hold
            raise InvalidValueError(
                field,
                value,
                f"the handler expects {annotation} as JSON; at {error.field}: {error.allowed}",
            ) from None
        raise _not_a(field, value, annotation) from None
    except ValueError:
        raise _not_a(field, value, annotation) from None


def _not_a(field: str, value: Any, annotation: str) -> InvalidValueError:
    examples = {"int": "3", "float": "0.1", "bool": "true", "list": "[1, 2]", "dict": '{"a": 1}'}
    return InvalidValueError(
        field, value, f"the handler expects {annotation}", examples[annotation]
    )


def bind_parameters(signature: Signature, params: Mapping[str, Any]) -> dict[str, Any]:
    """``params`` converted for the handler; refuses missing required names, and unknown ones
    unless the code reads parameters from its context (they are the context's then)."""
    known = {p.name: p for p in signature.parameters}
    bound: dict[str, Any] = {}
    for name, value in params.items():
        parameter = known.get(name)
        if parameter is None and not (signature.takes_any or signature.reads_params):
            raise InvalidValueError(
                "params",
                name,
                f"{signature.handler} takes "
                + (", ".join(known) or "no parameters")
                + "; a handler that takes a context may read others with context.get_param",
                f"params={{{next(iter(known))!r}: ...}}" if known else "params={}",
            )
        bound[name] = _convert(
            f"params[{name!r}]", value, parameter.annotation if parameter else None
        )
    missing = [p.name for p in signature.parameters if p.required and p.name not in bound]
    if missing:
        raise InvalidValueError(
            "params",
            sorted(params),
            f"{signature.handler} needs " + ", ".join(missing),
            f"params={{{missing[0]!r}: ...}}",
        )
    return bound
