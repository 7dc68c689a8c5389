//! The coaching extension, from GEN's side: open a session, send coaching
//! requests, close it.

use bytes::Bytes;
use http::header::{ACCEPT, HeaderValue};
use http::{Method, StatusCode};
use magma_protocol::coaching::{
    CoachingSessionConfig, SpecializedCoachingRequest, SpecializedCoachingResponse,
};
use magma_protocol::routes::{Endpoint, coaching_session_path as session_path};

use crate::client::Client;
use crate::error::{Error, ErrorKind, HttpStatus};
use crate::raw::RawRequest;

const JSON: HeaderValue = HeaderValue::from_static("application/json");

/// A coaching route's non-2xx statuses.
fn coaching_status(s: HttpStatus) -> ErrorKind {
    match s.status() {
        StatusCode::NOT_FOUND => ErrorKind::UnknownSession(s),
        StatusCode::CONFLICT => ErrorKind::SessionConflict(s),
        StatusCode::SERVICE_UNAVAILABLE => ErrorKind::CoachingUnavailable(s),
        StatusCode::GATEWAY_TIMEOUT => ErrorKind::InferenceTimeout(s),
        _ => ErrorKind::Status(s),
    }
}

/// The session routes answer `204` with no body.
fn no_body(_: &[u8]) -> Result<(), magma_protocol::Error> {
    Ok(())
}

impl Client {
    /// Opens a coaching session on the agent, as GEN does before a
    /// generation run: `PUT /v1/coaching/sessions/{run_id}` with `config`
    /// (the run id percent-encoded).
    ///
    /// A `409` is [`ErrorKind::SessionConflict`] (the session is open with
    /// another configuration, or closing), a `503`
    /// [`ErrorKind::CoachingUnavailable`]. When opening fails in any way,
    /// the client tries a `DELETE` of the session before returning the
    /// error, as GEN does: the `PUT` may have created it although its
    /// answer was lost. Opening the same configuration again succeeds.
    pub fn open_coaching_session(
        &self,
        run_id: &str,
        config: &CoachingSessionConfig,
    ) -> Result<CoachingSession, Error> {
        let path = session_path(run_id);
        let req = RawRequest::new(Method::PUT, path.clone())
            .header(ACCEPT, JSON)
            .json(Bytes::from(config.to_json_string()));
        match self.typed_with(req, no_body, coaching_status) {
            Ok(()) => Ok(CoachingSession {
                client: self.clone(),
                run_id: run_id.to_owned(),
                path,
                closed: false,
            }),
            Err(e) => {
                if let Err(cleanup) = self.delete_session(&path) {
                    tracing::debug!(error = %cleanup, "DELETE after a failed session open failed");
                }
                Err(e)
            }
        }
    }

    /// `POST /v1/coaching`: one coaching request, for the session its
    /// `run_id` names (opened by this client or another one).
    ///
    /// The body is parsed strictly ([`ErrorKind::InvalidBody`]) and checked
    /// with `validate_request` ([`ErrorKind::CoachingMismatch`]), as GEN
    /// does. A `404` is [`ErrorKind::UnknownSession`], a `503`
    /// [`ErrorKind::CoachingUnavailable`]. A response with status
    /// `abandoned` or `error` is an `Ok`: read its `reason`. Never retried.
    pub fn coach(
        &self,
        request: &SpecializedCoachingRequest,
    ) -> Result<SpecializedCoachingResponse, Error> {
        let req = RawRequest::post(Endpoint::Coaching.path())
            .header(ACCEPT, JSON)
            .json(Bytes::from(request.to_json_string()));
        let url = self.url(Endpoint::Coaching.path());
        let response = self.typed_with(
            req,
            SpecializedCoachingResponse::from_slice,
            coaching_status,
        )?;
        response
            .validate_request(request)
            .map_err(|e| Error::new(ErrorKind::CoachingMismatch(e)).at(&Method::POST, &url))?;
        Ok(response)
    }

    /// `DELETE /v1/coaching/sessions/{run_id}`: closes a session, once its
    /// requests in flight have finished. Agents answer `204` also for an
    /// unknown run id.
    pub fn close_coaching_session(&self, run_id: &str) -> Result<(), Error> {
        self.delete_session(&session_path(run_id))
    }

    fn delete_session(&self, path: &str) -> Result<(), Error> {
        let req = RawRequest::new(Method::DELETE, path).header(ACCEPT, JSON);
        self.typed_with(req, no_body, coaching_status)
    }
}

/// An open coaching session on an agent, from
/// [`Client::open_coaching_session`].
///
/// Send requests with [`coach`](CoachingSession::coach) (from several
/// threads at once if you like: GEN runs one request per backend
/// concurrently) and end it with [`close`](CoachingSession::close). A
/// session dropped without `close` is closed then, ignoring errors; call
/// `close` to know whether the agent released it.
#[derive(Debug)]
pub struct CoachingSession {
    client: Client,
    run_id: String,
    path: String,
    closed: bool,
}

impl CoachingSession {
    /// The run id the session was opened with.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Sends a coaching request of this session; see [`Client::coach`].
    /// A request with another `run_id` is refused with
    /// [`ErrorKind::Config`] without being sent.
    pub fn coach(
        &self,
        request: &SpecializedCoachingRequest,
    ) -> Result<SpecializedCoachingResponse, Error> {
        if request.run_id() != self.run_id {
            return Err(Error::config(format!(
                "the coaching request is for run {:?}, this session is run {:?}",
                request.run_id(),
                self.run_id
            )));
        }
        self.client.coach(request)
    }

    /// Closes the session (`DELETE`), after the agent has finished its
    /// requests in flight. On an error the session counts as closed all the
    /// same; [`Client::close_coaching_session`] may be retried.
    pub fn close(mut self) -> Result<(), Error> {
        self.closed = true;
        self.client.delete_session(&self.path)
    }
}

impl Drop for CoachingSession {
    fn drop(&mut self) {
        if !self.closed {
            // Best effort; inside an async runtime the call refuses at once.
            if let Err(e) = self.client.delete_session(&self.path) {
                tracing::debug!(error = %e, run_id = %self.run_id, "closing a dropped coaching session failed");
            }
        }
    }
}
