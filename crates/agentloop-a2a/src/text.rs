//! Text from a remote agent made safe to show: control characters escaped, length bounded.

/// `text` with control characters (other than newline and tab) escaped and at most `max`
/// characters kept (an ellipsis marks a cut). Anything a remote agent sends that may reach a
/// terminal or a log goes through this.
pub(crate) fn sanitize(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max + 8));
    for (count, c) in text.chars().enumerate() {
        if count >= max {
            out.push('…');
            break;
        }
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else if matches!(c, '\u{200b}'..='\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
        {
            // Bidirectional and zero-width formatting characters can disguise text.
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
