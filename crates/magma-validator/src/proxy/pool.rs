//! The threads that make the upstream calls. magma-client is blocking (it
//! refuses to run on the proxy's runtime), so each call waits on a thread
//! of its own: at most `max_threads` of them, started as they are first
//! needed and kept, with at most `max_queued` calls waiting for one.
//!
//! A call thread only waits: the request body it sends is the listening
//! side's buffer and the answer is read on magma-client's runtime thread,
//! so these threads hold no large buffer. An idle thread is taken most
//! recently idle first, so light traffic keeps using the same few.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Instant;

use magma_client::{Client, RawRequest, RawResponse};
use tokio::sync::oneshot;

/// What a call comes back with.
pub(super) enum Called {
    /// The agent's answer, of any status.
    Answer(RawResponse),
    /// magma-client's error (unreachable, TLS, answer too large, timeout).
    Failed(magma_client::Error),
    /// The call's deadline passed while it waited for a thread: never sent.
    Expired,
}

/// One upstream call.
pub(super) struct Call {
    pub(super) request: RawRequest,
    /// `--timeout` counts from when the call was queued.
    pub(super) deadline: Instant,
    pub(super) reply: oneshot::Sender<Called>,
}

/// Why a call was not taken.
pub(super) enum Refused {
    /// Every thread is busy and the queue is full.
    Full,
    /// The proxy is stopping.
    Closed,
    /// No call thread runs and none could be started.
    NoThread,
}

struct Worker {
    wake: Arc<Condvar>,
    /// A call handed to this worker while it was idle.
    call: Option<Call>,
}

struct State {
    queue: VecDeque<Call>,
    workers: Vec<Worker>,
    /// Indices of idle workers; the last one idled is taken first.
    idle: Vec<usize>,
    handles: Vec<JoinHandle<()>>,
    closed: bool,
}

struct Inner {
    state: Mutex<State>,
    client: Client,
    max_threads: usize,
    max_queued: usize,
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The lock is never held while a call runs; a panic cannot leave the
        // state half-changed.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The call threads and their queue.
pub(super) struct CallPool {
    inner: Arc<Inner>,
}

impl CallPool {
    pub(super) fn new(client: Client, max_threads: usize, max_queued: usize) -> CallPool {
        CallPool {
            inner: Arc::new(Inner {
                state: Mutex::new(State {
                    queue: VecDeque::new(),
                    workers: Vec::new(),
                    idle: Vec::new(),
                    handles: Vec::new(),
                    closed: false,
                }),
                client,
                max_threads: max_threads.max(1),
                max_queued,
            }),
        }
    }

    /// Hands `call` to an idle thread, to a new one while there are fewer
    /// than the limit, or to the queue while it has room.
    pub(super) fn submit(&self, call: Call) -> Result<(), Refused> {
        let mut st = self.inner.lock();
        if st.closed {
            return Err(Refused::Closed);
        }
        if let Some(i) = st.idle.pop() {
            st.workers[i].call = Some(call);
            st.workers[i].wake.notify_one();
            return Ok(());
        }
        if st.workers.len() < self.inner.max_threads {
            let i = st.workers.len();
            st.workers.push(Worker {
                wake: Arc::new(Condvar::new()),
                call: Some(call),
            });
            let inner = Arc::clone(&self.inner);
            let spawned = std::thread::Builder::new()
                .name("magma-proxy-call".to_owned())
                .spawn(move || work(&inner, i));
            match spawned {
                Ok(handle) => {
                    st.handles.push(handle);
                    return Ok(());
                }
                Err(_) => {
                    // No new thread: the call waits for a running one, if any.
                    let call = st.workers.pop().and_then(|w| w.call);
                    if st.workers.is_empty() {
                        return Err(Refused::NoThread);
                    }
                    if let Some(call) = call {
                        return queue(&mut st, call, self.inner.max_queued);
                    }
                    return Ok(());
                }
            }
        }
        queue(&mut st, call, self.inner.max_queued)
    }

    /// The number of threads started so far.
    #[cfg(test)]
    fn threads(&self) -> usize {
        self.inner.lock().workers.len()
    }

    /// Lets the threads finish the calls queued and under way, and waits for
    /// them. Calls submitted after this are refused.
    pub(super) fn close(&self) {
        let handles = {
            let mut st = self.inner.lock();
            st.closed = true;
            for w in &st.workers {
                w.wake.notify_one();
            }
            std::mem::take(&mut st.handles)
        };
        for h in handles {
            let _ = h.join();
        }
    }
}

impl Drop for CallPool {
    fn drop(&mut self) {
        self.close();
    }
}

fn queue(st: &mut State, call: Call, max_queued: usize) -> Result<(), Refused> {
    if st.queue.len() >= max_queued {
        return Err(Refused::Full);
    }
    st.queue.push_back(call);
    Ok(())
}

/// A call thread: its handed call or the oldest queued one, until closed.
fn work(inner: &Inner, me: usize) {
    let mut st = inner.lock();
    loop {
        let next = st.workers[me].call.take().or_else(|| st.queue.pop_front());
        let Some(call) = next else {
            if st.closed {
                st.idle.retain(|&i| i != me);
                return;
            }
            if !st.idle.contains(&me) {
                st.idle.push(me);
            }
            let wake = Arc::clone(&st.workers[me].wake);
            while st.workers[me].call.is_none() && !st.closed {
                st = wake.wait(st).unwrap_or_else(PoisonError::into_inner);
            }
            continue;
        };
        drop(st);
        let answered = run(&inner.client, call);
        st = inner.lock();
        if let Some((reply, called)) = answered {
            // Idle again before the answer goes back, so that the consumer's
            // next request finds this thread instead of starting another.
            if st.workers[me].call.is_none() && st.queue.is_empty() && !st.closed {
                st.idle.push(me);
            }
            drop(st);
            let _ = reply.send(called);
            st = inner.lock();
        }
    }
}

/// Makes one call; `None` when there is no one to answer.
fn run(client: &Client, call: Call) -> Option<(oneshot::Sender<Called>, Called)> {
    let Call {
        request,
        deadline,
        reply,
    } = call;
    if reply.is_closed() {
        // The consumer is gone (its connection closed): nothing to forward.
        return None;
    }
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Some((reply, Called::Expired));
    }
    // A panic of the client must not end the thread: the waiting request
    // then sees its reply dropped (a proxy fault).
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        client.execute(request.timeout(left))
    }))
    .ok()?;
    let called = match result {
        Ok(answer) => Called::Answer(answer),
        Err(e) => Called::Failed(e),
    };
    Some((reply, called))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn call(deadline: Instant) -> (Call, oneshot::Receiver<Called>) {
        let (reply, rx) = oneshot::channel();
        let request = RawRequest::get("/health");
        (
            Call {
                request,
                deadline,
                reply,
            },
            rx,
        )
    }

    /// A client of a port nothing listens on: every call fails at once.
    fn nowhere() -> Client {
        let addr = magma_testkit::stub::free_port();
        Client::builder(format!("http://{addr}"))
            .timeout(Duration::from_secs(5))
            .build()
            .expect("client")
    }

    #[test]
    fn sequential_calls_reuse_one_thread() {
        let pool = CallPool::new(nowhere(), 8, 0);
        for _ in 0..5 {
            let (c, rx) = call(Instant::now() + Duration::from_secs(5));
            assert!(pool.submit(c).is_ok());
            let got = rx.blocking_recv().expect("a reply");
            assert!(matches!(got, Called::Failed(_)));
        }
        assert_eq!(pool.threads(), 1);
    }

    /// One thread, held by a call the agent does not answer yet; behind
    /// it a call whose consumer left and one whose deadline passes while it
    /// waits; a fourth finds the queue full. Once the agent answers the
    /// first, the two queued ones are never sent.
    #[test]
    fn queued_calls_past_their_deadline_or_without_a_consumer_are_never_sent() {
        use magma_testkit::stub::{Options, Reply, StubServer};

        let (open, gate) = tokio::sync::watch::channel(false);
        let agent = StubServer::start_async(Options::default(), move |_| {
            let mut gate = gate.clone();
            Box::pin(async move {
                let _ = gate.wait_for(|open| *open).await;
                Reply::json(200, r#"{"status":"ready"}"#)
            })
        });
        let client = Client::builder(agent.url())
            .timeout(Duration::from_secs(60))
            .build()
            .expect("client");
        let pool = CallPool::new(client, 1, 2);
        let far = Instant::now() + Duration::from_secs(60);
        let (first, first_rx) = call(far);
        assert!(pool.submit(first).is_ok());
        let until = Instant::now() + Duration::from_secs(60);
        while agent.requests().is_empty() {
            assert!(Instant::now() < until, "the first call never arrived");
            std::thread::sleep(Duration::from_millis(10));
        }
        let (left, left_rx) = call(far);
        assert!(pool.submit(left).is_ok());
        drop(left_rx);
        let soon = Instant::now() + Duration::from_millis(20);
        let (late, late_rx) = call(soon);
        assert!(pool.submit(late).is_ok());
        let (extra, _extra_rx) = call(far);
        assert!(matches!(pool.submit(extra), Err(Refused::Full)));
        assert_eq!(pool.threads(), 1);
        // Waiting on the clock, not measuring it: the deadline has passed.
        while Instant::now() <= soon {
            std::thread::sleep(Duration::from_millis(5));
        }
        open.send(true).expect("open the gate");
        match first_rx.blocking_recv() {
            Ok(Called::Answer(a)) => assert_eq!(a.status().as_u16(), 200),
            _ => panic!("the first call has the agent's answer"),
        }
        assert!(matches!(late_rx.blocking_recv(), Ok(Called::Expired)));
        pool.close();
        assert_eq!(agent.requests().len(), 1);
    }

    #[test]
    fn an_expired_call_is_not_sent_and_a_closed_pool_refuses() {
        let pool = CallPool::new(nowhere(), 1, 4);
        let (c, rx) = call(Instant::now());
        assert!(pool.submit(c).is_ok());
        assert!(matches!(rx.blocking_recv(), Ok(Called::Expired)));
        pool.close();
        let (c, _rx) = call(Instant::now() + Duration::from_secs(5));
        assert!(matches!(pool.submit(c), Err(Refused::Closed)));
    }
}
