#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn plan() -> Plan {
    Plan {
        kind: Kind::Agentloop,
        url: "http://127.0.0.1:1/v1".into(),
        script: Script::new(10, 1, 0),
        stream: false,
        concurrency: 2,
        warmup: 1,
        runs: 3,
        history: false,
        store: JournalStore::None,
        global_queue_interval: None,
        wake_per_batch: true,
    }
}

#[test]
fn a_run_that_did_all_its_work_is_valid() {
    let report = DriverReport { rounds: 2 * 3 * 11, ..DriverReport::default() };
    assert_eq!(validate(&plan(), &report, 2 * 4 * 11, 0), Ok(()));
}

#[test]
fn a_run_that_did_less_work_or_failed_is_invalid() {
    let report = DriverReport { rounds: 2 * 3 * 11, ..DriverReport::default() };
    let fewer = validate(&plan(), &report, 2 * 4 * 11 - 1, 0).unwrap_err();
    assert!(fewer.contains("INVALID") && fewer.contains("expected 88"), "{fewer}");
    assert!(validate(&plan(), &report, 88, 1).is_err());
    let short = DriverReport { rounds: 60, ..DriverReport::default() };
    assert!(validate(&plan(), &short, 88, 0).unwrap_err().contains("round trips"));
    let failed = DriverReport { errors: 1, first_error: Some("boom".into()), ..report };
    assert!(validate(&plan(), &failed, 88, 0).unwrap_err().contains("boom"));
}

#[test]
fn arguments() {
    let options = parse_args(["--smoke".to_owned(), "--no-pin".to_owned()]).unwrap();
    assert!(options.smoke && !options.pin);
    assert!(parse_args(["--bin-dir".to_owned()]).is_err());
    assert!(parse_args(["--what".to_owned()]).is_err());
}
