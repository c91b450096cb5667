#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use crate::provider::http::classify_http_error;
use reqwest::header::HeaderMap;

fn server(status: u16) -> ProviderError {
    ProviderError::Server { status, message: "boom".into() }
}

#[test]
fn defaults_double_from_one_second_and_stop_after_five_attempts() {
    let policy = RetryPolicy::default().without_jitter();
    let error = server(500);
    let delays: Vec<Option<Duration>> = (1..=5).map(|a| policy.next_delay(a, &error)).collect();
    assert_eq!(
        delays,
        [
            Some(Duration::from_secs(1)),
            Some(Duration::from_secs(2)),
            Some(Duration::from_secs(4)),
            Some(Duration::from_secs(8)),
            None,
        ]
    );
    assert_eq!(policy.max_attempts(), 5);
}

#[test]
fn the_backoff_is_capped() {
    let policy = RetryPolicy::default().without_jitter().with_max_attempts(20);
    assert_eq!(policy.backoff(6), Duration::from_secs(32));
    assert_eq!(policy.backoff(7), Duration::from_secs(60));
    assert_eq!(policy.backoff(15), Duration::from_secs(60));
    let small = RetryPolicy::new()
        .without_jitter()
        .with_base(Duration::from_millis(100))
        .with_cap(Duration::from_millis(250));
    assert_eq!(small.backoff(1), Duration::from_millis(100));
    assert_eq!(small.backoff(2), Duration::from_millis(200));
    assert_eq!(small.backoff(3), Duration::from_millis(250));
}

#[test]
fn jitter_stays_between_the_delay_and_twice_it_and_under_the_cap() {
    let policy = RetryPolicy::default().with_max_attempts(20);
    for _ in 0..200 {
        for attempt in 1..=8u32 {
            let exact = Duration::from_secs(1 << (attempt - 1)).min(Duration::from_secs(60));
            let delay = policy.backoff(attempt);
            assert!(delay >= exact, "attempt {attempt}: {delay:?} < {exact:?}");
            assert!(
                delay <= (exact * 2).min(Duration::from_secs(60)),
                "attempt {attempt}: {delay:?}"
            );
        }
    }
    // Random jitter really varies.
    let first: Vec<Duration> = (0..20).map(|_| policy.backoff(3)).collect();
    assert!(first.iter().any(|d| *d != first[0]), "jitter never varied: {first:?}");
}

#[test]
fn a_seeded_jitter_is_reproducible() {
    let a = RetryPolicy::default().with_jitter_seed(7);
    let b = RetryPolicy::default().with_jitter_seed(7);
    for attempt in 1..=4 {
        assert_eq!(a.backoff(attempt), b.backoff(attempt));
    }
    assert_ne!(a.backoff(2), RetryPolicy::default().without_jitter().backoff(2));
}

#[test]
fn retry_after_is_used_as_is_up_to_the_limit() {
    let policy = RetryPolicy::default();
    let limited =
        |ms| ProviderError::RateLimited { message: "slow down".into(), retry_after_ms: Some(ms) };
    assert_eq!(policy.next_delay(1, &limited(1500)), Some(Duration::from_millis(1500)));
    assert_eq!(policy.next_delay(4, &limited(30_000)), Some(Duration::from_secs(30)));
    assert_eq!(policy.next_delay(1, &limited(61_000)), None, "longer than 60 s: give up");
    let patient = policy.clone().with_max_retry_after(Duration::from_secs(600));
    assert_eq!(patient.next_delay(1, &limited(61_000)), Some(Duration::from_secs(61)));
    assert_eq!(policy.next_delay(5, &limited(10)), None, "attempts used up");
    // A rate limit without a delay backs off.
    let bare = ProviderError::RateLimited { message: String::new(), retry_after_ms: None };
    assert_eq!(policy.without_jitter().next_delay(2, &bare), Some(Duration::from_secs(2)));
}

#[test]
fn the_policy_retries_exactly_what_is_retryable() {
    let policy = RetryPolicy::default();
    let headers = HeaderMap::new();
    for status in [408u16, 409, 429, 500, 502, 503, 504, 529] {
        let error = classify_http_error(status, &headers, "{}");
        assert!(error.is_retryable(), "{status}: {error:?}");
        assert!(policy.next_delay(1, &error).is_some(), "{status}");
    }
    for status in [400u16, 401, 403, 404, 413, 422, 501, 505] {
        let error = classify_http_error(status, &headers, "{}");
        assert!(!error.is_retryable(), "{status}: {error:?}");
        assert_eq!(policy.next_delay(1, &error), None, "{status}");
    }
    for error in [
        ProviderError::Network { message: "reset".into() },
        ProviderError::Timeout { message: "idle".into() },
        ProviderError::Overloaded { message: "busy".into() },
    ] {
        assert!(policy.next_delay(1, &error).is_some(), "{error:?}");
    }
    for error in [
        ProviderError::ContextLengthExceeded { message: String::new() },
        ProviderError::Protocol { message: String::new(), excerpt: String::new() },
        ProviderError::Cancelled,
        ProviderError::Other { message: String::new() },
    ] {
        assert_eq!(policy.next_delay(1, &error), None, "{error:?}");
    }
}

#[test]
fn never_does_not_retry_and_the_backon_builder_matches() {
    assert_eq!(RetryPolicy::never().next_delay(1, &server(503)), None);
    let delays: Vec<Duration> =
        RetryPolicy::default().without_jitter().backoff_builder().build().collect();
    assert_eq!(delays, [1, 2, 4, 8].map(Duration::from_secs));
}

#[test]
fn no_retry_starts_after_the_deadline() {
    let policy = RetryPolicy::default().without_jitter().with_max_elapsed(Duration::from_secs(10));
    let error = server(503);
    // 1 s after the first attempt began: the 1 s delay ends at 2 s, within the deadline.
    assert_eq!(
        policy.next_delay_within(1, &error, Duration::from_secs(1)),
        Some(Duration::from_secs(1))
    );
    // 7 s in, the 4 s delay of the third retry would end at 11 s: no retry.
    assert_eq!(policy.next_delay_within(3, &error, Duration::from_secs(7)), None);
    assert_eq!(
        policy.next_delay_within(3, &error, Duration::from_secs(6)),
        Some(Duration::from_secs(4))
    );
    // A Retry-After counts the same way.
    let limited =
        ProviderError::RateLimited { retry_after_ms: Some(8_000), message: String::new() };
    assert_eq!(policy.next_delay_within(1, &limited, Duration::from_secs(3)), None);
    // The default deadline is 60 s.
    assert_eq!(RetryPolicy::default().next_delay_within(1, &error, Duration::from_secs(60)), None);
}

#[test]
fn an_unreachable_server_has_a_budget_of_requests_and_time() {
    let policy = RetryPolicy::default().without_jitter();
    let secs = Duration::from_secs;
    assert_eq!(policy.next_unreachable_delay(1, Duration::ZERO), Some(secs(1)));
    assert_eq!(policy.next_unreachable_delay(2, secs(1)), Some(secs(2)));
    assert_eq!(policy.next_unreachable_delay(3, secs(3)), None, "3 requests by default");
    assert_eq!(policy.next_unreachable_delay(2, secs(9)), None, "no retry past 10 s");
    assert_eq!(RetryPolicy::never().next_unreachable_delay(1, Duration::ZERO), None);
    let wide = RetryPolicy::default().without_jitter().with_unreachable_budget(5, secs(60));
    assert_eq!(wide.next_unreachable_delay(4, secs(7)), Some(secs(8)));
    assert_eq!(wide.unreachable_requests(), 5);
    assert_eq!(wide.unreachable_elapsed(), secs(60));
    // The attempts of one call do not change it.
    assert_eq!(
        policy.clone().with_max_attempts(1).next_unreachable_delay(1, Duration::ZERO),
        Some(secs(1))
    );
}
