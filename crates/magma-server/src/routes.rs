//! The routing table: every route the server answers (an endpoint of the
//! contract, or one of the server's own paths) and, for each method, the
//! handler that answers it.
//!
//! The dispatcher looks every request up here; the `Allow` value of a
//! `405` and the metrics' `route` labels come from here as well, so a new
//! route is a [`Route`] (for an endpoint of the contract,
//! `magma_protocol::routes::Endpoint` already names it) and one row per
//! method in [`TABLE`]. No other file of the crate writes a route's path.

use http::{HeaderValue, Method};
use magma_protocol::routes::Endpoint;

/// What answered a request: a route of the table, or none (a `404`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Route {
    /// An endpoint of the contract (its paths are `magma_protocol`'s).
    Contract(Endpoint),
    /// `/openapi.json`: the contract's OpenAPI document.
    OpenApi,
    /// `/metrics`: the Prometheus text (feature `metrics`, and only with a
    /// registry configured).
    Metrics,
    /// No route: a `404`.
    Unmatched,
}

/// Which handler answers a request: what the dispatcher `match`es on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Handler {
    Health,
    Info,
    Responses,
    Coaching,
    OpenSession,
    CloseSession,
    OpenApi,
    #[cfg(feature = "metrics")]
    Metrics,
}

/// One row of [`TABLE`]: a method of a route and its handler.
pub(crate) struct Row {
    pub(crate) route: Route,
    pub(crate) method: Method,
    pub(crate) handler: Handler,
}

const fn row(route: Route, method: Method, handler: Handler) -> Row {
    Row {
        route,
        method,
        handler,
    }
}

/// Every route and method the server answers. A route's rows are listed
/// together, in the order of its `Allow` value; a `GET` row also answers
/// `HEAD` (hyper sends the head and drops the body).
pub(crate) const TABLE: &[Row] = &[
    row(
        Route::Contract(Endpoint::Health),
        Method::GET,
        Handler::Health,
    ),
    row(Route::Contract(Endpoint::Info), Method::GET, Handler::Info),
    row(
        Route::Contract(Endpoint::Responses),
        Method::POST,
        Handler::Responses,
    ),
    row(
        Route::Contract(Endpoint::Coaching),
        Method::POST,
        Handler::Coaching,
    ),
    row(
        Route::Contract(Endpoint::CoachingSession),
        Method::PUT,
        Handler::OpenSession,
    ),
    row(
        Route::Contract(Endpoint::CoachingSession),
        Method::DELETE,
        Handler::CloseSession,
    ),
    row(Route::OpenApi, Method::GET, Handler::OpenApi),
    #[cfg(feature = "metrics")]
    row(Route::Metrics, Method::GET, Handler::Metrics),
];

/// The routes that are not the contract's.
const OWN: [Route; 3] = [Route::OpenApi, Route::Metrics, Route::Unmatched];

#[cfg_attr(
    not(feature = "metrics"),
    allow(dead_code, reason = "the metrics' labels")
)]
impl Route {
    /// How many routes there are (the metrics keep one counter set each).
    pub(crate) const COUNT: usize = Endpoint::ALL.len() + OWN.len();

    /// Every route: the contract's endpoints in their order, then the
    /// server's own; [`Route::index`] is the position here.
    pub(crate) const ALL: [Route; Route::COUNT] = {
        let mut all = [Route::Unmatched; Route::COUNT];
        let mut i = 0;
        while i < Endpoint::ALL.len() {
            all[i] = Route::Contract(Endpoint::ALL[i]);
            i += 1;
        }
        let mut j = 0;
        while j < OWN.len() {
            all[i + j] = OWN[j];
            j += 1;
        }
        all
    };

    /// The path, below the server's prefix (a coaching session's with
    /// `{run_id}`); `None` for [`Route::Unmatched`].
    pub(crate) const fn path(self) -> Option<&'static str> {
        match self {
            Route::Contract(endpoint) => Some(endpoint.path()),
            Route::OpenApi => Some("/openapi.json"),
            Route::Metrics => Some("/metrics"),
            Route::Unmatched => None,
        }
    }

    /// The metrics' `route` label: the path, or `unmatched`.
    pub(crate) fn label(self) -> &'static str {
        self.path().unwrap_or("unmatched")
    }

    /// The position in [`Route::ALL`].
    pub(crate) fn index(self) -> usize {
        let own = |r: Route| OWN.iter().position(|o| *o == r);
        let at = match self {
            Route::Contract(e) => Endpoint::ALL.iter().position(|a| *a == e),
            other => own(other).map(|i| Endpoint::ALL.len() + i),
        };
        // Every endpoint is in `Endpoint::ALL`: the fallback is not taken.
        at.unwrap_or(Route::COUNT - 1)
    }

    /// The route of a request path (below the prefix) in the table, and a
    /// coaching session's run id segment (still percent-encoded).
    pub(crate) fn recognize(path: &str) -> Option<(Route, Option<&str>)> {
        if let Some((endpoint, segment)) = Endpoint::recognize(path) {
            return Some((Route::Contract(endpoint), segment));
        }
        TABLE
            .iter()
            .map(|row| row.route)
            .find(|route| !matches!(route, Route::Contract(_)) && route.path() == Some(path))
            .map(|route| (route, None))
    }

    /// The handler of `method` on this route; `HEAD` is answered as `GET`.
    pub(crate) fn handler(self, method: &Method) -> Option<Handler> {
        let method = match *method {
            Method::HEAD => &Method::GET,
            _ => method,
        };
        TABLE
            .iter()
            .find(|row| row.route == self && row.method == *method)
            .map(|row| row.handler)
    }

    /// The `Allow` value of a `405` on this route: its methods in the
    /// table's order, `HEAD` after `GET`.
    pub(crate) fn allow(self) -> HeaderValue {
        let mut allow = String::new();
        for row in TABLE.iter().filter(|row| row.route == self) {
            if !allow.is_empty() {
                allow.push_str(", ");
            }
            allow.push_str(row.method.as_str());
            if row.method == Method::GET {
                allow.push_str(", HEAD");
            }
        }
        // Method names are tokens, always a valid header value.
        HeaderValue::try_from(allow).unwrap_or(HeaderValue::from_static(""))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table serves each endpoint of the contract with the methods the
    /// contract defines on it, no more and no fewer.
    #[test]
    fn every_endpoint_has_a_row_per_method() {
        for endpoint in Endpoint::ALL {
            let route = Route::Contract(endpoint);
            let rows: Vec<&str> = TABLE
                .iter()
                .filter(|row| row.route == route)
                .map(|row| row.method.as_str())
                .collect();
            assert_eq!(rows, endpoint.methods(), "{endpoint}");
        }
    }

    #[test]
    fn a_routes_rows_are_listed_together() {
        for (i, row) in TABLE.iter().enumerate() {
            let last = TABLE.iter().rposition(|r| r.route == row.route).unwrap();
            assert!(
                TABLE[i..=last].iter().all(|r| r.route == row.route),
                "{:?}",
                row.route
            );
            let same = TABLE.iter().filter(|r| r.route == row.route);
            assert_eq!(same.filter(|r| r.method == row.method).count(), 1);
        }
    }

    #[test]
    fn every_route_of_the_table_is_recognized_by_its_path() {
        for row in TABLE {
            let path = match row.route {
                Route::Contract(Endpoint::CoachingSession) => {
                    magma_protocol::routes::coaching_session_path("r")
                }
                route => route.path().unwrap().to_owned(),
            };
            let (route, _) = Route::recognize(&path).unwrap();
            assert_eq!(route, row.route, "{path}");
            assert_eq!(route.handler(&row.method), Some(row.handler), "{path}");
        }
        for path in ["/", "/healthz", "/openapi.json/", "/v1/coaching/sessions/"] {
            assert_eq!(Route::recognize(path), None, "{path}");
        }
    }

    #[test]
    fn head_is_answered_where_get_is() {
        let health = Route::Contract(Endpoint::Health);
        assert_eq!(health.handler(&Method::HEAD), Some(Handler::Health));
        assert_eq!(health.handler(&Method::POST), None);
        let responses = Route::Contract(Endpoint::Responses);
        assert_eq!(responses.handler(&Method::HEAD), None);
    }

    #[test]
    fn allow_values_come_from_the_rows() {
        let allow = |r: Route| r.allow().to_str().unwrap().to_owned();
        assert_eq!(allow(Route::Contract(Endpoint::Health)), "GET, HEAD");
        assert_eq!(allow(Route::Contract(Endpoint::Responses)), "POST");
        assert_eq!(
            allow(Route::Contract(Endpoint::CoachingSession)),
            "PUT, DELETE"
        );
        assert_eq!(allow(Route::OpenApi), "GET, HEAD");
    }

    #[test]
    fn indices_and_labels_are_one_per_route() {
        for (i, route) in Route::ALL.into_iter().enumerate() {
            assert_eq!(route.index(), i, "{route:?}");
        }
        let mut labels: Vec<&str> = Route::ALL.iter().map(|r| r.label()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), Route::COUNT);
        assert_eq!(Route::Unmatched.label(), "unmatched");
    }
}
