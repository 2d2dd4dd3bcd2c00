"""Route a simulator module's float math to :mod:`vical.envs.fpmath`.

The float-physics simulators are other projects' Python code (highway-env,
gymnasium's classic control, flappy-bird-gymnasium) that calls ``np.sin``,
``math.cos``, ``np.dot``, ``x.dot(y)``, ``a @ b`` and ``x ** y`` freely. Each of
those may give different last bits on different CPUs (see fpmath's docstring).
:func:`install` recompiles every function and method defined in such a module
with those calls and operators replaced by fpmath's, and swaps the new code
into the existing function objects, so every class, instance and reference
already handed out keeps working and picks up the portable math at once.

The rewrite, on each function's own source:

- ``np.<f>(…)`` / ``numpy.<f>`` for f in fpmath.NUMPY_FUNCTIONS, and
  ``np.linalg.norm``, become fpmath's function;
- ``math.<f>`` for f in fpmath.MATH_FUNCTIONS becomes fpmath's scalar one, and a
  bare name bound to one of those numpy or math functions in the module (as
  ``from numpy import cos`` makes) likewise;
- ``a ** b`` and ``a @ b`` (and ``**=`` / ``@=``) become ``fpmath.power`` and
  ``fpmath.matmul``; ``x.dot(y)`` becomes ``fpmath.dot(x, y)``.

Everything else (``np.sqrt``, ``np.clip``, arithmetic, comparisons) is left as
it is: IEEE 754 rounds those exactly the same way on every CPU, whatever SIMD
width numpy uses. Installing is idempotent and process-wide (another user of
these modules in the process gets the portable math too: values differ from
the original by a unit or two in the last place at most).
"""

from __future__ import annotations

import ast
import dis
import importlib
import inspect
import math
import textwrap
import types
from typing import Any

import numpy as np

from vical.envs import fpmath

_FP = "_vical_fpmath"
_MARK = "__vical_portable__"

_installed: dict[str, list[str]] = {}


def _aliases(module: types.ModuleType) -> tuple[set[str], set[str], dict[str, str]]:
    """Names the module uses for numpy and math, and bare names of their functions."""
    np_names, math_names, bare = set(), set(), {}
    for name, value in vars(module).items():
        if value is np:
            np_names.add(name)
        elif value is math:
            math_names.add(name)
        else:
            for fname in fpmath.NUMPY_FUNCTIONS:
                if value is getattr(np, fname, None):
                    bare[name] = fname
            for fname in fpmath.MATH_FUNCTIONS:
                if value is getattr(math, fname, None):
                    bare[name] = "math_" + fname
    return np_names, math_names, bare


def _fp(attr: str) -> ast.Attribute:
    return ast.Attribute(value=ast.Name(id=_FP, ctx=ast.Load()), attr=attr, ctx=ast.Load())


class _Rewrite(ast.NodeTransformer):
    def __init__(self, np_names: set[str], math_names: set[str], bare: dict[str, str]):
        self.np_names, self.math_names, self.bare = np_names, math_names, bare
        self.count = 0

    def _replacement(self, node: ast.AST) -> ast.Attribute | None:
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            base = node.value
            if isinstance(base, ast.Name):
                if base.id in self.np_names and node.attr in fpmath.NUMPY_FUNCTIONS:
                    return _fp(node.attr)
                if base.id in self.math_names and node.attr in fpmath.MATH_FUNCTIONS:
                    return _fp("math_" + node.attr)
            if (
                isinstance(base, ast.Attribute)
                and isinstance(base.value, ast.Name)
                and base.value.id in self.np_names
                and base.attr == "linalg"
                and node.attr in fpmath.NUMPY_LINALG_FUNCTIONS
            ):
                return _fp(node.attr)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in self.bare:
            return _fp(self.bare[node.id])
        return None

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        new = self._replacement(node)
        if new is not None:
            self.count += 1
            return ast.copy_location(new, node)
        return self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> ast.AST:
        new = self._replacement(node)
        if new is not None:
            self.count += 1
            return ast.copy_location(new, node)
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        self.generic_visit(node)
        name = {ast.Pow: "power", ast.MatMult: "matmul"}.get(type(node.op))
        if name is None:
            return node
        self.count += 1
        call = ast.Call(func=_fp(name), args=[node.left, node.right], keywords=[])
        return ast.copy_location(call, node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        self.generic_visit(node)
        name = {ast.Pow: "power", ast.MatMult: "matmul"}.get(type(node.op))
        if name is None:
            return node
        self.count += 1
        load = _as_load(node.target)
        call = ast.Call(func=_fp(name), args=[load, node.value], keywords=[])
        return ast.copy_location(ast.Assign(targets=[node.target], value=call), node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        f = node.func
        if (
            isinstance(f, ast.Attribute)
            and f.attr == "dot"
            and len(node.args) == 1
            and not node.keywords
            and not (isinstance(f.value, ast.Attribute) and f.value.attr == _FP)
            and not (isinstance(f.value, ast.Name) and f.value.id == _FP)
        ):
            self.count += 1
            return ast.copy_location(
                ast.Call(func=_fp("dot"), args=[f.value, node.args[0]], keywords=[]), node
            )
        return node


def _as_load(target: ast.expr) -> ast.expr:
    new = ast.parse(ast.unparse(target), mode="eval").body
    return ast.copy_location(new, target)


def _functions(module: types.ModuleType) -> list[types.FunctionType]:
    """Every plain function and method whose code was written in ``module``."""
    found: list[types.FunctionType] = []

    def take(obj: Any) -> None:
        if isinstance(obj, (staticmethod, classmethod)):
            obj = obj.__func__
        if isinstance(obj, property):
            for f in (obj.fget, obj.fset, obj.fdel):
                if f is not None:
                    take(f)
            return
        obj = inspect.unwrap(obj) if isinstance(obj, types.FunctionType) else obj
        if (
            isinstance(obj, types.FunctionType)
            and obj.__module__ == module.__name__
            and obj.__code__.co_filename == inspect.getfile(module)
            and obj not in found
        ):
            found.append(obj)

    for value in vars(module).values():
        if isinstance(value, type) and value.__module__ == module.__name__:
            for member in vars(value).values():
                take(member)
        else:
            take(value)
    return found


def _recompile(fn: types.FunctionType, rewrite: _Rewrite) -> bool:
    """Swap ``fn``'s code for the rewritten one; False when nothing needed rewriting."""
    source = textwrap.dedent(inspect.getsource(fn))
    tree = ast.parse(source)
    fdef = tree.body[0]
    if not isinstance(fdef, (ast.FunctionDef, ast.AsyncFunctionDef)):
        raise ValueError(f"{fn.__qualname__}: source is not a function definition")
    fdef.decorator_list = []
    before = rewrite.count
    rewrite.visit(fdef)
    if rewrite.count == before:
        return False
    freevars = fn.__code__.co_freevars
    if freevars and freevars != ("__class__",):
        raise ValueError(f"{fn.__qualname__}: a closure over {freevars} cannot be rewritten")
    body: list[ast.stmt] = [fdef]
    if freevars:
        # compiled inside a class so that zero-argument super() keeps its cell
        body = [ast.ClassDef(name="_Portable", bases=[], keywords=[], body=body, decorator_list=[])]
    module = ast.Module(body=body, type_ignores=[])
    ast.fix_missing_locations(module)
    ast.increment_lineno(module, fn.__code__.co_firstlineno - 1)
    code = compile(module, fn.__code__.co_filename, "exec")
    holder = code
    if freevars:
        holder = next(c for c in code.co_consts if isinstance(c, types.CodeType))
    new = next(
        c for c in holder.co_consts if isinstance(c, types.CodeType) and c.co_name == fn.__name__
    )
    fn.__code__ = new.replace(co_name=fn.__code__.co_name, co_qualname=fn.__code__.co_qualname)
    return True


def install(module_names: list[str]) -> None:
    """Rewrite the float math of each named module (imported here if need be)."""
    for name in module_names:
        if name in _installed:
            continue
        module = importlib.import_module(name)
        vars(module)[_FP] = _namespace()
        rewrite = _Rewrite(*_aliases(module))
        done = []
        for fn in _functions(module):
            if getattr(fn, _MARK, False):
                continue
            if _recompile(fn, rewrite):
                done.append(fn.__qualname__)
            setattr(fn, _MARK, True)
        _installed[name] = done


def installed() -> dict[str, list[str]]:
    """Module name -> the functions whose code was rewritten."""
    return {k: list(v) for k, v in _installed.items()}


def _namespace() -> types.SimpleNamespace:
    ns = types.SimpleNamespace(**fpmath.NUMPY_FUNCTIONS, **fpmath.NUMPY_LINALG_FUNCTIONS)
    for k, v in fpmath.MATH_FUNCTIONS.items():
        setattr(ns, "math_" + k, v)
    return ns


def leftovers(module_name: str) -> list[str]:
    """Where the module's compiled functions still use CPU-dependent float math.

    Reads the bytecode that will run (not the source): a ``**`` or ``@``
    operator, a ``.dot`` method, or a numpy/math function of fpmath's lists
    looked up on the module's numpy or math, or bound to a bare name.
    """
    module = importlib.import_module(module_name)
    np_names, math_names, bare = _aliases(module)
    out = []
    for fn in _functions(module):
        for code in _codes(fn.__code__):
            prev = prev2 = None
            for ins in dis.get_instructions(code):
                what = None
                after_fp = prev is not None and prev.opname == "LOAD_GLOBAL" and prev.argval == _FP
                if ins.opname == "BINARY_OP" and ins.argrepr in ("**", "@", "**=", "@="):
                    what = ins.argrepr
                elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and ins.argval == "dot":
                    what = None if after_fp else ".dot"
                elif ins.opname == "LOAD_GLOBAL" and ins.argval in bare:
                    what = ins.argval
                elif (
                    ins.opname in ("LOAD_ATTR", "LOAD_METHOD")
                    and prev is not None
                    and prev.opname == "LOAD_GLOBAL"
                    and (
                        (prev.argval in np_names and ins.argval in fpmath.NUMPY_FUNCTIONS)
                        or (prev.argval in math_names and ins.argval in fpmath.MATH_FUNCTIONS)
                    )
                ):
                    what = f"{prev.argval}.{ins.argval}"
                elif (
                    ins.opname in ("LOAD_ATTR", "LOAD_METHOD")
                    and ins.argval in fpmath.NUMPY_LINALG_FUNCTIONS
                    and prev is not None
                    and prev.argval == "linalg"
                    and prev2 is not None
                    and prev2.argval in np_names
                ):
                    what = f"{prev2.argval}.linalg.{ins.argval}"
                if what is not None:
                    out.append(f"{fn.__qualname__}: {what}")
                prev2, prev = prev, ins
    return out


def _codes(code: types.CodeType) -> list[types.CodeType]:
    out = [code]
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out.extend(_codes(c))
    return out
