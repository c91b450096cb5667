//! [`RetryPolicy`]: when and how long to wait before sending a failed model request again.
//!
//! The policy only decides; the caller (the driver) runs the loop, so that a retry can be
//! reported as an event and a stream that already delivered content is never silently sent
//! again. The backoff schedule comes from the `backon` crate.
//!
//! This is the inner of the two retry tiers (attempts within one model call); the outer one
//! is the run's `Limits::max_consecutive_model_errors` (failed calls in a row). Which tier
//! retries what, what is journaled and how they multiply: `docs/PROVIDERS.md`, "Retries".

use super::ProviderError;
use backon::{BackoffBuilder, ExponentialBuilder};
use std::time::Duration;

/// How the backoff delays are spread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Jitter {
    /// Exact exponential delays.
    None,
    /// Random jitter from the thread's generator.
    Random,
    /// Jitter from a generator seeded with this value (reproducible).
    Seeded(u64),
}

/// Exponential backoff with jitter for retryable [`ProviderError`]s.
///
/// Defaults: base delay 1 s, delays doubling up to a cap of 60 s, at most 5 attempts in all
/// (the first one and 4 retries), jitter on, a provider's `Retry-After` honoured when it
/// asks for at most 60 s, and no retry that would start more than 60 s after the call's
/// first attempt (a deadline, whatever the count). Which errors are retried is [`ProviderError::is_retryable`]:
/// HTTP 408, 409, 429, 500, 502, 503, 504, 529, network errors and timeouts.
///
/// A server that cannot be reached at all ([`ProviderError::Unreachable`]: connection
/// refused, DNS, TLS, connect timeout) is not the passing fault these retries are for: it
/// has a budget of its own for the whole run, not per call — by default at most 3 requests
/// and 10 s, counted from the first request that could not connect and renewed once a
/// request reaches the server ([`with_unreachable_budget`](Self::with_unreachable_budget)).
/// When it is spent the run fails with the cause.
///
/// The driver applies it to the attempts of one model call, before any content reached the
/// caller; each retry is a streamed (not journaled) `model_retrying` event. When the policy
/// gives up, the call fails (`model_failed`) and the run's
/// [`max_consecutive_model_errors`](crate::run::Limits::max_consecutive_model_errors) decides
/// whether to ask again: the whole story is in `docs/PROVIDERS.md`, "Retries".
///
/// ```
/// use agentloop::provider::{ProviderError, RetryPolicy};
/// use std::time::Duration;
///
/// let policy = RetryPolicy::default().without_jitter();
/// let error = ProviderError::Server { status: 503, message: "busy".into() };
/// assert_eq!(policy.next_delay(1, &error), Some(Duration::from_secs(1)));
/// assert_eq!(policy.next_delay(3, &error), Some(Duration::from_secs(4)));
/// assert_eq!(policy.next_delay(5, &error), None); // the 5th attempt was the last
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    base: Duration,
    cap: Duration,
    max_attempts: u32,
    jitter: Jitter,
    max_retry_after: Duration,
    max_elapsed: Duration,
    unreachable_requests: u32,
    unreachable_elapsed: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            max_attempts: 5,
            jitter: Jitter::Random,
            max_retry_after: Duration::from_secs(60),
            max_elapsed: Duration::from_secs(60),
            unreachable_requests: 3,
            unreachable_elapsed: Duration::from_secs(10),
        }
    }
}

impl RetryPolicy {
    /// The default policy (see the type's documentation).
    pub fn new() -> Self {
        Self::default()
    }

    /// A policy that never retries (one attempt, one request to a server that cannot be
    /// reached).
    pub fn never() -> Self {
        Self { max_attempts: 1, unreachable_requests: 1, ..Self::default() }
    }

    /// The delay before the first retry; each further retry doubles it.
    pub fn with_base(mut self, base: Duration) -> Self {
        self.base = base;
        self
    }

    /// The longest backoff delay.
    pub fn with_cap(mut self, cap: Duration) -> Self {
        self.cap = cap;
        self
    }

    /// Attempts in all, the first one included (at least 1). Requests to a server that
    /// cannot be reached have their own budget
    /// ([`with_unreachable_budget`](Self::with_unreachable_budget)).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Exact exponential delays, without jitter (deterministic).
    pub fn without_jitter(mut self) -> Self {
        self.jitter = Jitter::None;
        self
    }

    /// Jitter from a generator seeded with `seed`: the same seed gives the same delays.
    pub fn with_jitter_seed(mut self, seed: u64) -> Self {
        self.jitter = Jitter::Seeded(seed);
        self
    }

    /// The longest `Retry-After` the policy waits for; a provider asking for longer makes
    /// [`next_delay`](Self::next_delay) give up (the error surfaces instead of a long sleep).
    pub fn with_max_retry_after(mut self, max: Duration) -> Self {
        self.max_retry_after = max;
        self
    }

    /// The deadline of the retries: no retry starts later than this after the first attempt.
    pub fn with_max_elapsed(mut self, max: Duration) -> Self {
        self.max_elapsed = max;
        self
    }

    /// The budget for a server that cannot be reached ([`ProviderError::Unreachable`]): at
    /// most `requests` requests (at least 1) that fail to connect, and no retry starting
    /// later than `elapsed` after the first of them. It is the run's, not one call's: it runs
    /// on across calls while the server stays unreachable and is renewed once a request
    /// reaches it. The delays between the requests are the backoff's.
    pub fn with_unreachable_budget(mut self, requests: u32, elapsed: Duration) -> Self {
        self.unreachable_requests = requests.max(1);
        self.unreachable_elapsed = elapsed;
        self
    }

    /// Requests that may fail to connect before the run gives up on the server.
    pub fn unreachable_requests(&self) -> u32 {
        self.unreachable_requests
    }

    /// How long after the first request that failed to connect a retry may still start.
    pub fn unreachable_elapsed(&self) -> Duration {
        self.unreachable_elapsed
    }

    /// Attempts in all, the first one included.
    pub fn max_attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The `backon` builder behind this policy's schedule (for callers that drive a
    /// `backon::Retryable` themselves). It yields `max_attempts - 1` delays.
    pub fn backoff_builder(&self) -> ExponentialBuilder {
        let builder = ExponentialBuilder::new()
            .with_factor(2.0)
            .with_min_delay(self.base)
            .with_max_delay(self.cap)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize);
        match self.jitter {
            Jitter::None => builder,
            Jitter::Random => builder.with_jitter(),
            Jitter::Seeded(seed) => builder.with_jitter().with_jitter_seed(seed),
        }
    }

    /// The backoff delay after failed attempt number `attempt` (1 = the first attempt), not
    /// counting any `Retry-After`: `base · 2^(attempt-1)`, at most the cap; with jitter, a
    /// value between that and twice that, still at most the cap.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let index = attempt.max(1) as usize - 1;
        let delay =
            self.backoff_builder().without_max_times().build().nth(index).unwrap_or(self.cap);
        // backon multiplies in f32: round to whole milliseconds.
        let delay = Duration::from_millis((delay.as_secs_f64() * 1000.0).round() as u64);
        delay.min(self.cap)
    }

    /// How long to wait before the next attempt, after attempt number `attempt` (1 = the
    /// first) failed with `error`; `None` means do not retry: the error is not retryable,
    /// the attempts are used up, or the provider asked to wait longer than the policy's
    /// longest `Retry-After`. A `Retry-After` the provider sent is used as is.
    pub fn next_delay(&self, attempt: u32, error: &ProviderError) -> Option<Duration> {
        if attempt >= self.max_attempts || !error.is_retryable() {
            return None;
        }
        match error.retry_after() {
            Some(wait) if wait > self.max_retry_after => None,
            Some(wait) => Some(wait),
            None => Some(self.backoff(attempt)),
        }
    }

    /// [`next_delay`](Self::next_delay), within the deadline: `None` also when the retry
    /// would start more than [`with_max_elapsed`](Self::with_max_elapsed) after the first
    /// attempt, which began `elapsed` ago.
    pub fn next_delay_within(
        &self,
        attempt: u32,
        error: &ProviderError,
        elapsed: Duration,
    ) -> Option<Duration> {
        self.next_delay(attempt, error)
            .filter(|delay| elapsed.saturating_add(*delay) <= self.max_elapsed)
    }

    /// How long to wait before another request to a server that could not be reached, after
    /// `failures` requests in a row failed to connect, the first of them `since` ago; `None`
    /// when the unreachable budget is spent (the run gives up on the server).
    pub fn next_unreachable_delay(&self, failures: u32, since: Duration) -> Option<Duration> {
        if failures >= self.unreachable_requests {
            return None;
        }
        let delay = self.backoff(failures);
        (since.saturating_add(delay) <= self.unreachable_elapsed).then_some(delay)
    }
}

#[cfg(test)]
mod tests;
