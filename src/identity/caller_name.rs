//! What a caller name may hold: the owner of tasks, from `[[server.auth.keys]] caller`,
//! `keys new --caller` or a JWT's caller claim. One rule for all three, so a name that
//! one source accepts is never refused by another, and no name can reorder or hide text
//! where it is shown (logs, `tasks list`, metrics): format characters are refused except
//! where they join visible text (ZWJ in emoji sequences, ZWNJ in Persian or Indic words,
//! the tag characters of a subdivision flag).

/// The longest caller name, in bytes of UTF-8: it is sent upstream in a header and
/// logged with every request.
pub const MAX_CALLER_BYTES: usize = 512;

/// Why `name` cannot be a caller name, as a phrase that follows the name of its source
/// ("`caller` must not be empty"); `None` when it can.
///
/// Refused: an empty or all-space name; one longer than [`MAX_CALLER_BYTES`] (512);
/// spaces before or after it; control characters (C0, DEL, C1: tabs, newlines,
/// escapes); and invisible formatting characters: Unicode's format characters (general
/// category Cf: the bidirectional controls, zero-width characters, the soft hyphen,
/// interlinear annotation marks, tag characters, ...), the line and paragraph separators
/// (U+2028, U+2029) and the blank Hangul fillers (U+115F, U+1160, U+3164, U+FFA0). Kept:
/// U+200C (ZWNJ) and U+200D (ZWJ) between two visible non-ASCII characters (`👩‍💻`, Persian
/// words), and tag characters U+E0020 to U+E007F that follow U+1F3F4 (a black flag) and end
/// with the cancel tag U+E007F (the England, Scotland and Wales flags).
pub fn caller_name_problem(name: &str) -> Option<&'static str> {
    if name.trim().is_empty() {
        Some("must not be empty")
    } else if name.len() > MAX_CALLER_BYTES {
        Some("must be at most 512 bytes long")
    } else if name.trim() != name {
        Some("must not have spaces before or after it")
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters (tabs, newlines, ...)")
    } else if has_hidden_format(name) {
        Some(
            "must not contain invisible formatting characters (bidirectional controls, zero-width characters)",
        )
    } else {
        None
    }
}

/// Whether `name` holds a format character that is not part of a joining or flag
/// sequence (see [`caller_name_problem`]).
fn has_hidden_format(name: &str) -> bool {
    let chars: Vec<char> = name.chars().collect();
    let visible = |c: Option<&char>| {
        c.is_some_and(|&c| !c.is_ascii() && !c.is_whitespace() && !is_invisible_format(c))
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if matches!(c, '\u{200c}' | '\u{200d}')
            && visible(i.checked_sub(1).and_then(|j| chars.get(j)))
            && visible(chars.get(i + 1))
        {
            i += 1;
            continue;
        }
        if c == '\u{1f3f4}' {
            // A subdivision flag: tag characters closed by the cancel tag.
            let tags = chars[i + 1..]
                .iter()
                .take_while(|&&t| ('\u{e0020}'..='\u{e007e}').contains(&t))
                .count();
            if tags > 0 && chars.get(i + 1 + tags) == Some(&'\u{e007f}') {
                i += tags + 2;
                continue;
            }
        }
        if is_invisible_format(c) {
            return true;
        }
        i += 1;
    }
    false
}

/// The invisible formatting characters [`caller_name_problem`] refuses: general
/// category Cf of Unicode 16, U+2028 and U+2029, and the Hangul fillers.
fn is_invisible_format(c: char) -> bool {
    matches!(
        c,
        '\u{00ad}'
            | '\u{0600}'..='\u{0605}'
            | '\u{061c}'
            | '\u{06dd}'
            | '\u{070f}'
            | '\u{0890}'..='\u{0891}'
            | '\u{08e2}'
            | '\u{115f}'..='\u{1160}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{3164}'
            | '\u{feff}'
            | '\u{ffa0}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
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
            "\u{2764}\u{fe0f} team",
            // 👩‍💻 (ZWJ), a Persian word with ZWNJ, the flag of England (tags).
            "dev \u{1f469}\u{200d}\u{1f4bb}",
            "\u{645}\u{6cc}\u{200c}\u{62e}\u{648}\u{627}\u{647}\u{645}",
            "team \u{1f3f4}\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e007f}",
            &"\u{e9}".repeat(256),
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
            ("te\u{e0041}am", "invisible"),
            // Joiners and tags outside their sequences.
            ("a\u{200d}b", "invisible"),
            ("\u{200d}\u{1f4bb}", "invisible"),
            ("\u{1f469}\u{200d}", "invisible"),
            ("\u{1f3f4}\u{e0067}\u{e0062}", "invisible"),
            ("a\u{fff9}b", "invisible"),
            ("a\u{2028}b", "invisible"),
            ("a\u{180e}b", "invisible"),
            ("\u{3164}", "invisible"),
            (&"x".repeat(513), "512 bytes"),
        ] {
            let problem = caller_name_problem(name).unwrap_or_else(|| panic!("{name:?}"));
            assert!(problem.contains(says), "{name:?}: {problem}");
        }
    }
}
