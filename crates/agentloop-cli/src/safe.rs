//! Text from a model, a tool or a server made safe for the terminal: control characters
//! (newline and tab apart) and the bidirectional and zero-width formatting characters that
//! can disguise text are shown escaped (`\u{1b}`), so output cannot drive the terminal.

/// Characters that may not reach a terminal as they are: controls (newline and tab
/// apart), and bidirectional and zero-width formatting characters, which can disguise text.
fn is_unsafe(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// Text made safe for the terminal: unsafe characters escaped
/// (`\u{1b}`).
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if is_unsafe(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

/// JSON text made safe for the terminal: the unsafe characters JSON leaves as they are
/// (inside strings) written as `\uXXXX` escapes, so the JSON means the same.
pub fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_unsafe(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}
