//! Shared machinery: run a case (kind + document) through the crate, by the
//! registry of document kinds (`magma_protocol::documents`).

use magma_protocol::Issue;
use magma_protocol::documents::CaseKind;

/// The kind a case names; a name the registry does not know fails the test
/// with the names it knows.
pub(crate) fn case_kind(name: &str) -> CaseKind {
    name.parse()
        .unwrap_or_else(|e| panic!("a case of an unregistered kind: {e}"))
}

/// The crate's verdict on one case: `Ok` or the issues.
pub(crate) fn verdict(kind: &str, doc: &str, request: Option<&str>) -> Result<(), Vec<Issue>> {
    match case_kind(kind) {
        CaseKind::Document(kind) => kind
            .parse(doc.as_bytes())
            .map(drop)
            .map_err(|e| e.issues().to_vec()),
        CaseKind::Exchange(kind) => kind
            .validate(request.unwrap_or_default().as_bytes(), doc.as_bytes())
            .map_err(|e| e.issues()),
        other => panic!("no verdict for {other}"),
    }
}
