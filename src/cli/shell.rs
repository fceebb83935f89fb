//! Values printed inside a command line a user may paste (`reply with: a2a-gateway send
//! …`, `resume with: …`, an environment line): each becomes one POSIX shell word, and
//! nothing in it can drive the terminal. Task and context ids come from the server, so
//! they may hold anything.

use super::client::printable;

/// `value` as one POSIX shell word in single quotes (a `'` inside becomes `'\''`).
pub(super) fn single_quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "'\\''"))
}

/// `value` as one shell word to print: left bare when every character is one a shell
/// does not interpret (letters, digits, `-_.:/@%+=,`), single-quoted otherwise; its
/// terminal control characters shown escaped first ([`printable`]), so what is printed
/// is harmless to show and to paste.
pub(super) fn word(value: &str) -> String {
    let shown = printable(value);
    let plain = !shown.is_empty()
        && shown
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:/@%+=,".contains(c));
    if plain { shown } else { single_quoted(&shown) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_become_one_harmless_word() {
        assert_eq!(word("01a2-b3c4"), "01a2-b3c4");
        assert_eq!(word("a b"), "'a b'");
        assert_eq!(word("x; rm -rf ~"), "'x; rm -rf ~'");
        assert_eq!(word("$(reboot)"), "'$(reboot)'");
        assert_eq!(word("it's"), "'it'\\''s'");
        assert_eq!(word(""), "''");
        let shown = word("id\u{1b}]0;owned\u{7}\nnext");
        assert!(
            !shown.contains('\u{1b}') && !shown.contains('\u{7}'),
            "{shown}"
        );
        assert!(shown.starts_with('\'') && shown.ends_with('\''), "{shown}");
    }
}
