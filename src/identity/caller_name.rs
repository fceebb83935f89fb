//! What a caller name may hold: the owner of tasks, from `[[server.auth.keys]] caller`,
//! `keys new --caller` or a JWT's caller claim. One rule for all three, so a name that
//! one source accepts is never refused by another, and no name can reorder or hide text
//! where it is shown (logs, `tasks list`, metrics).

/// Why `name` cannot be a caller name, as a phrase that follows the name of its source
/// ("`caller` must not be empty"); `None` when it can.
///
/// Refused: an empty or all-space name; spaces before or after it; control characters
/// (C0, DEL, C1: tabs, newlines, escapes); and invisible formatting characters — the
/// bidirectional controls (U+061C, U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069),
/// zero-width characters (U+200B to U+200D, U+2060, U+FEFF) and the soft hyphen (U+00AD).
pub fn caller_name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("must not be empty")
    } else if name.trim() != name {
        Some("must not have spaces before or after it")
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters (tabs, newlines, ...)")
    } else if name.chars().any(is_invisible_format) {
        Some(
            "must not contain invisible formatting characters (bidirectional controls, zero-width characters)",
        )
    } else {
        None
    }
}

/// The invisible formatting characters [`caller_name_problem`] refuses.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{061c}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2069}'
            | '\u{feff}'
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_of_any_script_are_callers() {
        for name in [
            "team-a",
            "o'brien \"the\" $HOME",
            "ünï",
            "チーム",
            "a b",
            "svc@corp",
        ] {
            assert_eq!(caller_name_problem(name), None, "{name:?}");
        }
    }

    #[test]
    fn empty_padded_control_and_invisible_names_are_refused() {
        for (name, says) in [
            ("", "empty"),
            ("   ", "empty"),
            (" a", "spaces"),
            ("a\n", "spaces"),
            ("a\tb", "control"),
            ("a\u{7f}", "control"),
            ("a\u{9b}b", "control"),
            ("adm\u{202e}nimda", "invisible"),
            ("a\u{200b}b", "invisible"),
            ("a\u{2066}b", "invisible"),
            ("a\u{feff}", "invisible"),
        ] {
            let problem = caller_name_problem(name).unwrap_or_else(|| panic!("{name:?}"));
            assert!(problem.contains(says), "{name:?}: {problem}");
        }
    }
}
