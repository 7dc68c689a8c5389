//! Catching panics in agent code, for futures.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs a future; a panic while polling it becomes `Err(payload)` and the
/// future is never polled again.
///
/// Unwind safety: after a panic the future is dropped without being polled
/// again, and the server only reports the panic; state the agent shares
/// across requests (its own mutexes and so on) is the agent's concern, as it
/// would be for a thread.
pub(crate) struct CatchUnwind<F>(Pin<Box<F>>);

impl<F: Future> CatchUnwind<F> {
    pub(crate) fn new(future: F) -> Self {
        CatchUnwind(Box::pin(future))
    }
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.get_mut().0.as_mut();
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(payload)),
        }
    }
}

/// The panic message, if the payload is a string (as `panic!` makes it).
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> &str {
    if let Some(s) = payload.downcast_ref::<&'static str>() {
        s
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s
    } else {
        "(a panic payload that is not a string)"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_becomes_an_error_with_its_message() {
        let r = CatchUnwind::new(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("boom {}", 7);
            }
            1
        })
        .await;
        let payload = r.unwrap_err();
        assert_eq!(panic_message(&*payload), "boom 7");
    }

    #[tokio::test]
    async fn a_normal_future_passes_through() {
        assert_eq!(CatchUnwind::new(async { 5 }).await.unwrap(), 5);
    }
}
