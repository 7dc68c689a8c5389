//! The generated schemas against the reference (the generation itself is
//! `cargo xtask codegen`):
//!
//! - `cargo xtask schema-diff` compares the wire types' schemas, field by field, with what
//!   magma-core 2.0.1's pydantic models produce (`harness/python/pydantic_schemas.py` in the
//!   reference venv) and fails on any difference that `ALLOWED` does not explain.
//! - `cargo xtask openapi-check` validates `docs/openapi.json` with openapi-spec-validator,
//!   checks every schema file against the draft 2020-12 metaschema, and replays the
//!   reference fixtures through the schemas (`harness/python/openapi_check.py`, a venv from
//!   `requirements-openapi.txt`); then compares its coaching routes with FastAPI's document
//!   for magma-core's `mount_coaching_routes` (`harness/python/coaching_openapi.py`, in the
//!   interop venv).

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result, bail};
use magma_protocol::schema::Schema;
use serde_json::Value;

use crate::python;

// The same venv as `cargo xtask conformance`.
const REFERENCE_REQUIREMENTS: &str = "harness/python/requirements-reference.txt";
const REFERENCE_PACKAGE: &str = "magma-core==2.0.1";
const PYDANTIC_SCRIPT: &str = "harness/python/pydantic_schemas.py";
const OPENAPI_REQUIREMENTS: &str = "harness/python/requirements-openapi.txt";
const OPENAPI_SCRIPT: &str = "harness/python/openapi_check.py";
/// The generated OpenAPI document (`cargo xtask codegen`).
const OPENAPI: &str = "docs/openapi.json";
const FIXTURES: &str = "crates/magma-protocol/tests/fixtures/reference.jsonl";

// ---------------------------------------------------------------------------------------------
// cargo xtask schema-diff

/// A value of a difference, as the allow-list expects it.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Present, with any value.
    Any,
    /// Absent on this side.
    Absent,
    /// Present with exactly this (compact JSON) value.
    Is(&'static str),
}

impl Expect {
    fn matches(self, value: Option<&str>) -> bool {
        match (self, value) {
            (Expect::Any, v) => v.is_some(),
            (Expect::Absent, v) => v.is_none(),
            (Expect::Is(want), v) => v == Some(want),
        }
    }
}

/// A difference with pydantic that is explained; `*` matches any model or path.
#[derive(Debug)]
struct Allowed {
    model: &'static str,
    path: &'static str,
    aspect: &'static str,
    pydantic: Expect,
    ours: Expect,
    reason: &'static str,
}

const I64_MIN: &str = "-9223372036854775808";
const I64_MAX: &str = "9223372036854775807";
const U64_MAX: &str = "18446744073709551615";
const REASON_64: &str = "typed integers are 64-bit in magma-rs (deviation `int.beyond_i64` in \
    docs/conformance.md); Python's are unbounded";
const REASON_DEFAULT: &str = "pydantic states no default for `default_factory` fields; ours give \
    the value the reference fills in and serializes";

/// Every explained difference. An entry that explains nothing fails the check too.
const ALLOWED: &[Allowed] = &[
    Allowed {
        model: "*",
        path: "*",
        aspect: "title",
        pydantic: Expect::Any,
        ours: Expect::Absent,
        reason: "pydantic titles every field after its name (`Request Id`); ours title the models \
            only",
    },
    Allowed {
        model: "*",
        path: "*",
        aspect: "description",
        pydantic: Expect::Absent,
        ours: Expect::Any,
        reason: "ours say what JSON Schema cannot (unique ids, candidate order, strict integers, \
            finite numbers, nesting limits); the reference has no docstrings",
    },
    Allowed {
        model: "*",
        path: "*",
        aspect: "default",
        pydantic: Expect::Absent,
        ours: Expect::Is("[]"),
        reason: REASON_DEFAULT,
    },
    Allowed {
        model: "*",
        path: "*",
        aspect: "default",
        pydantic: Expect::Absent,
        ours: Expect::Is("{}"),
        reason: REASON_DEFAULT,
    },
    Allowed {
        model: "AgentInput",
        path: "id",
        aspect: "minimum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MIN),
        reason: REASON_64,
    },
    Allowed {
        model: "AgentInput",
        path: "id",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "AgentInput",
        path: "num_outputs",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(U64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "CoachingStage",
        path: "id",
        aspect: "minimum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MIN),
        reason: REASON_64,
    },
    Allowed {
        model: "CoachingStage",
        path: "id",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "CoachingStep",
        path: "id",
        aspect: "minimum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MIN),
        reason: REASON_64,
    },
    Allowed {
        model: "CoachingStep",
        path: "id",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "ReinjectionPoint",
        path: "input_step_id",
        aspect: "minimum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MIN),
        reason: REASON_64,
    },
    Allowed {
        model: "ReinjectionPoint",
        path: "input_step_id",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "SpecializedCoachingRequest",
        path: "target_step_id",
        aspect: "minimum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MIN),
        reason: REASON_64,
    },
    Allowed {
        model: "SpecializedCoachingRequest",
        path: "target_step_id",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "CoachingBackendConfig",
        path: "max_retry",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(U64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "AgentOutput",
        path: "source_id",
        aspect: "minimum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MIN),
        reason: REASON_64,
    },
    Allowed {
        model: "AgentOutput",
        path: "source_id",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(I64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "AgentOutput",
        path: "candidate_index",
        aspect: "maximum",
        pydantic: Expect::Absent,
        ours: Expect::Is(U64_MAX),
        reason: REASON_64,
    },
    Allowed {
        model: "AgentOutput",
        path: "",
        aspect: "oneOf",
        pydantic: Expect::Absent,
        ours: Expect::Any,
        reason: "the status/output/error rule, a model validator in the reference, which pydantic \
            leaves out of the schema",
    },
    Allowed {
        model: "ContractModel",
        path: "",
        aspect: "model",
        pydantic: Expect::Is("defined"),
        ours: Expect::Absent,
        reason: "the reference's base class of every model (no fields), not a wire type",
    },
];

impl Allowed {
    fn explains(&self, d: &Difference) -> bool {
        (self.model == "*" || self.model == d.model)
            && (self.path == "*" || self.path == d.path)
            && self.aspect == d.aspect
            && self.pydantic.matches(d.pydantic.as_deref())
            && self.ours.matches(d.ours.as_deref())
    }
}

/// One fact that differs: `None` where a side does not have it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Difference {
    model: String,
    path: String,
    aspect: String,
    pydantic: Option<String>,
    ours: Option<String>,
}

/// `cargo xtask schema-diff`.
pub fn schema_diff() -> Result<()> {
    let root = crate::project_root()?;
    let python = python::ensure_venv(
        "reference",
        &root.join(REFERENCE_REQUIREMENTS),
        &[REFERENCE_PACKAGE],
    )?;
    let mut cmd = python::command(&python);
    cmd.current_dir(&root).arg(root.join(PYDANTIC_SCRIPT));
    let output = python::run(&mut cmd).context("asking pydantic for the reference schemas")?;
    let reference: Value = serde_json::from_slice(&output.stdout)
        .context("parsing the output of pydantic_schemas.py")?;
    let models = reference
        .get("models")
        .and_then(Value::as_object)
        .context("pydantic_schemas.py printed no `models`")?;
    println!(
        "JSON Schemas of magma-core {} (pydantic {}) compared with magma_protocol::schema\n",
        reference["magma_core"].as_str().unwrap_or("?"),
        reference["pydantic"].as_str().unwrap_or("?"),
    );

    let mut ours = BTreeMap::new();
    for s in Schema::WIRE_TYPES {
        let doc = serde_json::to_value(s.document()).context("converting a schema")?;
        ours.insert(s.name().to_owned(), doc);
    }
    let differences = compare(models, &ours)?;

    // Reasons are numbered in ALLOWED order, one number per distinct text.
    let mut reasons: Vec<&str> = Vec::new();
    for a in ALLOWED {
        if !reasons.contains(&a.reason) {
            reasons.push(a.reason);
        }
    }
    let mut rows = Vec::new();
    let mut used = vec![false; ALLOWED.len()];
    for d in &differences {
        let reason = ALLOWED.iter().position(|a| a.explains(d)).map(|i| {
            used[i] = true;
            reasons
                .iter()
                .position(|r| *r == ALLOWED[i].reason)
                .unwrap_or_default()
                + 1
        });
        rows.push((d, reason));
    }
    print_table(&rows);
    println!();
    for (n, reason) in reasons.iter().enumerate() {
        println!("({}) {reason}", n + 1);
    }

    let unexplained = rows.iter().filter(|(_, r)| r.is_none()).count();
    let unused: Vec<_> = ALLOWED
        .iter()
        .zip(&used)
        .filter(|(_, used)| !**used)
        .map(|(a, _)| format!("{} {} {}", a.model, display_path(a.path), a.aspect))
        .collect();
    println!(
        "\n{} differences in {} models: {} explained, {unexplained} unexplained",
        rows.len(),
        models.len(),
        rows.len() - unexplained
    );
    if !unused.is_empty() {
        bail!(
            "allow-list entries that explain nothing (remove them from ALLOWED in \
                harness/src/schema_check.rs): {}",
            unused.join("; ")
        );
    }
    if unexplained > 0 {
        bail!(
            "{unexplained} differences with pydantic are not explained: fix \
             magma_protocol::schema, or add them with a reason to ALLOWED in \
             harness/src/schema_check.rs and to docs/conformance.md"
        );
    }
    Ok(())
}

/// Every difference between pydantic's schemas (`{"<Model>": {"validation", "serialization"}}`)
/// and ours (`{"<Model>": document}`).
fn compare(
    pydantic: &serde_json::Map<String, Value>,
    ours: &BTreeMap<String, Value>,
) -> Result<Vec<Difference>> {
    let names: BTreeSet<String> = pydantic.keys().chain(ours.keys()).cloned().collect();
    let mut out = Vec::new();
    for name in &names {
        let difference =
            |path: &str, aspect: &str, p: Option<String>, o: Option<String>| Difference {
                model: name.clone(),
                path: path.to_owned(),
                aspect: aspect.to_owned(),
                pydantic: p,
                ours: o,
            };
        let (reference, mine) = match (pydantic.get(name), ours.get(name)) {
            (Some(r), Some(m)) => (r, m),
            (r, m) => {
                let defined = |x: bool| x.then(|| "defined".to_owned());
                out.push(difference(
                    "",
                    "model",
                    defined(r.is_some()),
                    defined(m.is_some()),
                ));
                continue;
            }
        };
        let validation = reference
            .get("validation")
            .with_context(|| format!("{name}: no validation-mode schema"))?;
        if reference.get("serialization") != Some(validation) {
            out.push(difference(
                "",
                "serialization mode",
                Some("differs from validation mode".to_owned()),
                None,
            ));
        }
        let p = facts(validation, &names);
        let o = facts(mine, &names);
        let keys: BTreeSet<_> = p.keys().chain(o.keys()).collect();
        for key in keys {
            let (pv, ov) = (p.get(key), o.get(key));
            if pv != ov {
                out.push(difference(&key.0, &key.1, pv.cloned(), ov.cloned()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// `(path, aspect) -> value`: what a schema says, in a form where equivalent spellings are
/// equal. Paths: `""` for the model, `a` for property `a`, `a[]` for its items, `a{}` for
/// the values of an object with `additionalProperties`.
type Facts = BTreeMap<(String, String), String>;

/// The facts of one schema document; `$ref`s to `models` stay names, others are inlined.
fn facts(doc: &Value, models: &BTreeSet<String>) -> Facts {
    let flat = Flatten {
        defs: doc.get("$defs").and_then(Value::as_object),
        models,
    };
    let mut out = Facts::new();
    flat.schema(doc, "", &mut out);
    out
}

struct Flatten<'a> {
    defs: Option<&'a serde_json::Map<String, Value>>,
    models: &'a BTreeSet<String>,
}

impl Flatten<'_> {
    /// `schema` with every `$ref` to something other than a model replaced by its target
    /// (pydantic's `JsonValue`, which is `{}`).
    fn resolve(&self, schema: &serde_json::Map<String, Value>) -> serde_json::Map<String, Value> {
        let mut schema = schema.clone();
        for _ in 0..16 {
            let Some(name) = schema.get("$ref").and_then(Value::as_str).map(ref_name) else {
                break;
            };
            if self.models.contains(name) {
                break;
            }
            let target = self
                .defs
                .and_then(|d| d.get(name))
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            schema.remove("$ref");
            for (k, v) in target {
                schema.entry(k).or_insert(v);
            }
        }
        schema
    }

    /// The alternatives of a union whose branches are each only a `type` or a `$ref` to
    /// a model; `None` for any other union.
    fn simple_union(&self, branches: &Value) -> Option<Vec<String>> {
        let mut alternatives = Vec::new();
        for branch in branches.as_array()? {
            let branch = self.resolve(branch.as_object()?);
            match (branch.len(), branch.get("type"), branch.get("$ref")) {
                (1, Some(t), None) => alternatives.extend(type_names(t)),
                (1, None, Some(r)) => alternatives.push(ref_name(r.as_str()?).to_owned()),
                _ => return None,
            }
        }
        Some(alternatives)
    }

    fn schema(&self, schema: &Value, path: &str, out: &mut Facts) {
        let mut put = |aspect: &str, value: String| {
            out.insert((path.to_owned(), aspect.to_owned()), value);
        };
        let Some(schema) = schema.as_object() else {
            put("schema", compact(schema));
            return;
        };
        let schema = self.resolve(schema);
        let mut types = BTreeSet::new();
        let mut typed = false;
        let mut children = Vec::new();
        for (key, value) in &schema {
            match key.as_str() {
                "$schema" | "$defs" | "$comment" => {}
                "$ref" => {
                    typed = true;
                    types.insert(ref_name(value.as_str().unwrap_or_default()).to_owned());
                }
                "type" => {
                    typed = true;
                    types.extend(type_names(value));
                }
                "anyOf" | "oneOf" => match self.simple_union(value) {
                    Some(alternatives) => {
                        typed = true;
                        types.extend(alternatives);
                    }
                    None => put(key, compact(value)),
                },
                "const" => put("enum", compact(&Value::Array(vec![value.clone()]))),
                "enum" => {
                    let mut items: Vec<String> = value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(compact)
                        .collect();
                    items.sort();
                    put("enum", format!("[{}]", items.join(",")));
                }
                "required" => {
                    let mut names: Vec<&str> = value
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .collect();
                    names.sort_unstable();
                    put("required", names.join(", "));
                }
                "properties" => {
                    let props = value.as_object().cloned().unwrap_or_default();
                    let mut names: Vec<&String> = props.keys().collect();
                    names.sort();
                    put(
                        "properties",
                        names
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    );
                    for (name, sub) in props {
                        let child = if path.is_empty() {
                            name
                        } else {
                            format!("{path}.{name}")
                        };
                        children.push((child, sub));
                    }
                }
                "items" => children.push((format!("{path}[]"), value.clone())),
                "additionalProperties" => {
                    let resolved = match value {
                        Value::Object(o) => Value::Object(self.resolve(o)),
                        other => other.clone(),
                    };
                    match resolved {
                        Value::Bool(false) => put(key, "false".to_owned()),
                        Value::Bool(true) => put(key, "any".to_owned()),
                        Value::Object(o) if o.is_empty() => put(key, "any".to_owned()),
                        other => {
                            put(key, "schema".to_owned());
                            children.push((format!("{path}{{}}"), other));
                        }
                    }
                }
                _ => put(key, compact(value)),
            }
        }
        if types.contains("object") && !schema.contains_key("additionalProperties") {
            put("additionalProperties", "any".to_owned());
        }
        put(
            "type",
            if typed {
                types.into_iter().collect::<Vec<_>>().join(" | ")
            } else {
                "any".to_owned()
            },
        );
        for (child, sub) in children {
            self.schema(&sub, &child, out);
        }
    }
}

fn ref_name(reference: &str) -> &str {
    reference.rsplit('/').next().unwrap_or(reference)
}

fn type_names(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(items) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        other => vec![compact(other)],
    }
}

fn compact(value: &Value) -> String {
    value.to_string()
}

fn display_path(path: &str) -> &str {
    if path.is_empty() { "(model)" } else { path }
}

fn print_table(rows: &[(&Difference, Option<usize>)]) {
    const VALUE: usize = 34;
    let cut = |v: &Option<String>| match v {
        None => "-".to_owned(),
        Some(v) if v.chars().count() > VALUE => {
            format!("{}...", v.chars().take(VALUE - 3).collect::<String>())
        }
        Some(v) => v.clone(),
    };
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|(d, reason)| {
            [
                d.model.clone(),
                display_path(&d.path).to_owned(),
                d.aspect.clone(),
                cut(&d.pydantic),
                cut(&d.ours),
                reason.map_or_else(|| "UNEXPLAINED".to_owned(), |n| format!("({n})")),
            ]
        })
        .collect();
    let header = ["model", "path", "aspect", "pydantic", "magma-rs", "why"].map(str::to_owned);
    let mut widths = header.clone().map(|h| h.chars().count());
    for row in &cells {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for row in std::iter::once(&header).chain(&cells) {
        let mut line = String::new();
        for (i, (cell, w)) in row.iter().zip(widths).enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&format!("{cell:<w$}  "));
            }
        }
        println!("{}", line.trim_end());
    }
}

/// `cargo xtask openapi-check`.
pub fn openapi_check() -> Result<()> {
    let root = crate::project_root()?;
    let python = python::ensure_venv("openapi", &root.join(OPENAPI_REQUIREMENTS), &[])?;
    let script = root.join(OPENAPI_SCRIPT);
    let mut cmd = python::command(&python);
    cmd.current_dir(&root)
        .arg(&script)
        .arg(&root)
        .arg(FIXTURES)
        .args(Schema::ALL.map(Schema::name));
    let output = cmd
        .output()
        .with_context(|| format!("could not start {}", python.display()))?;
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!("openapi-check failed ({})", output.status);
    }
    // The coaching routes against FastAPI's document for magma-core's own
    // `mount_coaching_routes` (FastAPI and magma-core are in the interop venv).
    let interop = python::ensure_venv(
        "interop",
        &root.join("harness/python/requirements-interop.txt"),
        &["magma-core==2.0.1", "magma-gen==2.0.0"],
    )?;
    let mut cmd = python::command(&interop);
    cmd.current_dir(&root)
        .arg(root.join("harness/python/coaching_openapi.py"))
        .arg(root.join(OPENAPI));
    let output = cmd
        .output()
        .with_context(|| format!("could not start {}", interop.display()))?;
    print!("{}", String::from_utf8_lossy(&output.stdout));
    eprint!("{}", String::from_utf8_lossy(&output.stderr));
    if !output.status.success() {
        bail!(
            "openapi-check: the coaching routes differ from FastAPI's ({})",
            output.status
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use magma_protocol::schema::DIALECT;

    use super::*;

    fn diff_of(pydantic: Value, ours: Value) -> Vec<Difference> {
        let mut p = serde_json::Map::new();
        p.insert(
            "M".into(),
            serde_json::json!({ "validation": pydantic, "serialization": pydantic }),
        );
        let mut o = BTreeMap::new();
        o.insert("M".to_owned(), ours);
        compare(&p, &o).expect("compare")
    }

    #[test]
    fn equivalent_spellings_are_equal() {
        let pydantic = serde_json::json!({
            "$defs": { "JsonValue": {} },
            "type": "object", "title": "M", "additionalProperties": false,
            "properties": {
                "a": { "anyOf": [{ "type": "string" }, { "type": "null" }], "default": null },
                "m": { "type": "object", "additionalProperties": { "$ref": "#/$defs/JsonValue" } },
                "s": { "const": "ready", "type": "string" }
            }
        });
        let ours = serde_json::json!({
            "$schema": DIALECT, "type": "object", "title": "M", "additionalProperties": false,
            "properties": {
                "a": { "type": ["null", "string"], "default": null },
                "m": { "type": "object" },
                "s": { "type": "string", "enum": ["ready"] }
            }
        });
        assert_eq!(diff_of(pydantic, ours), Vec::new());
    }

    #[test]
    fn differences_are_found_and_explained_precisely() {
        let pydantic = serde_json::json!({
            "type": "object", "required": ["x"],
            "properties": { "x": { "type": "integer", "exclusiveMinimum": 0, "title": "X" } }
        });
        let ours = serde_json::json!({
            "type": "object", "required": [],
            "properties": { "x": { "type": "integer", "minimum": 1, "default": [] } }
        });
        let found = diff_of(pydantic, ours);
        let shown: Vec<_> = found
            .iter()
            .map(|d| {
                format!(
                    "{} {} {:?} {:?}",
                    display_path(&d.path),
                    d.aspect,
                    d.pydantic,
                    d.ours
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                r#"(model) required Some("x") Some("")"#,
                r#"x default None Some("[]")"#,
                r#"x exclusiveMinimum Some("0") None"#,
                r#"x minimum None Some("1")"#,
                r#"x title Some("\"X\"") None"#,
            ]
        );
        let explained: Vec<bool> = found
            .iter()
            .map(|d| ALLOWED.iter().any(|a| a.explains(d)))
            .collect();
        assert_eq!(explained, [false, true, false, false, true]);
    }
}
