"""Conditions written as data in the findings catalog, evaluated safely.

A finding's confirm and falsifier are claims about measurements; the catalog states them
as small expressions over named figures (``after.graph_launches_per_step >= 1 and
step.improved``), so a reviewer reads the check beside the words, and a new finding
brings its own check. The grammar is a tiny subset of Python expressions, parsed with
:mod:`ast` and walked here (never ``eval``): names, attribute access on the namespaces
given, numbers, strings, ``True``/``False``/``None``, ``+ - * /``, comparisons,
``and``/``or``/``not``.

Three-valued: a figure that was not measured is ``None`` (unknown), and so is any
arithmetic or comparison that touches it. ``and`` is False as soon as one side is
False, ``or`` True as soon as one side is True; otherwise unknown stays unknown.
:func:`holds` treats unknown as not met: a check never passes on a figure nobody measured.
"""

from __future__ import annotations

import ast
import operator
from functools import lru_cache

_BIN = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_CMP = {ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
        ast.Eq: operator.eq, ast.NotEq: operator.ne}


class ConditionError(ValueError):
    """A catalog condition uses something outside the grammar (a bug in the catalog)."""


@lru_cache(maxsize=512)
def parse(text: str) -> ast.expr:
    try:
        tree = ast.parse(text.strip(), mode="eval").body
    except SyntaxError as exc:
        raise ConditionError(f"condition {text!r}: {exc.msg}") from None
    for node in ast.walk(tree):
        if not isinstance(node, (ast.BoolOp, ast.And, ast.Or, ast.UnaryOp, ast.Not, ast.USub, ast.BinOp, ast.Compare,
                                 ast.Attribute, ast.Name, ast.Constant, ast.Load, *_BIN, *_CMP)):
            raise ConditionError(f"condition {text!r}: {type(node).__name__} is not allowed")
    return tree


def evaluate(text: str, names: dict):
    """The value of ``text`` with ``names`` (dicts or objects for the dotted names): a number,
    a bool, or None when it rests on something unknown."""
    return _eval(parse(text), names, text)


def holds(text: str | None, names: dict) -> bool | None:
    """True / False / None (unknown) for a condition; an empty condition is None."""
    if not text:
        return None
    value = evaluate(text, names)
    return None if value is None else bool(value)


def _get(obj, attr: str):
    if isinstance(obj, dict):
        return obj.get(attr)
    return getattr(obj, attr, None)


def _name(node: ast.Name, names: dict, text: str):
    if node.id not in names:
        raise ConditionError(f"condition {text!r}: unknown name {node.id!r}")
    return names[node.id]


def _attribute(node: ast.Attribute, names: dict, text: str):
    base = _eval(node.value, names, text)
    return None if base is None else _get(base, node.attr)


def _unary(node: ast.UnaryOp, names: dict, text: str):
    operand = _eval(node.operand, names, text)
    if operand is None:
        return None
    return (not operand) if isinstance(node.op, ast.Not) else -operand


def _binary(node: ast.BinOp, names: dict, text: str):
    left, right = _eval(node.left, names, text), _eval(node.right, names, text)
    if left is None or right is None or (isinstance(node.op, ast.Div) and right == 0):
        return None
    return _BIN[type(node.op)](left, right)


def _compare(node: ast.Compare, names: dict, text: str):
    """A chained comparison: False as soon as one link is False, unknown if one link is unknown."""
    left = _eval(node.left, names, text)
    result = True
    for op, right_node in zip(node.ops, node.comparators):
        right = _eval(right_node, names, text)
        if left is None or right is None:
            result = None if result is not False else False
        elif not _CMP[type(op)](left, right):
            return False
        left = right
    return result


def _bool(node: ast.BoolOp, names: dict, text: str):
    """``and``: False once one side is False; ``or``: True once one side is True; else unknown stays unknown."""
    values = [_eval(value, names, text) for value in node.values]
    if isinstance(node.op, ast.And):
        if any(value is not None and not value for value in values):
            return False
        return None if any(value is None for value in values) else True
    if any(value is not None and value for value in values):
        return True
    return None if any(value is None for value in values) else False


_NODES = {ast.Name: _name, ast.Attribute: _attribute, ast.UnaryOp: _unary, ast.BinOp: _binary, ast.Compare: _compare,
          ast.BoolOp: _bool}


def _eval(node, names, text):
    if isinstance(node, ast.Constant):
        return node.value
    evaluate_node = _NODES.get(type(node))
    if evaluate_node is None:
        raise ConditionError(f"condition {text!r}: {type(node).__name__} is not allowed")
    return evaluate_node(node, names, text)
