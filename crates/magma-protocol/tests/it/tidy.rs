//! The layering of `src/` (see `docs/architecture.md`), checked on the
//! source text: every path a file writes that starts at `crate`, `$crate`,
//! `self` or `super` is resolved to the module it names, and
//!
//! - a module may use only modules of a lower layer, or its own module:
//!   (`json`, `routes`) < `limits` < `error` < (`validate`, `json_schema`) < `model` <
//!   (`exchange`, `env`, `tools`, `schema`); modules of one layer may not
//!   use each other;
//! - a file of one model (`model/request.rs` and its children, ...) may use
//!   another model only through the types `model/mod.rs` re-exports, never
//!   through the other file's module (`super::response::...`).
//!
//! Doc links (`[`crate::x`]`) count too: they tie the layers as well.

use std::path::{Path, PathBuf};

use magma_testkit::source::{Reference, module_of, references, root_names, rust_files};

/// The layers, lowest first; modules in one entry may not use each other.
const LAYERS: &[&[&str]] = &[
    &["json", "routes"],
    &["limits", "inline_vec"],
    &["error"],
    &["validate", "json_schema"],
    &["model"],
    &["exchange", "env", "tools", "schema"],
];

/// Files of `model/` that are not one model's: the registry and the tests
/// that cover every model.
const MODEL_SHARED: &[&str] = &["mod", "tests"];

/// What is wrong with the layering of the files under `src_dir`.
fn violations(src_dir: &Path) -> Vec<String> {
    let layer_of = |m: &str| LAYERS.iter().position(|l| l.contains(&m));
    let names = root_names(src_dir);
    let mut found = Vec::new();
    for file in rust_files(src_dir) {
        let rel = file.strip_prefix(src_dir).expect("under src");
        let module = module_of(rel);
        let Some(own) = module.first() else { continue }; // lib.rs
        let Some(own_layer) = layer_of(own) else {
            found.push(format!(
                "{}: module `{own}` is in no layer of LAYERS",
                rel.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(&file).expect("source file");
        for Reference { path, line, .. } in references(&text, &module) {
            let Some(first) = path.first() else { continue };
            let target = if first.chars().next().is_some_and(char::is_uppercase)
                || (layer_of(first).is_none() && names.contains_key(first))
            {
                match names.get(first) {
                    Some(m) => m.clone(),
                    None => {
                        found.push(format!(
                            "{}:{line}: `crate::{first}` is not re-exported by lib.rs",
                            rel.display()
                        ));
                        continue;
                    }
                }
            } else {
                first.clone()
            };
            let shown = path.join("::");
            match layer_of(&target) {
                Some(l) if l < own_layer || target == *own => {}
                Some(_) => found.push(format!(
                    "{}:{line}: `{shown}`: `{own}` may not use `{target}` (a layer above it, or beside it)",
                    rel.display()
                )),
                None => found.push(format!("{}:{line}: `{shown}`: unknown module `{target}`", rel.display())),
            }
            // One model's file may not reach into another model's file.
            if own == "model" && target == "model" {
                let mine = module.get(1).map(String::as_str).unwrap_or("mod");
                if let Some(theirs) = path.get(1) {
                    let is_model_file =
                        src_dir.join("model").join(format!("{theirs}.rs")).is_file();
                    if is_model_file && theirs != mine && !MODEL_SHARED.contains(&mine) {
                        found.push(format!(
                            "{}:{line}: `{shown}`: model `{mine}` uses the internals of model `{theirs}`; use the types `model/mod.rs` re-exports",
                            rel.display()
                        ));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn layers_point_one_way_and_models_keep_to_themselves() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let found = violations(&src);
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

/// The checker itself, on a small tree written here: each forbidden kind of
/// reference is caught, and the allowed ones are not.
#[test]
fn the_layer_check_catches_what_it_should() {
    let dir = std::env::temp_dir().join(format!("magma-tidy-{}", std::process::id()));
    let write = |rel: &str, text: &str| {
        let path: PathBuf = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "lib.rs",
        "pub mod json;\nmod error;\nmod model;\npub use error::Error;\npub use json::Json;\npub use model::*;\n",
    );
    write("error.rs", "use crate::json::Json;\n");
    write("json/mod.rs", "mod parse;\npub use parse::Json;\n");
    write(
        "json/parse.rs",
        concat!(
            "use super::Json;\nuse crate::{json::x, error::Error};\n",
            "/// See [`crate::model::Thing`].\nfn f() {}\n",
            "mod tests {\n    use super::super::Json;\n    use super::super::super::Error;\n",
            "    const S: &str = \"crate::model::Fake\";\n}\n",
            "macro_rules! m { () => { $crate::Json }; }\n",
        ),
    );
    write(
        "model/mod.rs",
        "mod a;\nmod b;\npub use a::A;\npub use b::B;\n",
    );
    write(
        "model/a.rs",
        "use super::B;\nuse super::b::helper;\nuse crate::model::{A, b::Inner};\nuse crate::Error;\n",
    );
    write("model/b.rs", "pub struct B;\nuse crate::json::Json;\n");
    let found = violations(&dir);
    std::fs::remove_dir_all(&dir).ok();
    let lines: Vec<&str> = found.iter().map(String::as_str).collect();
    let has = |needle: &str| lines.iter().filter(|l| l.contains(needle)).count();
    // json/parse.rs: `crate::error` in a use group, the doc link, and
    // `super::super::super::Error` from the inline module; not the string.
    assert_eq!(has("json/parse.rs:2: `error::Error`"), 1, "{lines:#?}");
    assert_eq!(has("json/parse.rs:3: `model::Thing`"), 1, "{lines:#?}");
    assert_eq!(has("json/parse.rs:7: `Error`"), 1, "{lines:#?}");
    assert_eq!(has("json/parse.rs"), 3, "{lines:#?}");
    // model/a.rs: `super::b::helper` and `crate::model::b::Inner`; the
    // re-exported `B`, `A` and the lower layer's `crate::Error` are fine.
    assert_eq!(has("model/a.rs:2: `model::b::helper`"), 1, "{lines:#?}");
    assert_eq!(has("model/a.rs:3: `model::b::Inner`"), 1, "{lines:#?}");
    assert_eq!(has("model/a.rs"), 2, "{lines:#?}");
    assert_eq!(lines.len(), 5, "{lines:#?}");
}
