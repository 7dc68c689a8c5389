#!/usr/bin/env python3
"""The JSON Schemas that magma-core's pydantic models produce, for `cargo xtask schema-diff`.

Run through `cargo xtask schema-diff`, which builds the pinned reference environment
(magma-core 2.0.1 + pydantic, see requirements-reference.txt) and compares the output with
the schemas of `magma_protocol::schema`. Prints one JSON object on stdout:

    {"magma_core": "2.0.1", "pydantic": "2.14.4",
     "models": {"<Model>": {"validation": {...}, "serialization": {...}}, ...}}

with `Model.model_json_schema(mode=...)` of every pydantic model defined in
`magma_core.protocol.agent` and `magma_core.protocol.agent_coaching` (base classes
included), in name order. Deterministic.
"""

from __future__ import annotations

import inspect
import json
import sys
from importlib import metadata

import pydantic
from magma_core.protocol import agent, agent_coaching
from pydantic import BaseModel


def models() -> dict[str, type[BaseModel]]:
    found = {}
    for module in (agent, agent_coaching):
        found.update(module_models(module))
    return dict(sorted(found.items()))


def module_models(module) -> dict[str, type[BaseModel]]:
    found = {}
    for name, obj in vars(module).items():
        # Skips aliases, and pydantic's parametrized generics, which it registers in the
        # module under names like `RootModel[list[AgentOutput]]` (the base of AgentResponse).
        if (
            name.isidentifier()
            and inspect.isclass(obj)
            and name == obj.__name__
            and issubclass(obj, BaseModel)
            and obj.__module__ == module.__name__
        ):
            found[name] = obj
    return found


def main() -> None:
    out = {
        "magma_core": metadata.version("magma-core"),
        "pydantic": pydantic.VERSION,
        "models": {
            name: {
                "validation": model.model_json_schema(mode="validation"),
                "serialization": model.model_json_schema(mode="serialization"),
            }
            for name, model in models().items()
        },
    }
    json.dump(out, sys.stdout, indent=1, sort_keys=True, allow_nan=False)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
