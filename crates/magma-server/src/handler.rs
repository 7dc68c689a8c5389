//! The entry of every request: its ids and span, the route looked up in the
//! table (`routes.rs`) and its handler called, panics of agent code turned
//! into `500`, the access log line and the metrics. Every answer is JSON,
//! every failure has its status, and nothing the agent does can produce a
//! malformed `200`.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::header::{ALLOW, HOST};
use http::{HeaderMap, Request, Response, StatusCode, Version};
use http_body_util::Full;
use hyper::body::Body;
use tracing::Instrument;

use crate::access::{Access, Ids};
use crate::agent::Agent;
use crate::body::BoxError;
use crate::reply::{Reply, detail, internal_error};
use crate::routes::{Handler, Route};
use crate::state::Shared;
use crate::unwind::{catch_unwind, panic_message};
use crate::{coaching_routes, get_routes, inference};

/// Handles one request; never fails and never panics (agent panics become
/// `500`). Runs in the request's span and writes the access log line.
/// `peer` is the connection's remote address, when known.
pub(crate) async fn handle<A, B>(
    shared: &Shared<A>,
    req: Request<B>,
    peer: Option<SocketAddr>,
) -> Result<Response<Full<Bytes>>, Infallible>
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut access = Access::new(
        req.method(),
        req.uri(),
        req.version(),
        req.headers(),
        peer,
        &shared.trusted_proxies,
        shared.times_requests(),
    );
    let routed = route(shared, req, access.ids()).instrument(access.ids().span.clone());
    // Boxed: the route's future is the request's largest state; in a box of
    // its own it is never moved again, while the future hyper holds (and
    // moves into place per request) stays small.
    let reply = match catch_unwind(Box::pin(routed)).await {
        Ok(reply) => reply,
        Err(payload) => {
            access.panicked(panic_message(&*payload));
            Reply::new(internal_error())
        }
    };
    #[cfg(feature = "metrics")]
    let route = reply.route();
    let response = access.finish(reply);
    #[cfg(feature = "metrics")]
    if let Some(m) = &shared.metrics {
        m.request(route, response.status().as_u16(), access.elapsed());
    }
    Ok(response)
}

/// The request's route (below the path prefix) and method looked up in the
/// table, and its handler called; `404` and `405` (with the route's
/// `Allow`) when there is none.
async fn route<A, B>(shared: &Shared<A>, req: Request<B>, ids: &Ids) -> Reply
where
    A: Agent,
    B: Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    if req.version() == Version::HTTP_11 && !one_host(req.headers()) {
        return Reply::new(detail(
            StatusCode::BAD_REQUEST,
            "Bad Request: an HTTP/1.1 request must carry exactly one Host header",
        ))
        .closing();
    }
    let full = req.uri().path();
    let path = match &shared.prefix {
        None => Some(full),
        Some(prefix) => full
            .strip_prefix(prefix.as_str())
            .filter(|rest| rest.starts_with('/')),
    };
    let found = path
        .and_then(Route::recognize)
        .filter(|(route, _)| shared.serves(*route));
    let Some((route, segment)) = found else {
        return Reply::new(detail(StatusCode::NOT_FOUND, "Not Found"));
    };
    let Some(handler) = route.handler(req.method()) else {
        let mut r = detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
        r.headers_mut().insert(ALLOW, route.allow());
        return Reply::new(r).at(route);
    };
    // The coaching routes and the `422` path are boxed: their futures are
    // larger than the common path's, and every request's future (boxed by
    // the connection, moved on each await) would otherwise be as large as
    // the largest branch.
    let reply = match handler {
        Handler::Health => get_routes::health(shared),
        Handler::Info => get_routes::info(shared),
        Handler::Responses => inference::responses(shared, req, ids).await,
        Handler::OpenApi => get_routes::openapi(shared),
        #[cfg(feature = "metrics")]
        Handler::Metrics => get_routes::metrics(shared),
        Handler::Coaching => Box::pin(coaching_routes::coaching(shared, req, ids)).await,
        Handler::OpenSession => {
            // The segment borrows the request, which the route consumes.
            let segment = segment.unwrap_or_default().to_owned();
            Box::pin(coaching_routes::open_session(shared, req, &segment)).await
        }
        Handler::CloseSession => {
            let segment = segment.unwrap_or_default().to_owned();
            Box::pin(coaching_routes::close_session(shared, &segment)).await
        }
    };
    reply.at(route)
}

/// RFC 9112, section 3.2: an HTTP/1.1 request has exactly one `Host`.
fn one_host(headers: &HeaderMap) -> bool {
    let mut hosts = headers.get_all(HOST).iter();
    hosts.next().is_some() && hosts.next().is_none()
}
