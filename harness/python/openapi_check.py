"""`cargo xtask openapi-check`: validates the committed files.

Arguments: the workspace root, the fixture file and the schema names. Validates
docs/openapi.json (openapi-spec-validator), every docs/schema file against the
draft 2020-12 metaschema, and replays the reference fixtures through the
schemas; exits 1 when the schemas and the reference verdicts disagree in a way
the schemas could have avoided.
"""
import json, sys
from collections import Counter
from jsonschema import Draft202012Validator
from openapi_spec_validator import validate

root, fixtures, names = sys.argv[1], sys.argv[2], sys.argv[3:]
def load(rel):
    with open(f"{root}/{rel}", encoding="utf-8") as f:
        return json.load(f)

validate(load("docs/openapi.json"))
print("docs/openapi.json is a valid OpenAPI 3.1 document (openapi-spec-validator)")
validators = {}
for name in names:
    schema = load(f"docs/schema/{name}.schema.json")
    Draft202012Validator.check_schema(schema)
    validators[name] = Draft202012Validator(schema)
print(f"docs/schema: {len(names)} schemas are valid against the draft 2020-12 metaschema")

# Error types that a schema must catch when they are the reference's only complaints.
EXPRESSIBLE = {"missing", "extra_forbidden", "string_type", "list_type", "dict_type",
               "bool_type", "literal_error", "string_too_short", "greater_than",
               "greater_than_equal", "model_type", "model_attributes_type"}
KINDS = {"request": "AgentRequest", "response": "AgentResponse", "info": "AgentInfo",
         "health": "AgentHealth"}
agree = Counter()
beyond_64 = 0
looser = Counter()
problems = []
with open(fixtures, encoding="utf-8") as f:
    next(f)
    for line in f:
        case = json.loads(line)
        name = KINDS.get(case["kind"])
        if name is None:
            continue
        try:
            doc = json.loads(case["doc"])
        except (ValueError, RecursionError):
            continue
        errors = list(validators[name].iter_errors(doc))
        accepted = case["verdict"] == "accept"
        if accepted == (not errors):
            agree[case["verdict"]] += 1
        elif accepted:
            if all(e.validator in ("minimum", "maximum")
                   and e.validator_value in (-2**63, 2**63 - 1, 2**64 - 1) for e in errors):
                beyond_64 += 1
            else:
                e = errors[0]
                problems.append(f"{case['id']}: the reference accepts, the schema refuses: "
                                f"{e.message[:160]} at {list(e.absolute_path)}")
        else:
            types = sorted({e["type"] if e["type"] != "value_error" else e["msg"]
                            for e in case["errors"]})
            if set(types) & EXPRESSIBLE:
                problems.append(f"{case['id']}: the reference refuses ({', '.join(types)}), "
                                f"the schema accepts")
            else:
                looser[", ".join(types)] += 1

total = sum(agree.values()) + beyond_64 + sum(looser.values()) + len(problems)
print(f"{fixtures}: {total} documents of kinds {', '.join(KINDS)} replayed through the schemas")
print(f"  {agree['accept']} accepted and {agree['reject']} refused by both the schema "
      "and the reference")
print(f"  {beyond_64} accepted by the reference, refused by the schema's 64-bit bounds "
      "(as by magma-rs)")
print(f"  {sum(looser.values())} refused by the reference only, for rules JSON Schema "
      "cannot express:")
for types, n in sorted(looser.items(), key=lambda kv: (-kv[1], kv[0])):
    print(f"    {n:5}  {types}")
for p in problems:
    print("PROBLEM", p)
sys.exit(1 if problems else 0)
