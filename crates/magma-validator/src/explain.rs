//! What each problem does to MAGMA's consumers (BENCH = magma-bench 2.0.1,
//! GEN = magma-gen 2.0.0) and how to fix it. The texts here are the ones
//! printed and the ones `docs/validator.md` lists.

use magma_protocol::ErrorKind;

use crate::DocumentKind;

/// What happens when a document of `kind` is refused by the reference
/// models.
pub(crate) fn invalid_document_impact(kind: DocumentKind) -> &'static str {
    match kind {
        DocumentKind::Request => {
            "BENCH and GEN never send such a request (GEN re-validates every request \
             before sending it); a conforming agent answers it with 422, so a client \
             that sends it gets no decision"
        }
        DocumentKind::Response => {
            "BENCH and GEN validate every /v1/responses body with AgentResponse (strict): \
             the failure is fatal for the run (BENCH reports an infrastructure error, \
             GEN's agent manager raises and the run stops)"
        }
        DocumentKind::Info => {
            "BENCH and GEN validate GET /v1/info strictly at start-up: GEN refuses the \
             agent ('returned invalid metadata') and BENCH does not start"
        }
        DocumentKind::Health => {
            "BENCH validates GET /health as AgentHealth at start-up and aborts on any \
             error; GEN does not call /health"
        }
        DocumentKind::CoachingRequest => {
            "GEN builds its coaching requests from these models and never sends such a \
             request; a conforming agent answers it with 422"
        }
        DocumentKind::CoachingResponse => {
            "GEN validates every POST /v1/coaching answer with \
             SpecializedCoachingResponse: the repair of that node fails and no proposal is \
             re-injected (GEN logs the error; the run goes on)"
        }
        DocumentKind::CoachingSession => {
            "GEN never sends such a session config; a conforming agent answers the PUT with \
             422 (an agent that accepts it may start a session GEN could not have opened)"
        }
        DocumentKind::InternalStep => {
            "the inference wire does not check internal_steps, but exporters read them as \
             InternalStep: the record is dropped or the export fails"
        }
        DocumentKind::ReplaceSay => {
            "an agent with coaching_resume applies replace_say from extra_keys.coaching; \
             an invalid payload cannot be applied (the agent should answer an \
             invalid_output error candidate)"
        }
        DocumentKind::SituationLink
        | DocumentKind::CandidateRecord
        | DocumentKind::SituationRecord => {
            "GEN's export reads every saved situation with SituationRecord: a graph folder \
             with an invalid record is skipped whole (`Skipping <folder>: ...`)"
        }
        DocumentKind::ExportExample => {
            "GEN builds its export examples from these models and never hands an exporter \
             such an example"
        }
        DocumentKind::ExportRecord | DocumentKind::ExportResult => {
            "GEN's export validates what an exporter returns with ExportResult: an invalid \
             result fails the whole export"
        }
        // A kind registered since: what is true of every document.
        _ => {
            "BENCH and GEN read this document with magma-core's models: an invalid one is \
             refused where they read it"
        }
    }
}

/// What a coaching reply that does not answer its request does.
pub(crate) const COACHING_MISMATCH_IMPACT: &str = "GEN runs validate_request on every \
     POST /v1/coaching answer: the repair of that node fails and no proposal is \
     re-injected (magma-core's own routes turn such a reply into status \"error\")";

/// How to fix a coaching reply that does not answer its request.
pub(crate) const COACHING_MISMATCH_FIX: &str = "echo the request's request_id unchanged and \
     name only ids of the request's reinjection_points in reinjection_point_id";

/// What a candidate sequence that does not match the request does.
pub(crate) const MISMATCH_IMPACT: &str = "BENCH and GEN run validate_request on every \
     response: 'Response candidates must match request counts and order' is fatal for \
     the run, and no candidate is used";

/// How to fix a candidate sequence.
pub(crate) const MISMATCH_FIX: &str = "answer each input in request order with exactly \
     num_outputs candidates, candidate_index 0..num_outputs-1, source_id = the input's \
     id, and request_id echoed unchanged (magma-server and \
     magma_protocol::AgentResponse::build do this for you)";

/// How to fix one contract error, by kind.
pub(crate) fn fix_for(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::JsonInvalid => {
            "send exactly one JSON document: UTF-8, no byte order mark, no NaN or \
             Infinity, nothing after it"
        }
        ErrorKind::Missing => "add the required field",
        ErrorKind::ExtraForbidden => {
            "remove the field: protocol 2.0 refuses unknown fields at every level \
             (magma-core 2.0.1 removed coaching_session_version, for example)"
        }
        ErrorKind::ModelType => "send a JSON object here",
        ErrorKind::DictType => "send a JSON object here (null is not an object)",
        ErrorKind::ListType => "send a JSON array here (null is not an array)",
        ErrorKind::StringType => "send a string (null is not a string)",
        ErrorKind::IntType => "send an integer literal: 7, not 7.0, \"7\" or true",
        ErrorKind::BoolType => "send true or false, not 1, 0 or a string",
        ErrorKind::LiteralError => {
            "use an allowed value: instruction type \"user\" or \"env\", status \
             \"completed\" or \"error\", health status \"ready\"; coaching kind \
             \"failure\", \"suboptimal\" or \"format\", coaching status \"corrected\", \
             \"abandoned\" or \"error\", internal step origin \"model\" or \"coaching\""
        }
        ErrorKind::StringTooShort => "send at least one character",
        ErrorKind::GreaterThan => {
            "num_outputs must be at least 1; a backend timeout must be greater than 0"
        }
        ErrorKind::GreaterThanEqual => "candidate_index and max_retry count from 0",
        ErrorKind::FiniteNumber => {
            "NaN and Infinity are not JSON: send finite numbers (Python: \
             json.dumps(..., allow_nan=False))"
        }
        ErrorKind::RecursionDepthExceeded => {
            "nest free-form values less deeply (the reference stops at 254 levels)"
        }
        ErrorKind::ValueError => {
            "a completed candidate needs output and no error, an error candidate needs \
             error and no output; input ids must be unique within a request; in \
             coaching: unique step and point ids, the target step in the trajectory, \
             known input_step_ids, exactly one of input and input_step_id per point, at \
             least one backend, proposals for corrected and a non-empty reason and no \
             proposals otherwise"
        }
        ErrorKind::IntOutOfRange => {
            "typed integers (ids, indices, num_outputs) must fit in 64 bits"
        }
        ErrorKind::CandidatesMismatch => MISMATCH_FIX,
        ErrorKind::CoachingMismatch => COACHING_MISMATCH_FIX,
        ErrorKind::FloatType => "send a JSON number (30 or 30.0), not a string or a boolean",
        ErrorKind::StringPatternMismatch => {
            "match the pattern in the message (a coaching_type is lowercase ASCII letters, \
             digits and _, starting with a letter, nothing after it)"
        }
        _ => "make the document match the protocol 2.0 models",
    }
}

/// A lint: valid by the contract, harmful with a real consumer. Reported
/// as a warning; never changes the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Lint {
    /// A completed candidate with a non-empty `say` and tool calls.
    SayWithToolCalls,
    /// A completed candidate with neither `say` nor tool calls.
    EmptyDecision,
    /// A tool call whose name is not among the input's `tools`.
    UnknownTool,
    /// A tool call whose `target_robot_name` is not in
    /// `attributes.known_robots`.
    UnknownRobot,
    /// The input's `memory.memory_list` is absent from a candidate's memory.
    MemoryListDropped,
    /// The same key twice in one JSON object.
    DuplicateKey,
    /// `/v1/info` `protocol_version` is not `2.0`.
    ProtocolVersion,
    /// `/v1/info` `capabilities.inference` is absent or false.
    InferenceCapability,
    /// A candidate with `status: "error"` (probe only).
    ErrorCandidate,
    /// A 2xx JSON answer without a JSON `Content-Type` (probe only).
    ContentType,
    /// A coaching proposal whose `extra_keys` is not a payload an agent
    /// reads (no `kind`, a payload wrapped in a `coaching` key, or an
    /// invalid `replace_say` / `replace_decision`).
    ProposalPayload,
}

impl Lint {
    /// Every lint, in documentation order.
    pub const ALL: [Lint; 11] = [
        Lint::SayWithToolCalls,
        Lint::EmptyDecision,
        Lint::UnknownTool,
        Lint::UnknownRobot,
        Lint::MemoryListDropped,
        Lint::DuplicateKey,
        Lint::ProtocolVersion,
        Lint::InferenceCapability,
        Lint::ErrorCandidate,
        Lint::ContentType,
        Lint::ProposalPayload,
    ];

    /// The stable code printed in reports.
    pub fn code(self) -> &'static str {
        match self {
            Lint::SayWithToolCalls => "say_with_tool_calls",
            Lint::EmptyDecision => "empty_decision",
            Lint::UnknownTool => "unknown_tool",
            Lint::UnknownRobot => "unknown_robot",
            Lint::MemoryListDropped => "memory_list_dropped",
            Lint::DuplicateKey => "duplicate_key",
            Lint::ProtocolVersion => "protocol_version",
            Lint::InferenceCapability => "inference_capability",
            Lint::ErrorCandidate => "error_candidate",
            Lint::ContentType => "content_type",
            Lint::ProposalPayload => "proposal_payload",
        }
    }

    /// Which consumer breaks, and how.
    pub fn impact(self) -> &'static str {
        match self {
            Lint::SayWithToolCalls => {
                "GEN treats the answer as invalid ('The agent returned both a message \
                 and tool calls.'), like an error candidate; BENCH runs the tool calls \
                 and silently drops the say"
            }
            Lint::EmptyDecision => {
                "BENCH ends the episode as invalid_format (unless a suspended skill is \
                 pending); the contract's guidance is exactly one of a say or tool calls"
            }
            Lint::UnknownTool => {
                "BENCH and GEN run tool calls in the simulation through the skills they \
                 listed in `tools`; a name they did not list is not one of those skills, so \
                 the call cannot run as the agent intended"
            }
            Lint::UnknownRobot => {
                "BENCH and GEN address each tool call to the robot named in \
                 target_robot_name; a robot not in attributes.known_robots is not in the \
                 scenario, so the call cannot run as the agent intended"
            }
            Lint::MemoryListDropped => {
                "BENCH and GEN replace their memory with the candidate's memory; the \
                 scenario's persistent rules in memory_list are lost for every later \
                 step of the episode (GEN's export also reads memory.memory_list)"
            }
            Lint::DuplicateKey => {
                "BENCH and GEN (Python json) silently keep the last value and ignore the \
                 earlier ones; other JSON parsers keep the first or refuse the document"
            }
            Lint::ProtocolVersion => {
                "BENCH refuses to start ('Unsupported agent protocol') and GEN refuses \
                 the agent (asks to update core and agent): both require \"2.0\""
            }
            Lint::InferenceCapability => {
                "BENCH refuses to start ('Agent runtime does not support inference'); \
                 GEN does not check capabilities"
            }
            Lint::ErrorCandidate => {
                "BENCH ends the episode as invalid_format; GEN records an invalid node \
                 (and asks for format coaching if the agent advertises it)"
            }
            Lint::ContentType => {
                "BENCH and GEN decode the body whatever its type, but HTTP tooling, \
                 proxies and stricter clients expect application/json"
            }
            Lint::ProposalPayload => {
                "GEN re-injects a proposal by sending the point's input again with \
                 extra_keys.coaching set to the proposal's extra_keys, unchanged \
                 (AgentCoachingManager._create_injected_node), and num_outputs 1: an agent \
                 that cannot read that payload answers an error candidate and the repair is \
                 lost"
            }
        }
    }

    /// How to fix it.
    pub fn fix(self) -> &'static str {
        match self {
            Lint::SayWithToolCalls => {
                "answer with either a non-empty say or tool calls, not both (put the \
                 message in a later turn)"
            }
            Lint::EmptyDecision => {
                "say something or call a tool; if the model's output cannot be used, \
                 return an error candidate with a code and message instead"
            }
            Lint::UnknownTool => {
                "call only tools listed in the input's `tools` (cancel_current_action is \
                 always the first one)"
            }
            Lint::UnknownRobot => {
                "target only robots listed in the input's attributes.known_robots"
            }
            Lint::MemoryListDropped => {
                "start each candidate's memory from a deep copy of the input memory and \
                 keep the keys the agent does not own, memory_list above all"
            }
            Lint::DuplicateKey => "write every key once per object",
            Lint::ProtocolVersion => "advertise \"protocol_version\": \"2.0\"",
            Lint::InferenceCapability => "advertise \"capabilities\": {\"inference\": true}",
            Lint::ErrorCandidate => {
                "make sure ordinary inputs get completed candidates; keep error \
                 candidates for real model or parse failures"
            }
            Lint::ContentType => "send Content-Type: application/json",
            Lint::ProposalPayload => {
                "make extra_keys the payload itself, {\"kind\": \"replace_say\", \"text\": \
                 ...}, {\"kind\": \"replace_decision\", \"decision\": {...}} or the agent's \
                 own kind, never wrapped in a \"coaching\" key (in Rust: \
                 CoachingProposal::new(point, payload))"
            }
        }
    }
}
