//! `docs/architecture.md` against the tree (`magma_testkit::code_map`): the
//! protocol's code map names every file of `src/` and only files that
//! exist, and the "Adding a model" checklist names paths that exist and
//! identifiers that the code it points at uses outside its tests.

use std::path::Path;

use magma_testkit::code_map::{
    architecture, checklist_problems, code_map_problems, repo_root, section,
};

#[test]
fn the_code_map_names_every_source_file_and_only_files_there_are() {
    let repo = repo_root(env!("CARGO_MANIFEST_DIR"));
    let text = architecture(&repo);
    let rows = section(&text, "### crates/magma-protocol ");
    let problems = code_map_problems(Path::new(env!("CARGO_MANIFEST_DIR")), &rows);
    assert!(
        problems.is_empty(),
        "docs/architecture.md:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_adding_a_model_checklist_names_what_the_code_uses() {
    let repo = repo_root(env!("CARGO_MANIFEST_DIR"));
    let text = architecture(&repo);
    let steps = section(&text, "### Adding a model");
    assert!(steps.len() > 10, "{steps:?}");
    let problems = checklist_problems(&repo, &steps, &["crates/magma-protocol/src"]);
    assert!(
        problems.is_empty(),
        "docs/architecture.md:\n{}",
        problems.join("\n")
    );
}
