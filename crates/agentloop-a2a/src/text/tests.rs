use super::sanitize;

#[test]
fn escapes_control_characters_and_bounds_length() {
    assert_eq!(sanitize("a\u{1b}[31mred\r\n", 100), "a\\u{1b}[31mred\\r\n");
    assert_eq!(sanitize("abcdef", 3), "abc…");
    assert_eq!(sanitize("x\u{202e}y", 10), "x\\u{202e}y");
    assert_eq!(sanitize("tab\there", 100), "tab\there");
}
