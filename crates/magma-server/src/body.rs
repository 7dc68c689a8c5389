//! Reading a request's body: its content type, and the size, time and
//! memory limits it is read within, with the answer when one is not met.

use std::error::Error as StdError;
use std::time::Duration;

use bytes::Bytes;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Body;

use crate::limits::{self, within};
use crate::reply::{Reply, detail, missing_body, over_budget, too_large};
use crate::state::Shared;

/// The error type of request bodies the handler accepts.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;

/// `application/json` or `application/<anything>+json`, parameters allowed,
/// as FastAPI decides; a missing or empty header counts as JSON.
pub(crate) fn content_type_is_json(headers: &HeaderMap) -> bool {
    is_json(headers.get(CONTENT_TYPE))
}

/// [`content_type_is_json`] of the first `Content-Type` value, if any.
pub(crate) fn is_json(content_type: Option<&HeaderValue>) -> bool {
    let Some(value) = content_type else {
        return true;
    };
    // The usual value, compared before any parsing.
    if value.as_bytes() == b"application/json" {
        return true;
    }
    let Ok(value) = value.to_str() else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or("").trim();
    if essence.is_empty() {
        return true;
    }
    // Compared without case and without allocating: this runs per request.
    match essence.split_once('/') {
        Some((kind, sub)) if kind.eq_ignore_ascii_case("application") => {
            let suffix = sub.len().checked_sub(5).and_then(|at| sub.get(at..));
            sub.eq_ignore_ascii_case("json")
                || suffix.is_some_and(|s| s.eq_ignore_ascii_case("+json"))
        }
        _ => false,
    }
}

/// Why a body was not read.
enum BodyError {
    TooLarge,
    TimedOut,
    Read,
    /// The process-wide body budget stayed full.
    OverBudget,
}

/// The body, at most `limit` bytes, within `timeout`; every byte is taken
/// from the process-wide budget as it arrives and held by the returned
/// share.
async fn read_body<B>(
    body: B,
    limit: u64,
    timeout: Duration,
    budget: &limits::BodyBudget,
) -> Result<(Bytes, limits::BudgetShare), BodyError>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut share = budget.share();
    // Pinned in this future, and given back (with its borrow of `share`)
    // once read.
    let read = async {
        let mut body = std::pin::pin!(body);
        let hint = usize::try_from(body.size_hint().lower()).unwrap_or(usize::MAX);
        let mut out: Vec<u8> = Vec::new();
        let mut first: Option<Bytes> = None;
        loop {
            // The frame's error type need not be `Send`: not kept across
            // the budget's wait.
            let data = match body.frame().await {
                None => break,
                Some(Err(_)) => return Err(BodyError::Read),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => data,
                    Err(_) => continue,
                },
            };
            let held = out.len() + first.as_ref().map_or(0, Bytes::len);
            if held.saturating_add(data.len()) > limit {
                return Err(BodyError::TooLarge);
            }
            if !share.take(data.len()).await {
                return Err(BodyError::OverBudget);
            }
            // The usual body comes in one frame: kept as it is, not copied.
            match first.take() {
                None if out.is_empty() => first = Some(data),
                None => out.extend_from_slice(&data),
                Some(f) => {
                    out.reserve_exact(hint.min(limit).max(f.len() + data.len()) - out.len());
                    out.extend_from_slice(&f);
                    out.extend_from_slice(&data);
                }
            }
        }
        Ok(match first {
            Some(f) => f,
            None => Bytes::from(out),
        })
    };
    let read = {
        let read = std::pin::pin!(read);
        within(timeout, read).await
    };
    match read {
        Err(()) => Err(BodyError::TimedOut),
        Ok(Err(e)) => Err(e),
        Ok(Ok(bytes)) => Ok((bytes, share)),
    }
}

/// The body of a request that must carry JSON: checked for its content
/// type, read within the size and time limits, not empty; or the answer.
pub(crate) async fn json_body<A, B>(
    shared: &Shared<A>,
    req: Request<B>,
) -> Result<(Bytes, limits::BudgetShare), Reply>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let json = content_type_is_json(req.headers());
    let body = json_head(shared, req, json).map_err(|reply| *reply)?;
    read_json(shared, body).await
}

/// The part of [`json_body`] that needs only the request's head, done at
/// once: the content type, and a declared length over the limit. The body
/// to read, or the answer (boxed: the usual request has none, and the
/// futures that hold this result stay small).
///
/// `json`: the request's content type is JSON ([`content_type_is_json`],
/// which the dispatcher found reading the head's headers once).
pub(crate) fn json_head<A, B>(
    shared: &Shared<A>,
    req: Request<B>,
    json: bool,
) -> Result<B, Box<Reply>>
where
    B: Body<Data = Bytes>,
{
    if !json {
        return Err(Box::new(
            Reply::new(detail(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "Unsupported Media Type: the body must be application/json",
            ))
            .closing(),
        ));
    }
    let limit = shared.max_body_bytes;
    if req.body().size_hint().lower() > limit {
        return Err(Box::new(too_large(limit)));
    }
    Ok(req.into_body())
}

/// The rest of [`json_body`]: the body, read within the size and time
/// limits, not empty; or the answer.
pub(crate) async fn read_json<A, B>(
    shared: &Shared<A>,
    body: B,
) -> Result<(Bytes, limits::BudgetShare), Reply>
where
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let limit = shared.max_body_bytes;
    let budget = &shared.body_budget;
    let (bytes, share) = match read_body(body, limit, shared.body_timeout, budget).await {
        Ok(read) => read,
        Err(BodyError::TooLarge) => return Err(too_large(limit)),
        Err(BodyError::OverBudget) => return Err(over_budget(budget).closing()),
        Err(BodyError::TimedOut) => {
            return Err(Reply::new(detail(
                StatusCode::REQUEST_TIMEOUT,
                "Request Timeout: the request body did not arrive in time",
            ))
            .closing());
        }
        Err(BodyError::Read) => {
            return Err(Reply::new(detail(
                StatusCode::BAD_REQUEST,
                "Bad Request: the request body could not be read",
            ))
            .closing());
        }
    };
    if bytes.is_empty() {
        return Err(Reply::new(missing_body()));
    }
    // The parsed request is about as large as its body again (the body is
    // dropped once parsed): its bytes are counted before the parse.
    let mut share = share;
    if !share.take(bytes.len()).await {
        return Err(over_budget(budget));
    }
    Ok((bytes, share))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(ct: Option<&str>) -> HeaderMap {
        let mut h = HeaderMap::new();
        if let Some(ct) = ct {
            h.insert(CONTENT_TYPE, HeaderValue::from_str(ct).unwrap());
        }
        h
    }

    #[test]
    fn json_content_types_are_recognized_as_fastapi_does() {
        for ok in [
            None,
            Some(""),
            Some("application/json"),
            Some("Application/JSON"),
            Some("application/json; charset=utf-8"),
            Some("application/vnd.magma+json"),
            Some("application/problem+json;charset=UTF-8"),
        ] {
            assert!(content_type_is_json(&headers(ok)), "{ok:?}");
        }
        for bad in [
            "text/plain",
            "text/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/jsonx",
            "json",
        ] {
            assert!(!content_type_is_json(&headers(Some(bad))), "{bad}");
        }
    }
}
