"""config/registry.py: names and load-time checks that the stages register, each name once."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from onnxpipe.config import registry
from onnxpipe.config.registry import LOOPS, SCHEDULERS, STAGE_CHECKS, Registry, register_check, stage_checks
from onnxpipe.config.schema import GENERATION_LOOPS, Generation
from onnxpipe.diffusion import SCHEDULERS as DIFFUSION_SCHEDULERS
from onnxpipe.loops import LOOPS as LOOP_REGISTRY

PY = Path(__file__).resolve().parents[3] / "py" / "onnxpipe"


class One:
    name = "one"


class Other:
    name = "one"


def test_a_name_is_registered_once():
    r: Registry[type] = Registry("thing")
    r.register("one", One)
    r.register("one", One)                       # the same definition again (a module reloaded)
    with pytest.raises(ValueError, match='thing "one" is registered twice'):
        r.register("one", Other)
    assert dict(r) == {"one": One}
    with pytest.raises(ValueError, match="expected a non-empty name"):
        r.register("", One)


def test_the_loop_and_scheduler_names_are_the_registries_the_schema_reads():
    """One place: the schema's choices are the registries the stages fill."""
    fields = {f.name: f for f in Generation.__dataclass_fields__.values()}
    assert fields["loop"].metadata["choices"] is LOOPS is GENERATION_LOOPS is LOOP_REGISTRY
    assert fields["scheduler"].metadata["choices"] is SCHEDULERS is DIFFUSION_SCHEDULERS
    for reg in (LOOPS, SCHEDULERS):
        assert len(reg) >= 2 and all(cls.name == name for name, cls in reg.items())
    with pytest.raises(ValueError, match='generation.loop "autoregressive" is registered twice'):
        LOOPS.register("autoregressive", Other)


def test_a_stage_check_name_and_its_order_are_taken_once():
    names = [name for name, _ in stage_checks()]
    assert len(names) == len(set(names)) == len(STAGE_CHECKS)
    first_name, first = stage_checks()[0]
    with pytest.raises(ValueError, match=f'load-time check "{first_name}" is registered twice'):
        register_check(first_name, lambda spec, file, bundle_dir: None, order=999)
    with pytest.raises(ValueError, match=f'order {registry._ORDER[first_name]} is taken by "{first_name}"'):
        register_check("another", lambda spec, file, bundle_dir: None, order=registry._ORDER[first_name])
    assert "another" not in STAGE_CHECKS and stage_checks()[0] == (first_name, first)


def _literal_names(node: ast.AST) -> list:
    return [k.value for k in node.keys if isinstance(k, ast.Constant)] if isinstance(node, ast.Dict) \
        else [e.value for e in node.elts if isinstance(e, ast.Constant)]


def test_no_name_table_in_the_package_declares_a_name_twice():
    """Module-level tables written as literals (presets, drafters, choices tuples): a repeated
    key in a dict literal silently replaces the first; a repeated choice is a slip. And each
    web_entry verb is declared by one @verb."""
    repeated = []
    for path in sorted(PY.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            target = node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else \
                node.target if isinstance(node, ast.AnnAssign) else None
            if not isinstance(target, ast.Name) or not target.id.isupper():
                continue
            if isinstance(node.value, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
                names = _literal_names(node.value)
                twice = sorted({n for n in names if names.count(n) > 1}, key=str)
                if twice:
                    repeated.append(f"{path.relative_to(PY)}: {target.id} repeats {twice}")
        verbs = [d.args[0].value for f in tree.body if isinstance(f, ast.FunctionDef) for d in f.decorator_list
                 if isinstance(d, ast.Call) and getattr(d.func, "id", "") == "verb" and d.args
                 and isinstance(d.args[0], ast.Constant)]
        if len(verbs) != len(set(verbs)):
            repeated.append(f"{path.relative_to(PY)}: @verb repeats {sorted({v for v in verbs if verbs.count(v) > 1})}")
    assert not repeated, "\n".join(repeated)


def test_the_table_check_sees_a_repeated_key():
    tree = ast.parse('PRESETS = {"a": 1, "b": 2, "a": 3}')
    names = _literal_names(tree.body[0].value)
    assert names == ["a", "b", "a"]
