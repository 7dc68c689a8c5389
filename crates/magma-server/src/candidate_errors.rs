//! Error candidates told to the operator: a `200` whose candidates carry
//! `status: "error"` is right for the protocol, but an agent whose model
//! provider is down answers nothing else. Each code gets a `warn` line at
//! once (naming the code, how many candidates, the component and the first
//! message), then at most one every [`WARN_EVERY`], with the number kept back
//! in between; the `metrics` feature counts them by code.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use magma_protocol::Candidate;

/// At most one warning per code in this time.
pub(crate) const WARN_EVERY: Duration = Duration::from_secs(10);
/// Codes remembered for the rate limit; past this, new codes share one entry.
const MAX_CODES: usize = 64;
/// How much of a code or a message a log line or a metric label carries.
const MAX_CODE_CHARS: usize = 64;
const MAX_MESSAGE_CHARS: usize = 300;

#[derive(Debug)]
struct CodeState {
    last_warning: Instant,
    /// Error candidates with this code since the last warning, not warned of.
    kept_back: u64,
}

/// The rate limit of the warnings, per code.
#[derive(Debug, Default)]
pub(crate) struct ErrorCandidateLog {
    codes: Mutex<HashMap<String, CodeState>>,
}

impl ErrorCandidateLog {
    /// `Some(kept_back)` when `count` candidates with `code` at `now` get a
    /// warning (with the number kept back since the previous one), `None`
    /// when they are counted for the next.
    pub(crate) fn admit(&self, code: &str, count: u64, now: Instant) -> Option<u64> {
        let mut codes = self
            .codes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let key = if codes.contains_key(code) || codes.len() < MAX_CODES {
            code
        } else {
            "(other codes)"
        };
        match codes.get_mut(key) {
            None => {
                codes.insert(
                    key.to_owned(),
                    CodeState {
                        last_warning: now,
                        kept_back: 0,
                    },
                );
                Some(0)
            }
            Some(state) if now.saturating_duration_since(state.last_warning) >= WARN_EVERY => {
                state.last_warning = now;
                Some(std::mem::take(&mut state.kept_back))
            }
            Some(state) => {
                state.kept_back += count;
                None
            }
        }
    }
}

/// One code's error candidates in an answer.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct CodeCount<'a> {
    pub(crate) code: &'a str,
    pub(crate) count: u64,
    pub(crate) component: Option<&'a str>,
    pub(crate) first_message: &'a str,
}

/// The answer's error candidates (the agent's lists, one per input) by
/// code, in order of first appearance.
pub(crate) fn by_code(per_input: &[Vec<Candidate>]) -> Vec<CodeCount<'_>> {
    let mut out: Vec<CodeCount<'_>> = Vec::new();
    for error in per_input.iter().flatten().filter_map(|c| c.outcome.error()) {
        let code = cut(error.code.as_str(), MAX_CODE_CHARS);
        match out.iter_mut().find(|c| c.code == code) {
            Some(seen) => seen.count += 1,
            None => out.push(CodeCount {
                code,
                count: 1,
                component: error.component.as_deref(),
                first_message: cut(error.message.as_str(), MAX_MESSAGE_CHARS),
            }),
        }
    }
    out
}

/// `text` cut to at most `max` characters (on a character boundary).
fn cut(text: &str, max: usize) -> &str {
    text.char_indices()
        .nth(max)
        .map_or(text, |(at, _)| &text[..at])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_code_warns_at_once_then_at_most_every_ten_seconds() {
        let log = ErrorCandidateLog::default();
        let t0 = Instant::now();
        assert_eq!(log.admit("provider_unavailable", 2, t0), Some(0));
        assert_eq!(log.admit("invalid_output", 1, t0), Some(0), "another code");
        assert_eq!(
            log.admit("provider_unavailable", 3, t0 + Duration::from_secs(1)),
            None
        );
        assert_eq!(
            log.admit("provider_unavailable", 4, t0 + Duration::from_secs(9)),
            None
        );
        assert_eq!(
            log.admit("provider_unavailable", 1, t0 + WARN_EVERY),
            Some(7),
            "the warning after the window says how many were kept back"
        );
        assert_eq!(log.admit("provider_unavailable", 1, t0 + WARN_EVERY), None);
    }

    #[test]
    fn unbounded_codes_share_one_entry() {
        let log = ErrorCandidateLog::default();
        let t0 = Instant::now();
        for i in 0..MAX_CODES {
            assert_eq!(log.admit(&format!("c{i}"), 1, t0), Some(0));
        }
        assert_eq!(log.admit("late-1", 1, t0), Some(0));
        assert_eq!(
            log.admit("late-2", 1, t0),
            None,
            "shares the entry of late-1"
        );
    }

    #[test]
    fn cut_keeps_whole_characters() {
        assert_eq!(cut("héllo", 2), "hé");
        assert_eq!(cut("abc", 5), "abc");
    }
}
