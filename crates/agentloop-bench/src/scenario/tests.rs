#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn model_names_round_trip() {
    let script = Script::parse("bench-k10-p1-l50").unwrap();
    assert_eq!(script, Script::new(10, 1, 50));
    assert_eq!(script.model_name(), "bench-k10-p1-l50");
    assert_eq!(
        Script::parse(&Script::new(1000, 4, 0).model_name()).unwrap(),
        Script::new(1000, 4, 0)
    );
}

#[test]
fn other_names_are_rejected() {
    for name in
        ["gpt-4.1", "bench-k10-p0-l0", "bench-k10-p1", "bench-k10-p1-l0-x", "bench-kx-p1-l0"]
    {
        assert!(Script::parse(name).is_err(), "{name}");
    }
}

#[test]
fn turns_reach_k_results_exactly() {
    let script = Script::new(10, 4, 0);
    assert_eq!(script.calls_after(0), 4);
    assert_eq!(script.calls_after(8), 2);
    assert_eq!(script.calls_after(10), 0);
    assert_eq!(script.requests_per_run(), 4);
    assert_eq!(Script::new(10, 1, 0).requests_per_run(), 11);
    assert_eq!(Script::new(0, 1, 0).requests_per_run(), 1);
}
