//! Decoding the payload of an `env` instruction.
//!
//! MAGMA's consumers send simulator feedback as an `env` instruction whose
//! content is a JSON-encoded status object, for example
//! `{"infos": "panda: press_button succeed with message: sw0 is now pressed",
//!   "previous_tool_call": {"panda": {"name": "press_button", "arguments": {"id": "sw0"}}}}`.
//! Every key is optional and other keys may appear; this decoder keeps them.

use crate::json::{Json, Object};
use crate::model::{AgentInstruction, InstructionType};

/// The decoded content of an `env` instruction.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EnvFeedback {
    /// `infos`: one line per robot, `"<robot>: <tool> succeed|failed with message: <text>"`.
    pub infos: Option<String>,
    /// `previous_tool_call`: robot name to `{"name", "arguments"}`.
    pub previous_tool_call: Option<Object>,
    /// `error`, which some statuses carry instead of `infos`.
    pub error: Option<Json>,
    /// `failure_reason`.
    pub failure_reason: Option<String>,
    /// Every other key, and known keys whose value had an unexpected type.
    pub other: Object,
}

/// One line of `infos`: what happened to one robot's last tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutcome<'a> {
    /// The robot.
    pub robot: &'a str,
    /// The tool it ran.
    pub tool: &'a str,
    /// `succeed` (true) or `failed` (false).
    pub succeeded: bool,
    /// The simulator's message.
    pub message: &'a str,
}

/// Why an `env` content is not a status object.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EnvFeedbackError {
    /// The instruction is a `user` one.
    #[error("not an env instruction")]
    NotEnv,
    /// The content is not JSON.
    #[error("env content is not JSON: {0}")]
    NotJson(crate::Error),
    /// The content is JSON but not an object.
    #[error("env content is JSON {0}, not an object")]
    NotObject(&'static str),
}

impl EnvFeedback {
    /// Decodes an `env` content string.
    pub fn parse(content: &str) -> Result<EnvFeedback, EnvFeedbackError> {
        let value = Json::from_slice(content.as_bytes()).map_err(EnvFeedbackError::NotJson)?;
        let Json::Object(object) = value else {
            return Err(EnvFeedbackError::NotObject(value.type_name()));
        };
        let mut fb = EnvFeedback::default();
        for (key, value) in object {
            match (key.as_str(), value) {
                ("infos", Json::String(s)) => fb.infos = Some(s),
                ("previous_tool_call", Json::Object(o)) => fb.previous_tool_call = Some(o),
                ("error", v) => fb.error = Some(v),
                ("failure_reason", Json::String(s)) => fb.failure_reason = Some(s),
                (_, v) => {
                    fb.other.insert(key, v);
                }
            }
        }
        Ok(fb)
    }

    /// The lines of `infos` that follow the consumers' format; other lines
    /// are skipped.
    pub fn outcomes(&self) -> Vec<ToolOutcome<'_>> {
        let Some(infos) = &self.infos else {
            return Vec::new();
        };
        infos.lines().filter_map(parse_outcome).collect()
    }

    /// `true` if any outcome failed, or an `error` or `failure_reason` is set.
    pub fn has_failure(&self) -> bool {
        self.error.as_ref().is_some_and(|e| !e.is_null())
            || self.failure_reason.is_some()
            || self.outcomes().iter().any(|o| !o.succeeded)
    }
}

fn parse_outcome(line: &str) -> Option<ToolOutcome<'_>> {
    let (robot, rest) = line.split_once(": ")?;
    let (head, message) = rest.split_once(" with message: ").unwrap_or((rest, ""));
    let (tool, verdict) = head.rsplit_once(' ')?;
    let succeeded = match verdict {
        "succeed" | "succeeded" => true,
        "failed" => false,
        _ => return None,
    };
    Some(ToolOutcome {
        robot: robot.trim(),
        tool,
        succeeded,
        message,
    })
}

impl AgentInstruction {
    /// Decodes the content of an `env` instruction; an error for `user`
    /// instructions and for content that is not a JSON object.
    pub fn env_feedback(&self) -> Result<EnvFeedback, EnvFeedbackError> {
        match self.kind {
            InstructionType::Env => EnvFeedback::parse(&self.content),
            InstructionType::User => Err(EnvFeedbackError::NotEnv),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_the_consumers_status_objects() {
        let content = r#"{"infos": "panda: press_button succeed with message: sw0 is now pressed\nur5: pick failed with message: out of reach", "previous_tool_call": {"panda": {"name": "press_button", "arguments": {"id": "sw0"}}}, "step": 4}"#;
        let fb = AgentInstruction::env(content).env_feedback().unwrap();
        let outcomes = fb.outcomes();
        assert_eq!(outcomes.len(), 2);
        assert_eq!(
            outcomes[0],
            ToolOutcome {
                robot: "panda",
                tool: "press_button",
                succeeded: true,
                message: "sw0 is now pressed"
            }
        );
        assert!(!outcomes[1].succeeded);
        assert!(fb.has_failure());
        assert!(fb.previous_tool_call.unwrap().contains_key("panda"));
        assert_eq!(fb.other.get("step").and_then(Json::as_i64), Some(4));
    }

    #[test]
    fn tolerates_everything_else() {
        let fb = EnvFeedback::parse(r#"{"error": {"code": 3}, "infos": 7}"#).unwrap();
        assert!(fb.infos.is_none() && fb.other.contains_key("infos"));
        assert!(fb.has_failure());
        assert!(matches!(
            EnvFeedback::parse("[1]"),
            Err(EnvFeedbackError::NotObject("array"))
        ));
        assert!(matches!(
            EnvFeedback::parse("Timer: 32 s"),
            Err(EnvFeedbackError::NotJson(_))
        ));
        assert!(matches!(
            AgentInstruction::user("{}").env_feedback(),
            Err(EnvFeedbackError::NotEnv)
        ));
    }
}
