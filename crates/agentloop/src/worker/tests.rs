use super::queue::parse_job;
use ::redis::streams::StreamId;
use ::redis::Value;
use std::collections::HashMap;

fn entry(fields: &[(&str, &str)]) -> StreamId {
    let map: HashMap<String, Value> = fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Value::BulkString(v.as_bytes().to_vec())))
        .collect();
    StreamId { id: "1-0".into(), map, ..StreamId::default() }
}

#[test]
fn a_job_names_its_run_and_keeps_its_refusals() {
    let job = parse_job("support", entry(&[("run", "run_1"), ("refusals", "2")]), 3);
    assert_eq!(job.run_id.as_deref(), Ok("run_1"));
    assert_eq!((job.refusals, job.deliveries, job.agent.as_str()), (2, 3, "support"));
}

#[test]
fn a_malformed_job_says_why() {
    let job = parse_job("support", entry(&[("hello", "world")]), 1);
    assert_eq!(job.run_id, Err("it has no `run` field (fields: hello)".into()));
    for bad in ["", "run\u{1b}[2J"] {
        let job = parse_job("support", entry(&[("run", bad)]), 1);
        assert!(job.run_id.unwrap_err().contains("empty, too long or holds control"));
    }
    let long = "r".repeat(300);
    assert!(parse_job("support", entry(&[("run", &long)]), 1).run_id.is_err());
    // A refusal count that is not a number counts as none.
    assert_eq!(parse_job("support", entry(&[("run", "r"), ("refusals", "x")]), 1).refusals, 0);
}
