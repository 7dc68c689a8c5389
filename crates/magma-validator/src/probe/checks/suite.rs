//! Verdicts over the whole suite: checks that send nothing and judge what
//! the checks before them saw, so they run last (see the registry order in
//! `mod.rs`).
//!
//! Each inference check adds its candidates to the session's tally
//! (`Session::tally`: how many candidates, how many completed, the error
//! codes of the others). A suite-level check reads that tally; it defines
//! its name, title, severity and consumers once, in its `CheckDef`, like
//! every other check, and `docs/validator.md` has its row (the test
//! `tests/it/docs.rs` keeps the two in step).

use super::CheckDef;
use crate::probe::session::Session;
use crate::probe::{Check, CheckSeverity};
use crate::report::Finding;

/// The suite-level checks, in the order they run (after every other check).
pub(super) const CHECKS: &[CheckDef] = &[CheckDef::new(
    "decisions",
    "the inference checks produced at least one completed candidate",
    CheckSeverity::Fail,
    "BENCH (every episode ends at its first step) and GEN (no usable node)",
    decisions,
)];

/// An agent whose every candidate is an error passes each exchange (error
/// candidates are valid), but cannot make a single decision. Skipped when no
/// inference check got a valid response (those already failed on their
/// own); passes on one completed candidate; otherwise one finding naming the
/// error codes, most frequent first.
fn decisions(s: &mut Session, check: &mut Check) {
    let t = &s.tally;
    if t.candidates == 0 {
        check.skip("skipped: no inference check got a valid response");
        return;
    }
    if t.completed > 0 {
        check.verified(format!(
            "{} of {} candidates completed",
            t.completed, t.candidates
        ));
        return;
    }
    let mut codes: Vec<(&String, &usize)> = t.error_codes.iter().collect();
    codes.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let codes: Vec<String> = codes.iter().map(|(c, n)| format!("{c} x{n}")).collect();
    check.push(
        Finding::error(
            "response",
            "no_completed_candidate",
            "",
            format!(
                "all {} candidates of the inference checks were errors: {}",
                t.candidates,
                codes.join(", ")
            ),
        )
        .with_impact(
            "BENCH ends an episode as invalid_format at its first error candidate, so every \
             episode ends at its first step; GEN records only invalid nodes. Error candidates \
             are valid on the wire, so each exchange passed on its own",
        )
        .with_fix(
            "look at the error codes and messages in the candidates (a model provider \
             refusing the key, rate limits, unparsable model output are common causes) and \
             make the agent produce decisions",
        ),
    );
}
