#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

#[test]
fn medians_and_numbers() {
    assert_eq!(median(&mut []), None);
    assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
    assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
    assert_eq!(number(1_234_567.4), "1,234,567");
    assert_eq!(number(123.4), "123");
    assert_eq!(number(12.34), "12.3");
}

#[test]
fn history_medians_leave_out_encoding() {
    let history = History {
        rounds: 1000,
        samples: vec![(9, 30.0, 5.0), (10, 32.0, 6.0), (11, 31.0, 5.0), (1000, 90.0, 60.0)],
    };
    assert_eq!(history.median_without_encoding(9..=11), Some(26.0));
    assert_eq!(history.median_without_encoding(1000..=1000), Some(30.0));
    assert_eq!(history.median_encoding(9..=11), Some(5.0));
}

#[test]
fn reports_round_trip_as_json_and_render_as_markdown() {
    let report = DriverReport {
        driver: "floor".into(),
        rounds: 10,
        wall_us: 100.0,
        cpu_us: 50.0,
        ..Default::default()
    };
    let back: DriverReport =
        serde_json::from_str(&serde_json::to_string(&report).unwrap()).unwrap();
    assert_eq!(back, report);
    assert_eq!(back.wall_per_round(), 10.0);
    assert_eq!(back.cpu_per_round(), 5.0);
    let table = markdown(&[Row {
        scenario: "s".into(),
        measure: "m".into(),
        floor: 1.0,
        agentloop: 1.05,
        ratio: 1.05,
        target: "≤ 1.10×".into(),
        met: Some(true),
    }]);
    assert!(table.contains("| s | m | 1.0 | 1.1 | 1.05× | ≤ 1.10× | yes |"), "{table}");
}
