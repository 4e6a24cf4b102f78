//! Text shown to users: every message is one line, so user input echoed in a message is shown with its control
//! characters escaped.

/// `s` with control characters (newlines, tabs, escapes) written as Rust escapes (`\n`, `\t`, `\u{1b}`), so that a
/// message that quotes it stays on one line; every other character is kept.
pub fn one_line(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::one_line;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(one_line("current\n"), "current\\n");
        assert_eq!(one_line("a\tb\u{1b}[0m"), "a\\tb\\u{1b}[0m");
        assert_eq!(one_line("10r-seq, 'x' \"y\" é"), "10r-seq, 'x' \"y\" é");
    }
}
