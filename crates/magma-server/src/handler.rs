//! The entry of every request: its ids and span, the route looked up in the
//! table (`routes.rs`) and its handler called, panics of agent code turned
//! into `500`, the access log line and the metrics. Every answer is JSON,
//! every failure has its status, and nothing the agent does can produce a
//! malformed `200`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind as catch};
use std::pin::Pin;

use bytes::Bytes;
use http::header::{ALLOW, CONTENT_TYPE, HOST};
use http::{HeaderMap, HeaderValue, Request, Response, StatusCode, Version};
use http_body_util::Full;
use hyper::body::Body;
use tracing::Instrument;

use crate::access::{Access, Ids, REQUEST_ID};
use crate::agent::Agent;
use crate::body::{BoxError, is_json};
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
    B: Body<Data = Bytes> + Send,
    B::Error: Into<BoxError>,
{
    let head = Head::of(req.headers());
    let mut access = Access::new(
        req.method(),
        req.uri(),
        req.version(),
        req.headers(),
        head.x_request_id,
        peer,
        &shared.trusted_proxies,
        shared.times_requests(),
    );
    let facts = head.facts();
    // What the request's head decides is decided at once, in the span;
    // a route that reads a body or waits continues in a boxed future.
    let routed = {
        let _in_span = access.ids().span.enter();
        catch(AssertUnwindSafe(|| route(shared, req, facts, access.ids())))
    };
    // Moved into the `match` (the block): what it borrows of the access
    // record is given back before the record is finished.
    #[allow(clippy::blocks_in_conditions, reason = "the block moves `routed`")]
    let reply = match { routed } {
        Ok(Routed::Done(reply)) => reply,
        Ok(Routed::Pending(route, future)) => {
            let future = future.instrument(access.ids().span.clone());
            match catch_unwind(future).await {
                Ok(reply) => reply.at(route),
                Err(payload) => {
                    access.panicked(panic_message(&*payload));
                    Reply::new(internal_error())
                }
            }
        }
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

/// A route's answer, or the future that makes it (boxed: its state is the
/// request's largest, and in a box of its own it is never moved again,
/// while the future hyper holds, and moves into place per request, stays
/// small). The coaching routes and the `422` path are boxed (again) inside
/// it: their futures are larger than the common path's.
enum Routed<'a> {
    Done(Reply),
    Pending(Route, Pin<Box<dyn Future<Output = Reply> + Send + 'a>>),
}

/// The request's route (below the path prefix) and method looked up in the
/// table, and its handler called; `404` and `405` (with the route's
/// `Allow`) when there is none.
fn route<'a, A, B>(shared: &'a Shared<A>, req: Request<B>, facts: Facts, ids: &'a Ids) -> Routed<'a>
where
    A: Agent,
    B: Body<Data = Bytes> + Send + 'a,
    B::Error: Into<BoxError>,
{
    if req.version() == Version::HTTP_11 && !facts.one_host {
        return Routed::Done(
            Reply::new(detail(
                StatusCode::BAD_REQUEST,
                "Bad Request: an HTTP/1.1 request must carry exactly one Host header",
            ))
            .closing(),
        );
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
        return Routed::Done(Reply::new(detail(StatusCode::NOT_FOUND, "Not Found")));
    };
    let Some(handler) = route.handler(req.method()) else {
        let mut r = detail(StatusCode::METHOD_NOT_ALLOWED, "Method Not Allowed");
        r.headers_mut().insert(ALLOW, route.allow());
        return Routed::Done(Reply::new(r).at(route));
    };
    // The segment borrows the request, which the route consumes.
    let segment = || segment.unwrap_or_default().to_owned();
    let future: Pin<Box<dyn Future<Output = Reply> + Send + 'a>> = match handler {
        Handler::Health => return Routed::Done(get_routes::health(shared).at(route)),
        Handler::Info => return Routed::Done(get_routes::info(shared).at(route)),
        Handler::OpenApi => return Routed::Done(get_routes::openapi(shared).at(route)),
        #[cfg(feature = "metrics")]
        Handler::Metrics => return Routed::Done(get_routes::metrics(shared).at(route)),
        Handler::Responses => Box::pin(inference::responses(shared, req, facts.json, ids)),
        Handler::Coaching => Box::pin(coaching_routes::coaching(shared, req, ids)),
        Handler::OpenSession => {
            let segment = segment();
            Box::pin(async move { coaching_routes::open_session(shared, req, &segment).await })
        }
        Handler::CloseSession => {
            let segment = segment();
            Box::pin(async move { coaching_routes::close_session(shared, &segment).await })
        }
    };
    Routed::Pending(route, future)
}

/// What the dispatcher and the access record read of a request's headers,
/// found in one pass over them rather than one lookup (a hash of the name)
/// each.
struct Head<'h> {
    hosts: usize,
    content_type: Option<&'h HeaderValue>,
    x_request_id: Option<&'h HeaderValue>,
}

/// What the routes need of [`Head`], without its borrow of the request.
#[derive(Clone, Copy)]
struct Facts {
    /// RFC 9112, section 3.2: an HTTP/1.1 request has exactly one `Host`.
    one_host: bool,
    /// The content type is JSON, or missing ([`crate::body::content_type_is_json`]).
    json: bool,
}

impl<'h> Head<'h> {
    fn of(headers: &'h HeaderMap) -> Head<'h> {
        let mut head = Head {
            hosts: 0,
            content_type: None,
            x_request_id: None,
        };
        // Each value in order (a repeated header's too): the first value
        // of a name is the one `HeaderMap::get` gives.
        for (name, value) in headers {
            if *name == HOST {
                head.hosts += 1;
            } else if *name == CONTENT_TYPE {
                head.content_type.get_or_insert(value);
            } else if *name == REQUEST_ID {
                head.x_request_id.get_or_insert(value);
            }
        }
        head
    }

    fn facts(&self) -> Facts {
        Facts {
            one_host: self.hosts == 1,
            json: is_json(self.content_type),
        }
    }
}
