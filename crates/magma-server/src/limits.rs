//! What one answer may cost: the response-size limit, checked before the
//! agent runs and again while its answer is written.
//!
//! Written for every route that answers with agent output, not only
//! `POST /v1/responses`: a route calls [`expected_answer_bytes`] (or its own
//! estimate) before it calls the agent, and [`write_candidates`] to turn the
//! candidates into a body.

use std::pin::Pin;
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use bytes::Bytes;
use magma_protocol::{AgentRequest, Candidate, OutputWriter};
use tokio::sync::Semaphore;

/// Bytes of every candidate besides its `request_id` and memory, at most:
/// the shortest candidate the writer produces,
/// `{"request_id":"r","source_id":0,"candidate_index":0,"status":"completed","memory":{},"internal_steps":[],"output":{"say":"","tool_calls":[]},"error":null}`,
/// has 151 more (an error candidate has more still).
const LEAST_CANDIDATE_BYTES: u64 = 140;

/// How long the answer to `request` is when every candidate carries its
/// input's memory, as the contract asks of an agent that keeps it (a lower
/// bound for such agents: decisions and growing memory come on top).
pub(crate) fn expected_answer_bytes(request: &AgentRequest) -> u128 {
    let id = request.request_id().len() as u64;
    let per_input = request.inputs().iter().map(|input| {
        let memory = input.memory.json_len_hint() as u64;
        u128::from(input.num_outputs.get()) * u128::from(LEAST_CANDIDATE_BYTES + id + memory)
    });
    // The brackets of the array.
    per_input.sum::<u128>() + 2
}

/// Bodies at least this long are parsed on tokio's blocking pool: reading a
/// hostile 16 MiB document takes seconds of CPU, which on a runtime worker
/// would delay every other connection of that worker (`/health` included).
pub(crate) const PARSE_OFF_RUNTIME_BYTES: usize = 256 * 1024;

/// `parse(&bytes)`, on the blocking pool when `bytes` is long, one such
/// parse at a time; the bytes are dropped as soon as it returns. `None` if
/// `parse` panicked.
pub(crate) async fn parse_body<T: Send + 'static>(
    bytes: Bytes,
    parse: fn(&[u8]) -> T,
) -> Option<T> {
    if bytes.len() < PARSE_OFF_RUNTIME_BYTES {
        return Some(parse(&bytes));
    }
    off_runtime(move || parse(&bytes)).await
}

/// `work` on tokio's blocking pool, one such job at a time in the process
/// (long parses and long `422` bodies): however many arrive at once, they
/// hold one core, and the runtime's workers keep the others. `None` if
/// `work` panicked.
pub(crate) async fn off_runtime<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
) -> Option<T> {
    static LONG_JOBS: Semaphore = Semaphore::const_new(1);
    let _turn = LONG_JOBS.acquire().await.ok()?;
    tokio::task::spawn_blocking(work).await.ok()
}

/// `fut` with a time limit, counted from its first poll. The clock is read
/// and the timer armed only when that poll does not finish `fut`: a body
/// that arrived with its head, or an agent that answers at once, costs
/// neither. `Err(())` when the limit passed.
///
/// The timer is boxed, made only when it is needed, and `fut` is pinned
/// by the caller, in its own future: holding either here (tokio's `Timeout`
/// holds both) would make every caller's future larger by its size (a
/// future taken by value is held twice, as the argument and as the pinned
/// copy), and every request's future is moved into place as a whole.
pub(crate) async fn within<F: Future>(
    limit: Duration,
    mut fut: Pin<&mut F>,
) -> Result<F::Output, ()> {
    let first = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await;
    if let Poll::Ready(out) = first {
        return Ok(out);
    }
    // The first poll took no time worth counting (it did not wait).
    let Some(deadline) = tokio::time::Instant::now().checked_add(limit) else {
        // A limit past any representable instant never comes.
        return Ok(fut.await);
    };
    // Outside the task's cooperative budget, so that a future that spends
    // the budget on every poll cannot keep its timer from firing (tokio's
    // `Timeout` does the same for such a future).
    let mut timer = Box::pin(tokio::task::unconstrained(tokio::time::sleep_until(
        deadline,
    )));
    // As tokio's `Timeout`: the future first, then the timer.
    std::future::poll_fn(|cx| {
        if let Poll::Ready(out) = fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        timer.as_mut().poll(cx).map(|()| Err(()))
    })
    .await
}

/// How long a request waits for room in the body budget before it is
/// answered `503`.
pub(crate) const BUDGET_WAIT: Duration = Duration::from_secs(1);

/// The request-body bytes the whole process may hold at once
/// (`--max-total-body-bytes`), shared by every connection and stream.
#[derive(Debug)]
pub(crate) struct BodyBudget {
    bytes: Arc<Semaphore>,
    total: u64,
}

impl BodyBudget {
    pub(crate) fn new(total: u64) -> BodyBudget {
        let permits = usize::try_from(total)
            .unwrap_or(usize::MAX)
            .min(Semaphore::MAX_PERMITS);
        BodyBudget {
            bytes: Arc::new(Semaphore::new(permits)),
            total,
        }
    }

    /// The budget's size in bytes.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// An empty share, grown by [`BodyBudget::take`].
    pub(crate) fn share(&self) -> BudgetShare {
        BudgetShare {
            bytes: Arc::clone(&self.bytes),
            held: 0,
        }
    }
}

/// Bytes of the body budget one request holds; given back when dropped.
#[derive(Debug)]
pub(crate) struct BudgetShare {
    bytes: Arc<Semaphore>,
    held: usize,
}

impl BudgetShare {
    /// Adds `n` bytes to this share, waiting up to [`BUDGET_WAIT`] for
    /// them. `false` when they did not become free in time.
    ///
    /// Bytes free now are taken without a future of the semaphore's: the
    /// wait (its queue entry and timer) is boxed, made only when needed, so
    /// that the futures that take bytes stay small.
    pub(crate) async fn take(&mut self, n: usize) -> bool {
        if self.try_take(n) {
            return true;
        }
        let Ok(n32) = u32::try_from(n) else {
            return false;
        };
        let wait = Box::pin(tokio::time::timeout(
            BUDGET_WAIT,
            self.bytes.acquire_many(n32),
        ));
        match wait.await {
            Ok(Ok(permit)) => {
                permit.forget();
                self.held += n;
                true
            }
            _ => false,
        }
    }
}

impl BudgetShare {
    /// Bytes this share holds.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Adds `n` bytes to this share if they are free now.
    pub(crate) fn try_take(&mut self, n: usize) -> bool {
        if n == 0 {
            return true;
        }
        let Ok(n32) = u32::try_from(n) else {
            return false;
        };
        match self.bytes.try_acquire_many(n32) {
            Ok(permit) => {
                permit.forget();
                self.held += n;
                true
            }
            Err(_) => false,
        }
    }
}

impl Drop for BudgetShare {
    fn drop(&mut self) {
        self.bytes.add_permits(self.held);
    }
}

/// Why an answer was not written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WriteError {
    /// Longer than the limit: at least this many bytes.
    Oversized { at_least: u64 },
    /// The budget had no room for the text.
    OverBudget,
}

/// The buffer [`write_candidates`] starts with for the candidates of
/// `per_input`: their length as `writer` estimates it, a little slack for
/// escapes the estimate does not count, never more than the limit allows.
/// The estimates of the first [`KEPT_HINTS`] candidates are kept in
/// `hints` for the writer, which would otherwise work them out again.
fn answer_capacity(
    writer: &OutputWriter<'_>,
    per_input: &[Vec<Candidate>],
    limit: usize,
    hints: &mut Hints,
) -> usize {
    let hint = per_input
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, c)| {
            let h = writer.len_hint(c);
            if let Some(kept) = hints.get_mut(i) {
                *kept = h;
            }
            h.saturating_add(1)
        })
        .fold(2usize, usize::saturating_add);
    hint.saturating_add(hint / 16).min(limit.saturating_add(1))
}

/// How many candidates' estimates [`answer_capacity`] keeps: the usual
/// answer has fewer, and a longer one works out the rest again.
const KEPT_HINTS: usize = 16;

/// The estimates [`answer_capacity`] kept, by candidate.
type Hints = [usize; KEPT_HINTS];

/// The compact JSON array of the candidates of `per_input` (one list per
/// input of `request`, counts checked), written one candidate at a time
/// into one buffer: each candidate is dropped as soon as it is written, so
/// the answer is held about once (candidates not yet written plus the text
/// of those written), and writing stops as soon as the text passes `limit`.
/// `grow(n)` is asked before the buffer's capacity passes `n` bytes
/// (`false`: no room, [`WriteError::OverBudget`]).
///
/// The bytes are those of [`AgentResponse::to_json_string`](magma_protocol::AgentResponse::to_json_string)
/// of the assembled response.
fn write_candidates_with(
    request: &AgentRequest,
    writer: &OutputWriter<'_>,
    per_input: Vec<Vec<Candidate>>,
    limit: usize,
    capacity: usize,
    hints: &Hints,
    grow: &mut dyn FnMut(usize) -> bool,
) -> Result<String, WriteError> {
    let oversized = |at_least: usize| WriteError::Oversized {
        at_least: at_least as u64,
    };
    let mut out = String::with_capacity(capacity);
    let mut allowed = out.capacity();
    out.push('[');
    let mut i = 0;
    for (input, candidates) in request.inputs().iter().zip(per_input) {
        for (k, candidate) in candidates.into_iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let hint = match hints.get(i) {
                Some(&h) => h,
                None => writer.len_hint(&candidate),
            };
            i += 1;
            // One huge candidate is refused before it is copied.
            if out.len().saturating_add(hint) > limit.saturating_add(limit / 16) {
                return Err(oversized(out.len() + hint));
            }
            // Room for the candidate (what an estimate below the truth adds
            // is checked once written).
            let needed = out.len().saturating_add(hint).saturating_add(hint / 16);
            if needed > allowed {
                if !grow(needed.max(allowed.saturating_mul(2))) {
                    return Err(WriteError::OverBudget);
                }
                allowed = needed.max(allowed.saturating_mul(2));
                out.reserve(allowed - out.len());
            }
            writer.write(input, k as u64, &candidate, &mut out);
            drop(candidate);
            if out.len() > limit {
                return Err(oversized(out.len()));
            }
            if out.capacity() > allowed {
                if !grow(out.capacity()) {
                    return Err(WriteError::OverBudget);
                }
                allowed = out.capacity();
            }
        }
    }
    out.push(']');
    if out.len() > limit {
        return Err(oversized(out.len()));
    }
    Ok(out)
}

/// [`write_candidates_with`] without a budget.
#[cfg(test)]
fn write_candidates(
    request: &AgentRequest,
    per_input: Vec<Vec<Candidate>>,
    limit: u64,
) -> Result<String, WriteError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut hints = [0; KEPT_HINTS];
    let writer = OutputWriter::new(request);
    let capacity = answer_capacity(&writer, &per_input, limit, &mut hints);
    write_candidates_with(
        request,
        &writer,
        per_input,
        limit,
        capacity,
        &hints,
        &mut |_| true,
    )
}

/// An answer's text and its share of the budget, freed together.
struct HeldAnswer {
    text: String,
    _share: BudgetShare,
}

impl AsRef<[u8]> for HeldAnswer {
    fn as_ref(&self) -> &[u8] {
        self.text.as_bytes()
    }
}

/// `text` as a body that keeps `share` (the request's bytes in the budget)
/// until the last `Bytes` pointing into it is dropped: a `422` body echoes
/// parts of its request, and stays counted in the request's place until it
/// has been written.
pub(crate) fn held_text(text: String, share: BudgetShare) -> Bytes {
    Bytes::from_owner(HeldAnswer {
        text,
        _share: share,
    })
}

/// The body of the candidates of `per_input` (checked against `request`),
/// at most `limit` bytes, its buffer counted in the budget through `share`
/// (which may already hold a reservation for it): the buffer's first size
/// is taken before writing (waiting up to [`BUDGET_WAIT`]), any growth
/// while writing without waiting. The bytes stay counted until the last
/// `Bytes` pointing into them is dropped: after hyper has written them, or
/// dropped them with their connection.
pub(crate) async fn answer_body(
    request: &AgentRequest,
    per_input: Vec<Vec<Candidate>>,
    limit: u64,
    mut share: BudgetShare,
) -> Result<Bytes, WriteError> {
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    let mut hints = [0; KEPT_HINTS];
    let writer = OutputWriter::new(request);
    let capacity = answer_capacity(&writer, &per_input, limit, &mut hints);
    if !share.take(capacity.saturating_sub(share.held)).await {
        return Err(WriteError::OverBudget);
    }
    let text = write_candidates_with(
        request,
        &writer,
        per_input,
        limit,
        capacity,
        &hints,
        &mut |n| share.try_take(n.saturating_sub(share.held)),
    )?;
    Ok(Bytes::from_owner(HeldAnswer {
        text,
        _share: share,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use magma_protocol::{AgentDecision, AgentResponse};

    fn answer(memory: &str, n: u64) -> (AgentRequest, Vec<Vec<Candidate>>) {
        let body = format!(
            r#"{{"request_id":"r","inputs":[{{"id":3,"instruction":{{"type":"user","content":"hi"}},"num_outputs":{n},"memory":{memory}}}]}}"#
        );
        let request = AgentRequest::from_slice(body.as_bytes()).unwrap();
        let input = &request.inputs()[0];
        let candidate = Candidate::new(input.memory.clone(), AgentDecision::say("ok"));
        (request, vec![vec![candidate; n as usize]])
    }

    /// The text of the assembled response.
    fn whole(request: &AgentRequest, per_input: &[Vec<Candidate>]) -> String {
        AgentResponse::assemble(request, per_input.to_vec())
            .unwrap()
            .to_json_string()
    }

    #[test]
    fn written_bytes_are_those_of_the_response_and_the_estimate_is_below_them() {
        for (memory, n) in [("{}", 1), (r#"{"a":[1,2.50,"é\n"],"b":{"c":null}}"#, 7)] {
            let (request, candidates) = answer(memory, n);
            let whole = whole(&request, &candidates);
            let written = write_candidates(&request, candidates, 1 << 20).unwrap();
            assert_eq!(written, whole);
            let expected = expected_answer_bytes(&request);
            assert!(
                expected <= whole.len() as u128,
                "{expected} > {}",
                whole.len()
            );
            assert!(
                expected * 2 > whole.len() as u128,
                "{expected} far below {}",
                whole.len()
            );
        }
        let none = AgentRequest::from_slice(br#"{"request_id":"r","inputs":[]}"#).unwrap();
        assert_eq!(write_candidates(&none, Vec::new(), 1024).unwrap(), "[]");
    }

    #[test]
    fn writing_stops_at_the_limit() {
        let memory = format!(r#"{{"blob":"{}"}}"#, "x".repeat(10_000));
        let (request, candidates) = answer(&memory, 100);
        let whole = whole(&request, &candidates).len() as u64;
        assert!(write_candidates(&request, candidates.clone(), whole).is_ok());
        let at_least = |err| match err {
            WriteError::Oversized { at_least } => at_least,
            WriteError::OverBudget => panic!("no budget here"),
        };
        let err = write_candidates(&request, candidates.clone(), whole - 1).unwrap_err();
        assert!(at_least(err) >= whole - 1, "{err:?}");
        let err = write_candidates(&request, candidates, 50_000).unwrap_err();
        assert!((50_000..70_000).contains(&at_least(err)), "{err:?}");
    }
}
