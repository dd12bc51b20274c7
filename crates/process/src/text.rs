//! Untrusted text as an error or a log line shows it: control characters
//! escaped (a newline in a package name does not start a second `error:`
//! line, an escape sequence does not reach the terminal), long values cut.
//!
//! The one escaper of the tree: every crate that echoes a value it did
//! not write (a manifest's, a lockfile's, an image label's, a lock file
//! holder's) goes through it. It must not decide what is untrusted: the
//! caller does.

/// How many characters of an untrusted value an error shows by default.
pub const SHOWN_CHARS: usize = 80;

/// `text` with its control characters escaped (`\n`, `\u{1b}`) and
/// nothing cut: for paths the user gave, which are shown whole.
pub fn escaped(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    push_escaped(&mut out, text.chars());
    out
}

/// `text` escaped and cut after `max` characters (then `…`).
pub fn cut(text: &str, max: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max * 2));
    push_escaped(&mut out, text.chars().take(max));
    if text.chars().nth(max).is_some() {
        out.push('…');
    }
    out
}

/// An untrusted value as an error shows it: escaped, at most
/// [`SHOWN_CHARS`] characters, then `…`.
pub fn shown(text: &str) -> String {
    cut(text, SHOWN_CHARS)
}

/// The first line of `text`, escaped and cut after `max` characters: a
/// `…` says that something was left out (the rest of the line, or the
/// lines after it). For a multi-line value given where one line belongs
/// (a script in place of a unit name).
pub fn first_line(text: &str, max: usize) -> String {
    let line = text.split('\n').next().unwrap_or_default();
    let mut out = cut(line, max);
    if line.len() < text.len() && !out.ends_with('…') {
        out.push('…');
    }
    out
}

fn push_escaped(out: &mut String, chars: impl Iterator<Item = char>) {
    for c in chars {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_values_cut() {
        assert_eq!(escaped("Red Hat\n\x1b[2J"), "Red Hat\\n\\u{1b}[2J");
        assert_eq!(escaped("plain"), "plain");
        assert_eq!(shown(&"x".repeat(80)), "x".repeat(80));
        assert_eq!(shown(&"x".repeat(81)), format!("{}…", "x".repeat(80)));
        assert_eq!(cut("a\tbc", 2), "a\\t…");
        assert_eq!(cut("été", 2), "ét…");
        let table = [
            ("one", 10, "one"),
            ("one\ntwo", 10, "one…"),
            ("one\r\ntwo", 10, "one\\r…"),
            ("abcdef", 3, "abc…"),
            ("abcdef\nx", 3, "abc…"),
            ("", 3, ""),
            ("\n", 3, "…"),
        ];
        for (text, max, want) in table {
            assert_eq!(first_line(text, max), want, "{text:?}");
        }
    }
}
