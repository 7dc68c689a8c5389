//! Catching panics in agent code, for futures.

use std::any::Any;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind as catch};
use std::pin::Pin;
use std::task::{Context, Poll};

/// Runs a future; a panic while polling it becomes `Err(payload)` and the
/// future is never polled again.
///
/// The future is `Unpin`: the caller decides where it is pinned, a box
/// (`Box::pin`) for one that should not make its caller's future larger, or
/// its own stack frame (`std::pin::pin!`) for a small one, which then costs
/// no allocation.
///
/// Unwind safety: after a panic the future is dropped without being polled
/// again, and the server only reports the panic; state the agent shares
/// across requests (its own mutexes and so on) is the agent's concern, as it
/// would be for a thread.
pub(crate) fn catch_unwind<F: Future + Unpin>(future: F) -> CatchUnwind<F> {
    CatchUnwind(Some(future))
}

/// The future of [`catch_unwind`].
pub(crate) struct CatchUnwind<F>(Option<F>);

impl<F: Future + Unpin> Future for CatchUnwind<F> {
    type Output = Result<F::Output, Box<dyn Any + Send>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let Some(inner) = self.0.as_mut() else {
            // Polled again after it finished: as after a panic, never again.
            return Poll::Pending;
        };
        match catch(AssertUnwindSafe(|| Pin::new(inner).poll(cx))) {
            Ok(Poll::Ready(out)) => Poll::Ready(Ok(out)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => {
                self.0 = None;
                Poll::Ready(Err(payload))
            }
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
        let r = catch_unwind(Box::pin(async {
            tokio::task::yield_now().await;
            if std::hint::black_box(true) {
                panic!("boom {}", 7);
            }
            1
        }))
        .await;
        let payload = r.unwrap_err();
        assert_eq!(panic_message(&*payload), "boom 7");
    }

    #[tokio::test]
    async fn a_normal_future_passes_through() {
        let pinned = std::pin::pin!(async { 5 });
        assert_eq!(catch_unwind(pinned).await.unwrap(), 5);
    }
}
