#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn a_spread_is_median_min_max() {
    let spread = Spread::of([3.0, 1.0, 2.0, 10.0]).unwrap();
    assert_eq!(spread, Spread { median: 2.5, min: 1.0, max: 10.0 });
    assert!(Spread::of([]).is_none());
}

#[test]
fn a_lost_span_fails_the_check() {
    let ok = Spans { ended: 12, exported: 12, failed: 0, dropped: 0, received: Some(12) };
    assert!(check(&ok, 2).is_ok());
    assert!(check(&Spans { dropped: 1, exported: 11, ..ok }, 2).is_err());
    assert!(check(&Spans { received: Some(11), ..ok }, 2).is_err());
    assert!(check(&ok, 3).is_err());
}

#[tokio::test(flavor = "current_thread")]
async fn every_span_of_the_workload_reaches_the_exporter() {
    let plan = Plan {
        runs: 20,
        warmup: 5,
        repetitions: 1,
        variants: vec![Variant::Off, Variant::SpansOnly, Variant::Discard],
        endpoint: None,
        queue: None,
        batch: None,
        model_url: None,
        recorded: false,
        // Telemetry's threads moved (to the CPU every machine has).
        export_cpu: Some(0),
        block: None,
    };
    let samples = run(&plan, |_| {}).await.unwrap();
    assert_eq!(samples.len(), 3);
    let discard = samples.iter().find(|s| s.variant == Variant::Discard).unwrap();
    assert_eq!(discard.spans.unwrap().exported, 25 * SPANS_PER_RUN);
    let summaries = summarise(&samples, &plan.variants);
    assert!(summaries[0].overhead_pct.is_none());
    assert!(summaries[2].overhead_pct.is_some());
    assert!(table(&summaries).contains("| `discard` |"));
}

#[tokio::test(flavor = "current_thread")]
async fn the_recorded_llama_cpp_turns_make_the_same_spans() {
    let listener = crate::mock::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let stats = Arc::new(crate::mock::Stats::default());
    let server = tokio::spawn(crate::mock::serve(listener, stats.clone()));
    let plan = Plan {
        runs: 4,
        warmup: 1,
        repetitions: 1,
        variants: vec![Variant::Off, Variant::SpansOnly],
        endpoint: None,
        queue: None,
        batch: None,
        model_url: Some(url),
        recorded: true,
        export_cpu: None,
        block: None,
    };
    // Each run checked: completed after two iterations (the call, then the answer).
    let samples = run(&plan, |_| {}).await.unwrap();
    let spans = samples.iter().find(|s| s.variant == Variant::SpansOnly).unwrap();
    assert_eq!(spans.spans.unwrap().exported, 5 * SPANS_PER_RUN);
    // Two variants of five runs, two requests a run, none refused.
    assert_eq!(stats.requests.load(std::sync::atomic::Ordering::Relaxed), 20);
    assert_eq!(stats.errors.load(std::sync::atomic::Ordering::Relaxed), 0);
    server.abort();

    let scripted = Plan { model_url: None, ..plan };
    let error = run(&scripted, |_| {}).await.unwrap_err();
    assert!(error.to_string().contains("--http"), "{error}");
}
