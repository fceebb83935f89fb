//! What a caller name may hold: the owner of tasks, from `[[server.auth.keys]] caller`,
//! `keys new --caller` or a JWT's caller claim. One rule for all three, so a name that
//! one source accepts is never refused by another, and no name can reorder or hide text
//! where it is shown (logs, `tasks list`, metrics), nor look like another name: invisible
//! characters are refused except inside the sequences that need them (an emoji joined with
//! ZWJ, a word of a joining script with ZWJ or ZWNJ, a subdivision flag's tags, a variation
//! selector after the character it selects for).

/// The longest caller name, in bytes of UTF-8: it is sent upstream in a header and
/// logged with every request.
pub const MAX_CALLER_BYTES: usize = 512;

/// Why `name` cannot be a caller name, as a phrase that follows the name of its source
/// ("`caller` must not be empty"); `None` when it can.
///
/// Refused: an empty or all-space name; one longer than [`MAX_CALLER_BYTES`] (512);
/// spaces before or after it; control characters (C0, DEL, C1: tabs, newlines,
/// escapes); and invisible characters (the message names the first one and its place):
/// Unicode's format characters (general category Cf: bidirectional controls, zero-width
/// characters, the soft hyphen, interlinear annotation marks, tag characters, ...), the
/// line and paragraph separators (U+2028, U+2029), the blank Hangul fillers and braille
/// blank, the combining grapheme joiner, Khmer and Mongolian invisible marks. Kept inside
/// their sequences only:
/// - U+200D (ZWJ) between two emoji (`👩‍💻`), and U+200C / U+200D between two letters of
///   a joining script (Arabic, Syriac, the Indic scripts: Persian `می‌خواهم`);
/// - U+1F3F4 followed by 1 to 6 tag letters or digits (U+E0030 to U+E0039, U+E0061 to
///   U+E007A) and the cancel tag U+E007F: the England, Scotland and Wales flags;
/// - a variation selector (U+FE00 to U+FE0F, U+E0100 to U+E01EF) right after a non-ASCII
///   visible character, or after `0`-`9`, `#`, `*` in a keycap (before U+20E3).
pub fn caller_name_problem(name: &str) -> Option<String> {
    if name.trim().is_empty() {
        Some("must not be empty".to_owned())
    } else if name.len() > MAX_CALLER_BYTES {
        Some(format!("must be at most {MAX_CALLER_BYTES} bytes long"))
    } else if name.trim() != name {
        Some("must not have spaces before or after it".to_owned())
    } else if name.chars().any(char::is_control) {
        Some("must not contain control characters (tabs, newlines, ...)".to_owned())
    } else {
        hidden_character(name).map(|(place, c)| {
            format!(
                "must not contain the invisible character U+{:04X} (character {place}): \
                 invisible formatting characters (bidirectional controls, zero-width, tag \
                 and variation characters, line separators, fillers) are refused outside \
                 emoji, flag and joining-script sequences",
                c as u32
            )
        })
    }
}

/// The first invisible character of `name` outside the sequences that need one, with its
/// 1-based place (see [`caller_name_problem`]).
fn hidden_character(name: &str) -> Option<(usize, char)> {
    // ASCII has no invisible character besides the controls refused before: the usual
    // name (and JWT `sub`) costs no copy.
    if name.is_ascii() {
        return None;
    }
    let chars: Vec<char> = name.chars().collect();
    let at = |i: Option<usize>| i.and_then(|i| chars.get(i)).copied();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let (before, after) = (at(i.checked_sub(1)), at(Some(i + 1)));
        let joined = match c {
            '\u{200d}' => {
                (before.is_some_and(is_emoji_part) && after.is_some_and(is_emoji))
                    || (before.is_some_and(is_joining_script)
                        && after.is_some_and(is_joining_script))
            }
            '\u{200c}' => {
                before.is_some_and(is_joining_script) && after.is_some_and(is_joining_script)
            }
            '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}' => before.is_some_and(|b| {
                (!b.is_ascii() && !b.is_whitespace() && !is_invisible(b) && !is_selector(b))
                    || (matches!(b, '0'..='9' | '#' | '*') && after == Some('\u{20e3}'))
            }),
            '\u{1f3f4}' => {
                let tags = chars[i + 1..]
                    .iter()
                    .take_while(
                        |&&t| matches!(t, '\u{e0030}'..='\u{e0039}' | '\u{e0061}'..='\u{e007a}'),
                    )
                    .count();
                if (1..=6).contains(&tags) && at(Some(i + 1 + tags)) == Some('\u{e007f}') {
                    i += tags + 2;
                    continue;
                }
                true
            }
            c => !is_invisible(c),
        };
        if !joined {
            return Some((i + 1, c));
        }
        i += 1;
    }
    None
}

/// A variation selector.
fn is_selector(c: char) -> bool {
    matches!(c, '\u{fe00}'..='\u{fe0f}' | '\u{e0100}'..='\u{e01ef}')
}

/// An emoji, roughly: the pictographic blocks (the ones ZWJ sequences use).
fn is_emoji(c: char) -> bool {
    matches!(
        c,
        '\u{00a9}'
            | '\u{00ae}'
            | '\u{203c}'
            | '\u{2049}'
            | '\u{2122}'
            | '\u{2139}'
            | '\u{2190}'..='\u{21ff}'
            | '\u{2300}'..='\u{23ff}'
            | '\u{2600}'..='\u{27bf}'
            | '\u{2b00}'..='\u{2bff}'
            | '\u{1f000}'..='\u{1faff}'
    )
}

/// What may stand before a ZWJ of an emoji sequence: an emoji, or the emoji
/// presentation selector after one (`🏳️‍🌈`).
fn is_emoji_part(c: char) -> bool {
    is_emoji(c) || c == '\u{fe0f}'
}

/// A character of a script whose spelling uses ZWJ / ZWNJ: Arabic (with its
/// supplements and presentation forms), Syriac, and the Indic scripts from Devanagari to
/// Sinhala.
fn is_joining_script(c: char) -> bool {
    !is_invisible(c)
        && matches!(
            c,
            '\u{0600}'..='\u{077f}' | '\u{08a0}'..='\u{08ff}' | '\u{0900}'..='\u{0dff}'
                | '\u{fb50}'..='\u{fdff}' | '\u{fe70}'..='\u{fefe}'
        )
}

/// Invisible: [`is_invisible_format`], the variation selectors (allowed only after what
/// they select for) and other characters that show nothing.
fn is_invisible(c: char) -> bool {
    is_invisible_format(c)
        || is_selector(c)
        || matches!(
            c,
            '\u{034f}' | '\u{17b4}' | '\u{17b5}' | '\u{180b}'..='\u{180f}' | '\u{2800}'
        )
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
            // 🏳️‍🌈, keycap 1️⃣, Devanagari with ZWJ after virama, a lone black flag.
            "\u{1f3f3}\u{fe0f}\u{200d}\u{1f308}",
            "team 1\u{fe0f}\u{20e3}",
            "\u{915}\u{94d}\u{200d}\u{937}",
            "\u{1f3f4} team",
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
            // Joiners between letters of scripts that do not use them (look-alikes).
            ("\u{5f20}\u{200d}\u{4f1f}", "U+200D (character 2)"),
            ("\u{5f20}\u{200c}\u{4f1f}", "U+200C"),
            ("\u{430}\u{200d}\u{431}", "U+200D"),
            // Selectors and blanks outside their sequences.
            ("te\u{fe0f}am", "U+FE0F (character 3)"),
            ("\u{fe0f}", "U+FE0F"),
            ("team\u{2764}\u{fe0f}\u{fe0f}", "U+FE0F"),
            ("te\u{34f}am", "U+034F"),
            ("\u{2800}", "U+2800"),
            // Tag text hidden behind a black flag.
            (
                "\u{1f3f4}\u{e0048}\u{e0049}\u{e007f}",
                "U+E0048 (character 2)",
            ),
            (
                "\u{1f3f4}\u{e0067}\u{e0062}\u{e0065}\u{e006e}\u{e0067}\u{e0067}\u{e0067}\u{e007f}",
                "U+E0067 (character 2)",
            ),
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
