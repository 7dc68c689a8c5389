//! The free-form checks: what the reference's `JsonValue` type refuses in a
//! value that is valid JSON (numbers that are not finite, nesting deeper
//! than its recursion guard). The caller names the limit and turns each
//! problem into its own report.

use super::Json;
use super::path::Segment;

/// What is wrong with a free-form value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FreeFormProblem {
    /// NaN or an infinity.
    NotFinite,
    /// A value enclosed by more containers than the limit.
    TooDeep,
}

/// Checks a free-form value without recursion: every number finite, no
/// value enclosed by more than `limit` containers (the value itself is at
/// level 1). Calls `report` for each problem, in document order, with the
/// path from `root` and the offending value.
pub(crate) fn check_free_form(
    root: &Json,
    limit: usize,
    mut report: impl FnMut(FreeFormProblem, Vec<Segment>, &Json),
) {
    struct Frame<'a> {
        value: &'a Json,
        next: usize,
    }
    fn path_of(stack: &[Frame<'_>]) -> Vec<Segment> {
        stack
            .iter()
            .filter_map(|f| {
                let i = f.next.checked_sub(1)?;
                match f.value {
                    Json::Array(_) => Some(Segment::Index(i)),
                    Json::Object(o) => Some(Segment::Key(o.entries()[i].0.clone())),
                    _ => None,
                }
            })
            .collect()
    }
    // Returns true when `v` is a container to descend into. Like pydantic, a
    // value enclosed by more than `limit` containers is refused where it
    // stands (an empty container at the limit is fine: nothing is inside).
    fn visit(
        v: &Json,
        stack: &[Frame<'_>],
        limit: usize,
        report: &mut impl FnMut(FreeFormProblem, Vec<Segment>, &Json),
    ) -> bool {
        if stack.len() > limit {
            report(FreeFormProblem::TooDeep, path_of(stack), v);
            return false;
        }
        match v {
            Json::Number(n) if !n.is_finite() => {
                report(FreeFormProblem::NotFinite, path_of(stack), v);
                false
            }
            Json::Array(a) => !a.is_empty(),
            Json::Object(o) => !o.is_empty(),
            _ => false,
        }
    }

    let mut stack: Vec<Frame<'_>> = Vec::new();
    if visit(root, &stack, limit, &mut report) {
        stack.push(Frame {
            value: root,
            next: 0,
        });
    }
    while let Some(top) = stack.last_mut() {
        let child = match top.value {
            Json::Array(a) => a.get(top.next),
            Json::Object(o) => o.entries().get(top.next).map(|(_, v)| v),
            _ => None,
        };
        match child {
            Some(child) => {
                top.next += 1;
                if visit(child, &stack, limit, &mut report) {
                    stack.push(Frame {
                        value: child,
                        next: 0,
                    });
                }
            }
            None => {
                stack.pop();
            }
        }
    }
}
