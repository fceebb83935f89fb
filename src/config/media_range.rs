//! Media types and ranges as `[agent]` names them (`default_input_modes`, a skill's
//! `input_modes`): the rule of what a range is, shared by config validation and the
//! handler's input-mode check.

/// Reads a media type or range: its essence as lower-case `(type, subtype)`.
///
/// # Errors
/// A description when it is not `type/subtype` with tokens on both sides, or uses
/// `*` anywhere but as the whole subtype (or as `*/*`).
pub fn parse_media_range(s: &str) -> Result<(String, String), String> {
    let essence = s
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let token = |t: &str| {
        !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+*".contains(&b))
    };
    let Some((ty, sub)) = essence.split_once('/') else {
        return Err(format!("{s:?} is not a media type (type/subtype)"));
    };
    if !token(ty) || !token(sub) {
        return Err(format!("{s:?} is not a media type (type/subtype)"));
    }
    let star_ok =
        (ty == "*" && sub == "*") || (!ty.contains('*') && (sub == "*" || !sub.contains('*')));
    if !star_ok {
        return Err(format!(
            "{s:?}: `*` may only be the whole subtype (`image/*`) or `*/*`"
        ));
    }
    Ok((ty.to_owned(), sub.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_are_validated() {
        for ok in [
            "text/plain",
            "*/*",
            "image/*",
            "application/vnd.a+json; q=1",
        ] {
            assert!(parse_media_range(ok).is_ok(), "{ok}");
        }
        for bad in [
            "text",
            "*/plain",
            "te*t/plain",
            "image/pn*",
            "/",
            "a b/c",
            "",
        ] {
            assert!(parse_media_range(bad).is_err(), "{bad}");
        }
    }
}
