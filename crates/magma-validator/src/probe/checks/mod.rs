//! Every check, defined once (name, title, severity, consumers, run
//! function) in one registry, by theme: the endpoints around inference
//! ([`endpoints`]), inference itself ([`inference`]), answers that depend on
//! more than the request ([`state`]), the agent under load
//! ([`concurrency`]), invalid requests ([`invalid`]), the coaching extension
//! ([`coaching`]) and the suite-level verdicts ([`suite`]).

mod coaching;
mod concurrency;
mod endpoints;
mod inference;
mod invalid;
mod state;
mod suite;

pub(crate) use concurrency::{AT_ONCE, BusyRun};

use std::collections::HashMap;

use serde::Serialize;

use super::session::Session;
use super::{Check, CheckSeverity, ProbeConfig, ProbeError, ProbeReport, Progress, Status, Waiver};
use crate::report::{Finding, Severity};

/// What a check does to the agent.
pub(crate) type RunFn = fn(&mut Session, &mut Check);

/// A check of the suite, as defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct CheckInfo {
    /// Stable name, for `--skip` and `--warn`.
    pub name: &'static str,
    /// What it checks, in a few words.
    pub title: &'static str,
    /// How much a fault counts.
    pub severity: CheckSeverity,
    /// Who breaks when it fails, in a few words.
    pub consumers: &'static str,
}

/// A check's definition and its run function.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CheckDef {
    pub(crate) info: CheckInfo,
    pub(crate) run: RunFn,
}

impl CheckDef {
    pub(crate) const fn new(
        name: &'static str,
        title: &'static str,
        severity: CheckSeverity,
        consumers: &'static str,
        run: RunFn,
    ) -> CheckDef {
        CheckDef {
            info: CheckInfo {
                name,
                title,
                severity,
                consumers,
            },
            run,
        }
    }
}

/// The registry, in the order the checks run.
fn registry() -> impl Iterator<Item = &'static CheckDef> {
    endpoints::FIRST
        .iter()
        .chain(inference::CHECKS)
        .chain(state::CHECKS)
        .chain(concurrency::CHECKS)
        .chain(coaching::CHECKS)
        .chain(invalid::CHECKS)
        .chain(endpoints::LAST)
        .chain(suite::CHECKS)
}

/// Every check of the suite, in the order they run.
pub fn checks() -> Vec<CheckInfo> {
    registry().map(|d| d.info).collect()
}

/// The user's waivers by check name; unknown names are a usage error.
fn waivers(config: &ProbeConfig) -> Result<HashMap<&'static str, Waiver>, ProbeError> {
    let mut out = HashMap::new();
    for (names, waiver, flag) in [
        (&config.skip, Waiver::Skip, "--skip"),
        (&config.warn, Waiver::Warn, "--warn"),
    ] {
        for name in names {
            let Some(def) = registry().find(|d| d.info.name == name.as_str()) else {
                let known: Vec<&str> = registry().map(|d| d.info.name).collect();
                return Err(ProbeError::Config(format!(
                    "{flag} {name}: no such check; the checks are {}",
                    known.join(", ")
                )));
            };
            if let Some(other) = out.insert(def.info.name, waiver) {
                if other != waiver {
                    return Err(ProbeError::Config(format!(
                        "{name} is given to both --skip and --warn"
                    )));
                }
            }
        }
    }
    Ok(out)
}

pub(super) fn run(
    config: &ProbeConfig,
    progress: &mut dyn FnMut(Progress<'_>),
) -> Result<ProbeReport, ProbeError> {
    let waivers = waivers(config)?;
    let mut s = Session::new(config)?;
    endpoints::wait_ready(&mut s, progress)?;
    endpoints::stop_on_wrong_base_url(&mut s)?;
    let total = registry().count();
    let mut results = Vec::with_capacity(total);
    for (i, def) in registry().enumerate() {
        let info = def.info;
        let mut check = Check::new(info.name, info.title);
        let waived = waivers.get(info.name).copied();
        match waived {
            Some(Waiver::Skip) => check.skip("waived with --skip"),
            _ if s.time_left().is_zero() => check.push(
                Finding::error(
                    "http",
                    "deadline",
                    "",
                    format!(
                        "not run: the probe's deadline of {} s passed (--deadline)",
                        config.effective_deadline().as_secs_f64()
                    ),
                )
                .with_fix("make the agent answer faster, or give the probe a longer --deadline"),
            ),
            _ => (def.run)(&mut s, &mut check),
        }
        let severity = match waived {
            Some(Waiver::Warn) => CheckSeverity::Warn,
            _ => info.severity,
        };
        if severity == CheckSeverity::Warn {
            check.regrade(Severity::Error, Severity::Warning);
        }
        // An explicit --warn wins over --strict.
        let strict = config.strict && waived.is_none();
        let warned_only = !check.failed() && check.warned();
        if strict {
            check.regrade(Severity::Warning, Severity::Error);
        }
        let mut result = check.finish(severity, waived);
        if strict && warned_only {
            result.reason.push_str(" (a warning, failed by --strict)");
        } else if waived == Some(Waiver::Warn) && result.status == Status::Warn {
            result.reason.push_str(" (softened by --warn)");
        }
        progress(Progress::Finished {
            index: i + 1,
            total,
            check: &result,
        });
        results.push(result);
    }
    let target = s.base_url().to_owned();
    let agent = s.agent.take();
    Ok(ProbeReport::new(target, agent, config, results))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_severity_is_written() {
        let all = checks();
        let mut names: Vec<&str> = all.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(
            all.iter()
                .all(|c| !c.title.is_empty() && !c.consumers.is_empty())
        );
        let nan = all
            .iter()
            .find(|c| c.name == "invalid-request/nan")
            .unwrap();
        assert_eq!(nan.severity, CheckSeverity::Warn);
        let ordering = all.iter().find(|c| c.name == "ordering").unwrap();
        assert_eq!(ordering.severity, CheckSeverity::Fail);
    }

    #[test]
    fn unknown_and_conflicting_waivers_are_usage_errors() {
        let c = ProbeConfig::new("http://127.0.0.1:1").skip("no-such-check");
        let e = waivers(&c).unwrap_err();
        assert!(e.to_string().contains("--skip no-such-check"), "{e}");
        assert!(e.to_string().contains("invalid-request/nan"), "{e}");
        let c = ProbeConfig::new("http://127.0.0.1:1")
            .skip("ordering")
            .warn("ordering");
        assert!(waivers(&c).is_err());
        let c = ProbeConfig::new("http://127.0.0.1:1").warn("invalid-request/nan");
        assert_eq!(waivers(&c).unwrap()["invalid-request/nan"], Waiver::Warn);
    }
}
