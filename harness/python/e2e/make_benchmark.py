"""Writes the compiled one-scenario MAGMA-BENCH benchmark `cargo xtask e2e` runs BENCH on.

The public compiled benchmark is fetched from a model hub (`magma-bench fetch`), which is
not reachable from CI, and its compiler is not published. This benchmark is made with
magma-bench's, magma-scenarios' and magma-core's own classes, the way the compiler would
write it, and BENCH loads it with its own loader: one scenario (press_button, the
`ButtonPressOrdered` task of magma-scenarios), one skeleton, one semantic variation and
one clean episode with one `PressButton` stage per button (the first stage carries the
instruction, the later ones an empty one).

Usage: make_benchmark.py OUT_DIR BUTTONS   (BUTTONS comma-separated, e.g. sw1 or sw1,sw3)
Prints one line: the folder, the tools and the attributes the agent will see.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime, timezone
from importlib import metadata
from pathlib import Path

from magma_bench.artifacts.models import (
    BenchmarkManifest,
    CompiledEpisodeSpec,
    EpisodeIndexEntry,
    EpisodeMetadata,
    ScenarioManifest,
    SemanticManifest,
    SkeletonManifest,
)
from magma_bench.artifacts.runtime import serialize_task_stages
from magma_core.simulation.randomizer.spec_generator import SpecGenerator
from magma_core.simulation.serialization import encode_value
from magma_scenarios.scenarios.press_button.button_preset import ButtonPressOrdered

SCENARIO, SKELETON, SEMANTIC = "press_button", "skeleton_000", "semantic_000"
EPISODE = "press_button_000_clean"


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit("usage: make_benchmark.py OUT_DIR BUTTONS")
    out, buttons = Path(sys.argv[1]), sys.argv[2].split(",")
    instruction = "Please press " + " then ".join(f"the button {b}" for b in buttons) + "."
    task = ButtonPressOrdered(sequence_of_buttons=buttons, instruction=instruction)
    # The tool descriptions need a tools object; no simulated robot is needed for them.
    task._tools = task.Tools_cls([None], {"default": 0})
    spec = SpecGenerator(seed=0).generate_N_spec(task, 1)[0]

    scenario = ScenarioManifest(
        scenario_id=SCENARIO, name=SCENARIO, definition=SCENARIO,
        environment_id=task.maniskill_env_id,
        tools_type="magma_scenarios.scenarios.press_button.tool:Tool", skill_types=[],
        description="one-scenario benchmark of magma-rs's cargo xtask e2e")
    skeleton = SkeletonManifest(
        skeleton_id=SKELETON, scenario_id=SCENARIO, track="in_domain", conditions=["clean"],
        source_definition="magma_scenarios.scenarios.press_button.button_preset:ButtonPressOrdered",
        definition_arguments={"sequence_of_buttons": buttons}, generation_seed=0,
        requested_length_bucket="short", requested_tool_call_range=[len(buttons), len(buttons)],
        initialization=task.get_initialization_spec())
    attributes = task.get_init_attributes() if hasattr(task, "get_init_attributes") else task.situation_init.attributes
    visible = {}
    for key in spec.attribute_keys_order:
        if key in attributes:
            value = attributes[key]
            visible[key] = [spec.attributes_equivalence.get(v, v) for v in value] if isinstance(value, list) else value
    semantic = SemanticManifest(
        semantic_id=SEMANTIC, variation_index=0, tools=encode_value(spec.tools),
        visible_attributes=encode_value(visible), tool_equivalence=spec.tool_equivalence,
        attributes_equivalence=spec.attributes_equivalence,
        reversed_attributes_equivalence=spec.reversed_attributes_equivalence,
        attribute_keys_order=spec.attribute_keys_order,
        attribute_values_order=spec.attribute_values_order)
    # The agent sees the randomized names: the instruction names the buttons that way too.
    stages = json.dumps([s.model_dump(mode="json") for s in serialize_task_stages(task)])
    for b in buttons:
        stages = stages.replace(f"the button {b}", f"the button {spec.attributes_equivalence.get(b, b)}")
    episode = CompiledEpisodeSpec(
        episode_id=EPISODE, scenario_id=SCENARIO, skeleton_id=SKELETON, condition="clean",
        stages=json.loads(stages), semantic_id=SEMANTIC,
        metadata=EpisodeMetadata(
            clean_oracle_tool_calls=len(buttons), episode_oracle_tool_calls=len(buttons),
            length_bucket="short", number_of_stages=len(json.loads(stages)),
            number_of_interventions=0, intervention_lags=[], control_episode_id=EPISODE))
    episode_path = f"{SCENARIO}/{SKELETON}/{SEMANTIC}/episodes/{EPISODE}.json"
    for path, model in [(f"{SCENARIO}/scenario.json", scenario), (f"{SCENARIO}/{SKELETON}/skeleton.json", skeleton),
                        (f"{SCENARIO}/{SKELETON}/{SEMANTIC}/semantic.json", semantic), (episode_path, episode)]:
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(model.model_dump_json(indent=2))
    # Index schema 1.7: 1.8 also wants the compiler's stats.json, hashed into the run fingerprint.
    index = BenchmarkManifest(
        schema_version="1.7", benchmark_version="0.0.1-e2e",
        generated_at=datetime.now(timezone.utc).isoformat(), semantic_variations=1, scenarios=[SCENARIO],
        total_episodes=1, episodes=[EpisodeIndexEntry(
            episode_id=EPISODE, scenario_id=SCENARIO, skeleton_id=SKELETON, track="in_domain",
            semantic_id=SEMANTIC, condition="clean", length_bucket="short", path=episode_path)])
    (out / "benchmark.json").write_text(index.model_dump_json(indent=2))
    versions = {name: metadata.version(name) for name in ("magma_bench", "magma_core", "magma_scenarios")}
    (out / "manifest.json").write_text(json.dumps(
        {"schema_version": "1.0", "benchmark_version": "0.0.1-e2e", "requirements": versions}, indent=2))
    print(f"benchmark written: {out} | tools: {json.dumps(spec.tools)} | attributes: {json.dumps(visible)}")


if __name__ == "__main__":
    main()
