#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn args(line: &str) -> Vec<String> {
    line.split_whitespace().map(str::to_owned).collect()
}

#[test]
fn arguments_make_a_plan() {
    let plan = parse_args(args(
        "--driver agentloop --url http://127.0.0.1:1/v1 --k 5 --p 2 --latency-ms 50 --stream --concurrency 1000 --warmup 1 --runs 3",
    ))
    .unwrap();
    assert_eq!(plan.kind, Kind::Agentloop);
    assert_eq!(plan.script, Script::new(5, 2, 50));
    assert!(plan.stream && !plan.history);
    assert_eq!(plan.concurrency, 1000);
    // 4 runs per agent of 3 tool turns and the final one.
    assert_eq!(plan.expected_requests(), 1000 * 4 * 4);
    assert_eq!(plan.global_queue_interval, None);
    let plan = parse_args(args("--url u --global-queue-interval 2")).unwrap();
    assert_eq!(plan.global_queue_interval, Some(2));
    assert!(parse_args(args("--url u --global-queue-interval x")).is_err());
    assert!(parse_args(args("--driver x --url u")).is_err());
    assert!(parse_args(args("--driver floor")).is_err());
    assert!(parse_args(args("--url u --p 0")).is_err());
    assert!(parse_args(args("--url u --bogus")).is_err());
}

#[test]
fn the_history_plan_counts_warm_up_and_measured_runs() {
    let plan =
        parse_args(args("--driver agentloop --url u --k 1000 --history --warmup 1 --runs 1"))
            .unwrap();
    assert_eq!(plan.expected_requests(), 2 * 1001);
}

#[test]
fn sampled_rounds_are_around_ten_and_at_the_end() {
    let rounds = sampled_rounds(1000);
    assert_eq!(rounds.first(), Some(&6));
    assert!(rounds.contains(&10) && rounds.contains(&15) && rounds.contains(&991));
    assert_eq!(rounds.last(), Some(&1000));
    assert_eq!(rounds.len(), 20);
    assert_eq!(sampled_rounds(12), (6..=12).collect::<Vec<_>>());
}

#[test]
fn percentiles_pick_the_nearest_rank() {
    let mut values: Vec<f64> = (1..=100).rev().map(f64::from).collect();
    assert_eq!(percentile(&mut values, 0.5), 51.0);
    assert_eq!(percentile(&mut values, 0.99), 99.0);
    assert_eq!(percentile(&mut [], 0.5), 0.0);
}
