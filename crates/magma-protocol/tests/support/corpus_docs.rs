// Reading the documents of one kind from a JSON Lines corpus of reference
// verdicts (the fixtures, the public and coaching corpora), shared by the
// direct readers' tests (`include!`d where
// `std::path::Path` is in scope).

/// `(id, doc)` of every case of `kind` in a JSON Lines corpus.
fn corpus_docs(path: &Path, kind: &str) -> Vec<(String, String)> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .filter_map(|l| {
            let case: serde_json::Value = serde_json::from_str(l).expect("a JSON line");
            if case.get("kind")?.as_str()? != kind {
                return None;
            }
            let id = case.get("id").and_then(|v| v.as_str()).unwrap_or("?");
            Some((id.to_owned(), case.get("doc")?.as_str()?.to_owned()))
        })
        .collect()
}

/// `(id, doc)` of every case of `kind` in the reference fixtures.
fn fixture_docs_of(kind: &str) -> Vec<(String, String)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reference.jsonl");
    corpus_docs(&path, kind)
}
