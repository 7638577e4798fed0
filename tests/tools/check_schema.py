#!/usr/bin/env python3
"""check_schema.py SCHEMA DOCUMENT: validates a JSON document against a JSON
Schema, with the subset of draft 2020-12 that tools/collx-probe.schema.json
uses (type, enum, required, properties, additionalProperties, items,
minItems, maxItems, minimum, maximum, exclusiveMinimum, pattern, $ref to
#/$defs). Written here so the test needs no python3-jsonschema; a keyword it
does not know is an error, so the schema cannot silently outgrow it.
Prints every violation with its path; exit 1 if any, 2 on bad input."""
import json
import re
import sys

KNOWN = {"$schema", "$id", "title", "$defs", "type", "enum", "required", "properties",
         "additionalProperties", "items", "minItems", "maxItems", "minimum", "maximum",
         "exclusiveMinimum", "pattern", "$ref"}
TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
}


def check(schema, v, path, root, errors):
    unknown = set(schema) - KNOWN
    if unknown:
        raise SystemExit(f"check_schema: keywords not supported: {sorted(unknown)} at {path}")
    if "$ref" in schema:
        ref = schema["$ref"]
        if not ref.startswith("#/$defs/"):
            raise SystemExit(f"check_schema: unsupported $ref {ref}")
        check(root["$defs"][ref[len("#/$defs/"):]], v, path, root, errors)
    t = schema.get("type")
    if t is not None and not TYPES[t](v):
        errors.append(f"{path}: expected {t}, got {type(v).__name__} {json.dumps(v)[:60]}")
        return
    if "enum" in schema and v not in schema["enum"]:
        errors.append(f"{path}: {json.dumps(v)[:60]} is not one of {schema['enum']}")
    if isinstance(v, dict):
        for k in schema.get("required", []):
            if k not in v:
                errors.append(f"{path}: missing required key '{k}'")
        props = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        for k, x in v.items():
            if k in props:
                check(props[k], x, f"{path}.{k}", root, errors)
            elif extra is False:
                errors.append(f"{path}: key '{k}' is not allowed")
            elif isinstance(extra, dict):
                check(extra, x, f"{path}.{k}", root, errors)
    if isinstance(v, list):
        if len(v) < schema.get("minItems", 0):
            errors.append(f"{path}: {len(v)} items, fewer than {schema['minItems']}")
        if "maxItems" in schema and len(v) > schema["maxItems"]:
            errors.append(f"{path}: {len(v)} items, more than {schema['maxItems']}")
        if "items" in schema:
            for i, x in enumerate(v):
                check(schema["items"], x, f"{path}[{i}]", root, errors)
    if TYPES["number"](v):
        if "minimum" in schema and v < schema["minimum"]:
            errors.append(f"{path}: {v} < minimum {schema['minimum']}")
        if "maximum" in schema and v > schema["maximum"]:
            errors.append(f"{path}: {v} > maximum {schema['maximum']}")
        if "exclusiveMinimum" in schema and v <= schema["exclusiveMinimum"]:
            errors.append(f"{path}: {v} <= exclusive minimum {schema['exclusiveMinimum']}")
    if isinstance(v, str) and "pattern" in schema and not re.search(schema["pattern"], v):
        errors.append(f"{path}: '{v}' does not match {schema['pattern']}")


def main():
    if len(sys.argv) != 3:
        raise SystemExit(2)
    with open(sys.argv[1]) as f:
        schema = json.load(f)
    try:
        with open(sys.argv[2]) as f:
            doc = json.load(f)
    except json.JSONDecodeError as e:
        print(f"check_schema: {sys.argv[2]} is not JSON: {e}")
        return 1
    errors = []
    check(schema, doc, "$", schema, errors)
    for e in errors:
        print(e)
    print(f"check_schema: {len(errors)} violation(s)")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
