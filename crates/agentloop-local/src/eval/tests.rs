use super::*;

#[test]
fn the_shipped_tasks_parse_and_cover_every_category() {
    let tasks = parse(TASKS_JSON).unwrap();
    assert!(tasks.len() >= 40, "{}", tasks.len());
    for category in ["arithmetic", "knowledge", "files"] {
        assert!(tasks.iter().any(|t| t.category == category), "{category}");
    }
    let mut ids: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), tasks.len(), "task ids are unique");
}

#[test]
fn numbers_are_judged_as_numbers() {
    let expect = Expect::Number(414.0);
    let question = "What is 18 multiplied by 23?";
    assert!(expect.judge("18 multiplied by 23 is 414.", question));
    assert!(expect.judge("The answer is 414", question));
    assert!(!expect.judge("The answer is 4140.", question));
    assert!(!expect.judge("It is 41.4", question));
    assert!(Expect::Number(5555.0).judge("1234 plus 4321 is 5,555.", "1234 plus 4321"));
    assert!(Expect::Number(32.4).judge("3 books cost 32.4 dollars.", "3 books at 10.8"));
    assert!(Expect::Number(-3.0).judge("the result is -3.", "2 minus 5"));
    assert!(Expect::Number(12.0).judge("15% of 80 is 12.0", "What is 15% of 80?"));
    assert!(!Expect::Number(7.0).judge("", "3 plus 4"));
}

/// A number answer that holds a number from nowhere is wrong, though the right one is in it.
#[test]
fn a_number_from_nowhere_makes_an_answer_wrong() {
    let expect = Expect::Number(42.0);
    let context = "What is 17 plus 25?\n{\"expression\":\"17 + 25\"}";
    assert!(expect.judge("The sum of 17 and 25 is 42.", context));
    assert!(!expect.judge("The sum of 42 and 25 is 107.", context));
    assert!(!expect.judge("42 is 42.55", context));
    let cube = "What is 6 to the power of 3?\n{\"expression\":\"6 ** 3\"}";
    assert!(!Expect::Number(216.0).judge("The cube of 216 is 616.", cube));
    // A number of the calls' arguments may be quoted: 3 weeks are 3 * 7 days.
    let weeks = Expect::Number(21.0);
    assert!(weeks.judge("3 weeks are 3 * 7 = 21 days.", "3 weeks?\n{\"expression\":\"3 * 7\"}"));
}

#[test]
fn texts_are_judged_without_case() {
    let paris = Expect::AnyText(vec!["Paris".into()]);
    assert!(paris.judge("The capital of France is paris.", ""));
    assert!(!paris.judge("Lyon", ""));
    let all = Expect::AllText(vec!["a.txt".into(), "b.csv".into()]);
    assert!(all.judge("a.txt, b.csv", ""));
    assert!(!all.judge("a.txt", ""));
}

#[test]
fn the_report_counts_and_lists_misses() {
    let result = |id: &str, correct: bool, answer: &str| TaskResult {
        id: id.into(),
        category: "arithmetic".into(),
        answer: answer.into(),
        stop_reason: "Completed".into(),
        correct,
        empty: answer.is_empty(),
        tool_calls: 1,
        model_calls: 2,
        output_tokens: 20,
        seconds: 2.0,
        calls: vec!["calculator({\"expression\":\"2|2\"}) → 4".into()],
    };
    let report = report("m", &[result("a", true, "4"), result("b", false, "")]);
    assert!(report.contains("| m | all | 1 / 2 (50 %) | 1 | 1.00 | 2.0 |"), "{report}");
    let miss = r#"| b | `calculator({"expression":"2\|2"}) → 4` | Completed |  |"#;
    assert!(report.contains(miss), "{report}");
}
