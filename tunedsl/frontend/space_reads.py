"""Whether a macro's ``space=`` gives one space for the process or may give another per call.

A site reads its space when a key is decided, and the decision then launches every later
call of the key. That is right while every call gives the same space: a literal, or a module
constant (a name the module binds once, or once on each branch of an ``if``, outside any
loop, and no function rebinds with ``global``), or such a constant of a module bound by
``import`` (``configs.SPACE``); a module's global rebound from another module's code
(``lib.SPACE = ...``, or ``configs``'s own ``global``) is not seen here. Any other expression
may give another space on a later call of the same key: ``space=self.space`` of a module
whose instances each have one, a parameter, a local, ``spaces[kind]``, an attribute of a
name from ``from x import name``, a call. Those sites read the space on every call and key
the call by it (``runtime/call_values.py``), at the cost of the fused launch.
"""

from __future__ import annotations

import ast

#: More bindings on one path than any count: a name bound in a loop or by ``+=``.
_MANY = 1 << 20

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_LOOPS = (ast.For, ast.AsyncFor, ast.While)
_TRIES = (ast.Try, getattr(ast, "TryStar", ast.Try))  # ``except*`` from Python 3.11


def read_per_call(module: ast.Module, line: int, space: ast.expr) -> bool:
    """Whether the ``space=`` expression ``space`` of the macro at ``line`` of ``module``
    may give another space on another call (see the module docstring)."""
    node = space
    while isinstance(node, ast.Attribute):  # a constant of an imported module
        node = node.value
    if not isinstance(node, ast.Name) or _bound_around(module, line, node.id):
        return True
    if node is not space and not _imported_at_top(module.body, node.id):
        return True  # an attribute of an object: its state, which may change
    return _rebound_by_global(module, node.id) or _bindings(module.body, node.id) > 1


def check_read_per_call(module: ast.Module, line: int, verify: ast.expr | None) -> bool:
    """Whether the computed ``verify=`` expression ``verify`` of the macro at ``line`` may
    give another check on another call: as a space may, but a lambda written at the site is
    one check (a new object on each call, of the same code: ``runtime/verified.py``) unless
    it holds a value of the call (a variable of a function around the site, a default)."""
    if not isinstance(verify, ast.Lambda):
        return verify is not None and read_per_call(module, line, verify)
    a = verify.args
    if any(read_per_call(module, line, d) for d in (*a.defaults, *a.kw_defaults) if d):
        return True
    names = [n for n in ast.walk(verify.body) if isinstance(n, ast.Name)]
    own = {p.arg for p in ast.walk(verify) if isinstance(p, ast.arg)}  # and its own variables:
    own |= {n.id for n in names if not isinstance(n.ctx, ast.Load)}
    read = {n.id for n in names if isinstance(n.ctx, ast.Load)} - own
    return any(_bound_around(module, line, name) for name in sorted(read))


def _bound_around(module: ast.Module, line: int, name: str) -> bool:
    """Whether a scope around ``line`` binds ``name``: a function or class (a local, a
    parameter, an enclosing function's variable, unless it declares it ``global``), a
    lambda's parameter, a comprehension's variable; at any depth (a ``def`` under an ``if``)."""
    for node in ast.walk(module):
        if not isinstance(node, (*_SCOPES, *_COMPREHENSIONS)):
            continue
        if not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if isinstance(node, ast.Lambda):
            a = node.args
            params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
            if any(p is not None and p.arg == name for p in params):
                return True
        elif isinstance(node, _COMPREHENSIONS):
            if any(_binding_count(g.target, name) for g in node.generators):
                return True
        elif _binds_in_scope(node, name):
            return True
    return False


def _binds_in_scope(scope: ast.AST, name: str) -> bool:
    own = _own_nodes(scope)
    if any(isinstance(n, ast.Global) and name in n.names for n in own):
        return False
    if isinstance(scope, ast.FunctionDef | ast.AsyncFunctionDef):
        a = scope.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
        if any(p is not None and p.arg == name for p in params):
            return True
    return any(_binding_count(n, name) for n in own)


def _own_nodes(scope: ast.AST) -> list[ast.AST]:
    """The nodes of ``scope``'s body, not those inside its functions and classes (their
    names are bindings of ``scope``)."""
    out: list[ast.AST] = []
    todo: list[ast.AST] = list(getattr(scope, "body", []))
    while todo:
        node = todo.pop()
        out.append(node)
        if not isinstance(node, _SCOPES):
            todo.extend(ast.iter_child_nodes(node))
    return out


def _rebound_by_global(module: ast.Module, name: str) -> bool:
    """Whether some function declares ``global name`` (it may rebind it between calls)."""
    return any(isinstance(n, ast.Global) and name in n.names for n in ast.walk(module))


def _imported_at_top(body: list[ast.stmt], name: str) -> bool:
    """Whether the module's top level binds ``name`` by ``import`` (a module, whose
    constants are read as the module's own). ``from x import name`` may give any object
    (``from cfg import settings``), whose attributes are its state: not one of these."""
    return any(
        isinstance(s, ast.Import)
        and any((a.asname or a.name.split(".")[0]) == name for a in s.names)
        for s in body
    )


def _bindings(body: list[ast.stmt], name: str) -> int:
    """The most bindings of ``name`` on one path through ``body`` (``_MANY`` for one in a
    loop): the branches of an ``if`` or ``match``, and a ``try`` and its handlers, are
    alternatives; anything else adds, but for one module imported again."""
    total, imported = 0, False
    for stmt in body:
        if isinstance(stmt, _LOOPS):
            inner = _binding_count(getattr(stmt, "target", None), name) + _bindings(stmt.body, name)
            total += (_MANY if inner else 0) + _bindings(stmt.orelse, name)
            total += _binding_count(getattr(stmt, "test", None), name)
        elif isinstance(stmt, ast.If):
            total += _binding_count(stmt.test, name)
            total += max(_bindings(stmt.body, name), _bindings(stmt.orelse, name))
        elif isinstance(stmt, ast.Match):
            total += _binding_count(stmt.subject, name)
            cases = [_bindings(c.body, name) + _binding_count(c.pattern, name) for c in stmt.cases]
            total += max(cases, default=0)
        elif isinstance(stmt, _TRIES):  # a handler's binding is the body's fallback
            tried: ast.Try = stmt  # type: ignore[assignment]  # or a TryStar, alike
            handlers = [_bindings(h.body, name) + (h.name == name) for h in tried.handlers]
            total += max(_bindings(tried.body, name), *handlers, 0)
            total += _bindings(tried.orelse, name) + _bindings(tried.finalbody, name)
        elif isinstance(stmt, ast.Import):  # `import os`, then `import os.path`: one module
            for alias in stmt.names:
                if alias.asname == name:
                    total += 1
                elif alias.asname is None and alias.name.split(".")[0] == name:
                    total, imported = total + (not imported), True
        elif isinstance(stmt, ast.With | ast.AsyncWith):
            total += sum(_binding_count(item, name) for item in stmt.items)
            total += _bindings(stmt.body, name)
        else:
            total += _binding_count(stmt, name)
    return total


def _binding_count(node: ast.AST | None, name: str) -> int:
    """The bindings of ``name`` a statement or expression makes (not inside functions and
    classes it defines, but their own names); ``_MANY`` for ``+=`` or ``del``."""
    if node is None:
        return 0
    count = 0
    todo = [node]
    while todo:
        n = todo.pop()
        if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            if n.target.id == name:
                return _MANY
        elif isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and n.id == name:
            count += _MANY if isinstance(n.ctx, ast.Del) else 1
        elif isinstance(n, ast.Import | ast.ImportFrom):
            count += sum((a.asname or a.name.split(".")[0]) == name for a in n.names)
        elif isinstance(n, ast.MatchAs | ast.MatchStar):
            count += n.name == name
        elif isinstance(n, ast.MatchMapping):
            count += n.rest == name
        if isinstance(n, _SCOPES[:3]):
            count += n.name == name  # type: ignore[union-attr]
            continue
        if not isinstance(n, ast.Lambda):
            todo.extend(ast.iter_child_nodes(n))
    return count
