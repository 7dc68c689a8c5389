//! Matching a response to its request, and building responses that match by
//! construction.

use std::fmt;

use crate::error::{ErrorKind, Issue};
use crate::json::{Location, Object, Segment, nth_container};
use crate::limits::READ;
use crate::model::{
    AgentInput, AgentOutput, AgentRequest, AgentResponse, Outcome, OutputId, OutputParts,
    output_size_hint, write_output,
};

/// The `(request_id, source_id, candidate_index)` that identifies a candidate.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CandidateKey {
    /// Echo of the request id.
    pub request_id: String,
    /// The input's id.
    pub source_id: i64,
    /// The candidate's index for that input.
    pub candidate_index: u64,
}

impl fmt::Display for CandidateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "(request_id {:?}, source_id {}, candidate_index {})",
            self.request_id, self.source_id, self.candidate_index
        )
    }
}

/// A response whose candidates are not, in order, one per `(input, k)` of
/// the request. Says where the sequences first differ.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("response candidates must match request counts and order: {what}")]
pub struct CandidateMismatch {
    /// Index in the response array of the first wrong candidate.
    pub position: usize,
    /// What should be there, if anything.
    pub expected: Option<CandidateKey>,
    /// What is there, if anything.
    pub found: Option<CandidateKey>,
    what: String,
}

impl CandidateMismatch {
    fn new(position: usize, expected: Option<CandidateKey>, found: Option<CandidateKey>) -> Self {
        let what = match (&expected, &found) {
            (Some(e), Some(f)) => format!("candidate {position} should be {e}, found {f}"),
            (Some(e), None) => format!("candidate {position} is missing: expected {e}"),
            (None, Some(f)) => format!("candidate {position} is extra: found {f}"),
            (None, None) => format!("candidate {position} differs"),
        };
        CandidateMismatch {
            position,
            expected,
            found,
            what,
        }
    }

    /// The element at `position` is a candidate past the `expected` ones
    /// the request asks for, found before the response was built.
    fn unread_extra(position: usize, expected: usize) -> Self {
        CandidateMismatch {
            position,
            expected: None,
            found: None,
            what: format!(
                "candidate {position} is extra: the request asks for {expected} candidates \
                 and the response holds more (not read further)"
            ),
        }
    }

    /// As a validation issue (`candidates_mismatch`) located at the candidate.
    pub fn to_issue(&self) -> Issue {
        Issue::new(
            ErrorKind::CandidatesMismatch,
            Location::from(vec![Segment::Index(self.position)]),
            format!(
                "Response candidates must match request counts and order: {}",
                self.what
            ),
        )
    }
}

fn key_of(c: &AgentOutput) -> CandidateKey {
    CandidateKey {
        request_id: c.request_id.to_string(),
        source_id: c.source_id,
        candidate_index: c.candidate_index,
    }
}

impl AgentResponse {
    /// The reference's `validate_request`: the candidates must be, in order,
    /// exactly one per `(input, k)` for each input in request order and
    /// `k = 0 .. num_outputs-1`, each echoing the request id. Stops at the
    /// first difference, so a huge `num_outputs` costs nothing.
    pub fn validate_request(&self, request: &AgentRequest) -> Result<(), CandidateMismatch> {
        let actual = self.candidates();
        let mut pos = 0usize;
        for input in request.inputs() {
            for k in 0..input.num_outputs.get() {
                let expected = CandidateKey {
                    request_id: request.request_id().to_owned(),
                    source_id: input.id,
                    candidate_index: k,
                };
                let Some(found) = actual.get(pos) else {
                    return Err(CandidateMismatch::new(pos, Some(expected), None));
                };
                let matches = found.request_id.as_str() == request.request_id()
                    && found.source_id == input.id
                    && found.candidate_index == k;
                if !matches {
                    return Err(CandidateMismatch::new(
                        pos,
                        Some(expected),
                        Some(key_of(found)),
                    ));
                }
                pos += 1;
            }
        }
        match actual.get(pos) {
            Some(extra) => Err(CandidateMismatch::new(pos, None, Some(key_of(extra)))),
            None => Ok(()),
        }
    }

    /// Reads the answer to `request`: [`AgentResponse::from_slice`], then
    /// [`validate_request`](AgentResponse::validate_request), except that
    /// a body holding more objects (or arrays) than the request asks for
    /// candidates (the sum of its `num_outputs`) is refused before anything
    /// is built, as a [`CandidateMismatch`] at the first one too many, whose
    /// `found` is `None`. What reading an answer costs is then bounded by
    /// what the request asked for: a hostile agent cannot make its caller
    /// build millions of small candidates that the answer to a request of a
    /// few could never hold. Scalars are not counted: past the first
    /// [`MAX_REPORTED_ERRORS`](crate::MAX_REPORTED_ERRORS), they cost
    /// nothing (the parser only counts them).
    ///
    /// An answer refused this way may have other problems too (any answer
    /// with too many candidates is invalid): they are not reported.
    ///
    /// ```
    /// use magma_protocol::{AgentRequest, AgentResponse, ExchangeError};
    ///
    /// let request = AgentRequest::from_slice(br#"{"request_id": "r", "inputs": [{"id": 0,
    ///     "instruction": {"type": "env", "content": "{}"}}]}"#).unwrap();
    /// let one = r#"{"request_id": "r", "source_id": 0, "candidate_index": 0,
    ///     "status": "completed", "memory": {}, "output": {"say": "hi"}}"#;
    /// assert!(AgentResponse::from_slice_for(format!("[{one}]").as_bytes(), &request).is_ok());
    /// let Err(ExchangeError::Mismatch(m)) =
    ///     AgentResponse::from_slice_for(format!("[{one}, {one}]").as_bytes(), &request)
    /// else {
    ///     panic!("two candidates for one")
    /// };
    /// assert_eq!((m.position, m.found), (1, None));
    /// ```
    pub fn from_slice_for(
        bytes: &[u8],
        request: &AgentRequest,
    ) -> Result<AgentResponse, ExchangeError> {
        AgentResponse::check_candidate_count(bytes, request).map_err(ExchangeError::Mismatch)?;
        let response = AgentResponse::from_slice(bytes).map_err(ExchangeError::Response)?;
        response
            .validate_request(request)
            .map_err(ExchangeError::Mismatch)?;
        Ok(response)
    }

    /// The first step of [`from_slice_for`](AgentResponse::from_slice_for)
    /// alone: `Err` when the body holds more objects (or arrays) than
    /// `request` asks for candidates, found by reading the body without
    /// building anything (the elements before the first one too many as the
    /// parser reads them); `Ok` otherwise, the body not validated yet.
    pub fn check_candidate_count(
        bytes: &[u8],
        request: &AgentRequest,
    ) -> Result<(), CandidateMismatch> {
        let asked = request
            .inputs()
            .iter()
            .fold(0u64, |n, input| n.saturating_add(input.num_outputs.get()));
        let asked = usize::try_from(asked).unwrap_or(usize::MAX);
        match nth_container(bytes, READ, asked) {
            Some(position) => Err(CandidateMismatch::unread_extra(position, asked)),
            None => Ok(()),
        }
    }

    /// Builds the response to `request` from each input's candidates, given in
    /// request order. The ids, indices and order are filled in here, so they
    /// cannot be wrong; a wrong count is an error instead of a bad response.
    pub fn assemble(
        request: &AgentRequest,
        per_input: Vec<Vec<Candidate>>,
    ) -> Result<AgentResponse, AssembleError> {
        AgentResponse::check_counts(request, &per_input)?;
        let inputs = request.inputs();
        let total = per_input.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(total);
        for (input, cands) in inputs.iter().zip(per_input) {
            for (k, c) in cands.into_iter().enumerate() {
                out.push(c.into_output(request, input, k as u64));
            }
        }
        Ok(AgentResponse::new(out))
    }

    /// The check [`assemble`](AgentResponse::assemble) makes before it
    /// builds anything: one candidate list per input of `request`, each as
    /// long as its input's `num_outputs`. For writing an answer straight
    /// from the lists with [`OutputWriter`].
    pub fn check_counts(
        request: &AgentRequest,
        per_input: &[Vec<Candidate>],
    ) -> Result<(), AssembleError> {
        let inputs = request.inputs();
        if per_input.len() != inputs.len() {
            return Err(AssembleError::InputCount {
                expected: inputs.len(),
                found: per_input.len(),
            });
        }
        for (i, (input, cands)) in inputs.iter().zip(per_input).enumerate() {
            if cands.len() as u64 != input.num_outputs.get() {
                return Err(AssembleError::CandidateCount {
                    input: i,
                    source_id: input.id,
                    expected: input.num_outputs.get(),
                    found: cands.len(),
                });
            }
        }
        Ok(())
    }

    /// Builds the response by asking `make` for each `(input, k)` in order.
    /// Always matches the request. `make` is called
    /// [`expected_candidates`](AgentRequest::expected_candidates) times.
    pub fn build(
        request: &AgentRequest,
        mut make: impl FnMut(&AgentInput, u64) -> Candidate,
    ) -> AgentResponse {
        let mut out = Vec::new();
        for input in request.inputs() {
            for k in 0..input.num_outputs.get() {
                out.push(make(input, k).into_output(request, input, k));
            }
        }
        AgentResponse::new(out)
    }
}

/// One candidate as an agent produces it: everything but the ids.
#[derive(Debug, Clone, PartialEq)]
pub struct Candidate {
    /// The full replacement memory.
    pub memory: Object,
    /// Free-form diagnostics.
    pub internal_steps: Vec<Object>,
    /// The decision or the error.
    pub outcome: Outcome,
}

impl Candidate {
    /// A candidate with no internal steps.
    pub fn new(memory: Object, outcome: impl Into<Outcome>) -> Self {
        Candidate {
            memory,
            internal_steps: Vec::new(),
            outcome: outcome.into(),
        }
    }

    /// Adds an internal step.
    pub fn with_step(mut self, step: Object) -> Self {
        self.internal_steps.push(step);
        self
    }

    fn into_output(self, request: &AgentRequest, input: &AgentInput, k: u64) -> AgentOutput {
        AgentOutput {
            request_id: request.request_id_typed().clone(),
            source_id: input.id,
            candidate_index: k,
            memory: self.memory,
            internal_steps: self.internal_steps,
            outcome: self.outcome,
        }
    }
}

/// Writes the candidates of the answer to one request as compact JSON,
/// one at a time, straight from an agent's candidates: the bytes
/// [`AgentResponse::to_json_string`] writes for each between its commas
/// once the lists are [assembled](AgentResponse::assemble), without
/// building the [`AgentOutput`]s (no copy of the request id per candidate,
/// which is checked for escapes once).
///
/// ```
/// use magma_protocol::{AgentDecision, AgentRequest, AgentResponse, Candidate, Object, OutputWriter};
///
/// let request = AgentRequest::from_slice(br#"{"request_id": "r-1", "inputs": [{"id": 7,
///     "instruction": {"type": "user", "content": "hi"}, "num_outputs": 2}]}"#).unwrap();
/// let per_input = vec![vec![Candidate::new(Object::new(), AgentDecision::say("a")); 2]];
/// AgentResponse::check_counts(&request, &per_input).unwrap();
/// let writer = OutputWriter::new(&request);
/// let mut text = String::from("[");
/// for (input, candidates) in request.inputs().iter().zip(&per_input) {
///     for (k, candidate) in candidates.iter().enumerate() {
///         if text.len() > 1 {
///             text.push(',');
///         }
///         writer.write(input, k as u64, candidate, &mut text);
///     }
/// }
/// text.push(']');
/// let assembled = AgentResponse::assemble(&request, per_input).unwrap();
/// assert_eq!(text, assembled.to_json_string());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct OutputWriter<'a> {
    id: OutputId<'a>,
}

impl<'a> OutputWriter<'a> {
    /// The writer of the candidates answering `request`.
    pub fn new(request: &'a AgentRequest) -> OutputWriter<'a> {
        OutputWriter {
            id: OutputId::new(request.request_id()),
        }
    }

    /// Appends `candidate` as candidate `k` of `input` (its `source_id` is
    /// the input's id).
    pub fn write(&self, input: &AgentInput, k: u64, candidate: &Candidate, out: &mut String) {
        write_output(out, self.id, input.id, k, candidate.parts());
    }

    /// About how many bytes [`write`](OutputWriter::write) appends for
    /// `candidate`: the estimate of [`AgentOutput::json_len_hint`] for the
    /// output it stands for.
    pub fn len_hint(&self, candidate: &Candidate) -> usize {
        output_size_hint(self.id.len(), candidate.parts())
    }
}

impl Candidate {
    fn parts(&self) -> OutputParts<'_> {
        OutputParts {
            memory: &self.memory,
            internal_steps: &self.internal_steps,
            outcome: &self.outcome,
        }
    }
}

/// Why [`AgentResponse::assemble`] refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AssembleError {
    /// Not one candidate list per input.
    #[error("expected candidates for {expected} inputs, got {found}")]
    InputCount {
        /// Inputs in the request.
        expected: usize,
        /// Candidate lists given.
        found: usize,
    },
    /// An input got the wrong number of candidates.
    #[error("input {input} (id {source_id}) asked for {expected} candidates, got {found}")]
    CandidateCount {
        /// Position of the input in the request.
        input: usize,
        /// Its id.
        source_id: i64,
        /// Its `num_outputs`.
        expected: u64,
        /// Candidates given.
        found: usize,
    },
}

/// Validates a request and a response together, as the consumers do: both
/// documents valid, then the candidate sequence
/// ([`AgentResponse::validate_request`]). The error says which part failed.
///
/// (`magma_validator::check_exchange` is a different thing: a report of
/// findings and lints for people.)
pub fn validate_exchange(request: &[u8], response: &[u8]) -> Result<(), ExchangeError> {
    let request = AgentRequest::from_slice(request).map_err(ExchangeError::Request)?;
    let response = AgentResponse::from_slice(response).map_err(ExchangeError::Response)?;
    response
        .validate_request(&request)
        .map_err(ExchangeError::Mismatch)
}

/// The former name of [`validate_exchange`].
#[doc(hidden)]
#[deprecated(note = "renamed to `validate_exchange`")]
pub fn check_exchange(request: &[u8], response: &[u8]) -> Result<(), ExchangeError> {
    validate_exchange(request, response)
}

/// Why an exchange is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ExchangeError {
    /// The request is not valid: not an `AgentRequest` (or, in a coaching
    /// exchange, not a `SpecializedCoachingRequest`).
    #[error("request: {0}")]
    Request(crate::Error),
    /// The response is not valid: not an `AgentResponse` (or not a
    /// `SpecializedCoachingResponse`).
    #[error("response: {0}")]
    Response(crate::Error),
    /// Both are valid but the candidates do not match.
    #[error("{0}")]
    Mismatch(CandidateMismatch),
    /// Both are valid coaching documents but the reply does not answer the
    /// request (`coaching_mismatch`, from
    /// [`SpecializedCoachingResponse::validate_request`](crate::SpecializedCoachingResponse::validate_request);
    /// only the coaching exchange gives it).
    #[error("{0}")]
    CoachingMismatch(crate::Error),
}

impl ExchangeError {
    /// The issues, as a FastAPI-style list (`candidates_mismatch` for a
    /// mismatch).
    pub fn issues(&self) -> Vec<Issue> {
        match self {
            ExchangeError::Request(e)
            | ExchangeError::Response(e)
            | ExchangeError::CoachingMismatch(e) => e.issues().to_vec(),
            ExchangeError::Mismatch(m) => vec![m.to_issue()],
        }
    }
}
