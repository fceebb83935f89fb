//! The SigV4 canonical request of a request of the shape the gateway sends (an `http` or
//! `https` URL whose path and query are plain RFC 3986 characters, headers already
//! chosen and visible ASCII, a body of bytes), written directly into one string:
//! what [`signer`](super::signer) hashes on its fast path instead of handing the request
//! to `aws_sigv4::http_request::sign`. Every rule here is the crate's (with its default
//! `SigningSettings`), and `tests/sigv4_signer_props.rs` checks the Authorization header
//! that results against the crate's for random requests:
//!
//! - the path: an empty path is `/`; when it holds `.` or `//`, dot segments and empty
//!   segments are removed (RFC 3986 §5.2.4, a trailing `/` kept); then every byte but
//!   unreserved characters and `/` is percent-encoded again (so `%3A` becomes `%253A`);
//! - the query: decoded as `application/x-www-form-urlencoded` pairs, each name and
//!   value percent-encoded (all but unreserved characters), sorted by name then value,
//!   `name=value` joined by `&`;
//! - the headers: lowercase names sorted (a repeated name once, its values in order
//!   joined by `,`), each value with leading and trailing spaces removed and runs of
//!   spaces made one; then the `;`-joined names and the body's SHA-256 (hex).
//!
//! Time stamps ([`Stamp`]) are formatted here too (UTC, proleptic Gregorian).

use std::borrow::Cow;
use std::time::{SystemTime, UNIX_EPOCH};

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// What is percent-encoded in a query name or value: all but RFC 3986 unreserved.
const QUERY: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');
/// What is percent-encoded (again) in the path: as [`QUERY`], `/` kept.
const PATH: &AsciiSet = &QUERY.remove(b'/');

/// Whether the path and query of `url` are of the shape this module canonicalises: only
/// RFC 3986 unreserved characters, sub-delimiters, `%`, `:`, `@`, `/` and `?` (what the
/// gateway's URLs hold, the runtime ARN being percent-encoded in them). Anything else
/// goes to the crate's signer, which also decides whether it can be signed at all.
pub fn applies(url: &url::Url) -> bool {
    let plain = |b: u8| b.is_ascii_alphanumeric() || b"-._~%!$&'()*+,;=:@/?".contains(&b);
    url.path().bytes().all(plain) && url.query().unwrap_or_default().bytes().all(plain)
}

/// The moment a request is signed at, as SigV4 writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// `YYYYMMDDTHHMMSSZ` (ASCII).
    text: [u8; 16],
}

impl Stamp {
    /// `time` in UTC, or `None` before 1970 or after 9999 (left to the crate).
    pub fn new(time: SystemTime) -> Option<Self> {
        let secs = time.duration_since(UNIX_EPOCH).ok()?.as_secs();
        let (year, month, day) = civil_from_days(secs / 86_400);
        if year > 9999 {
            return None;
        }
        let of_day = secs % 86_400;
        let mut text = [0u8; 16];
        let mut put = |at: usize, width: usize, mut n: u64| {
            for i in (at..at + width).rev() {
                text[i] = b'0' + (n % 10) as u8;
                n /= 10;
            }
        };
        put(0, 4, year);
        put(4, 2, month);
        put(6, 2, day);
        put(9, 2, of_day / 3600);
        put(11, 2, of_day / 60 % 60);
        put(13, 2, of_day % 60);
        text[8] = b'T';
        text[15] = b'Z';
        Some(Self { text })
    }

    /// `YYYYMMDDTHHMMSSZ`, the `X-Amz-Date` header.
    pub fn date_time(&self) -> &str {
        std::str::from_utf8(&self.text).expect("ASCII digits")
    }

    /// `YYYYMMDD`, the credential scope's date.
    pub fn date(&self) -> &str {
        &self.date_time()[..8]
    }
}

/// Year, month (1-12) and day (1-31) of the `days`-th day after 1970-01-01 (Howard
/// Hinnant's `civil_from_days`, unsigned: `days` is never before the epoch here).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The canonical request and its signed-headers list.
#[derive(Debug)]
pub struct Canonical {
    /// The whole canonical request, ready to hash.
    pub request: String,
    /// The `;`-joined signed header names (`SignedHeaders=` of the Authorization).
    pub signed_headers: String,
}

/// The canonical request of a request with `method` and `url` (of the shape
/// [`applies`] accepts), whose signed headers are `headers` (lowercase names, visible
/// ASCII values, any order; `host`, `x-amz-date` and the session token included) and
/// whose body's SHA-256 is `body_sha256` (lowercase hex).
pub fn request(
    method: &str,
    url: &url::Url,
    headers: &mut [(&str, &str)],
    body_sha256: &str,
) -> Canonical {
    let mut out = String::with_capacity(256 + body_sha256.len());
    out.push_str(method);
    out.push('\n');
    for part in utf8_percent_encode(&normalize_path(url.path()), PATH) {
        out.push_str(part);
    }
    out.push('\n');
    write_query(&mut out, url.query().unwrap_or_default());
    out.push('\n');
    // Stable: the values of a repeated name stay in their order.
    headers.sort_by(|a, b| a.0.cmp(b.0));
    let mut signed_headers = String::with_capacity(128);
    let mut previous: Option<&str> = None;
    for (name, value) in headers.iter() {
        if previous == Some(*name) {
            out.push(',');
        } else {
            if previous.is_some() {
                out.push('\n');
                signed_headers.push(';');
            }
            out.push_str(name);
            out.push(':');
            signed_headers.push_str(name);
            previous = Some(*name);
        }
        out.push_str(&trim_spaces(value));
    }
    if previous.is_some() {
        out.push('\n');
    }
    out.push('\n');
    out.push_str(&signed_headers);
    out.push('\n');
    out.push_str(body_sha256);
    Canonical {
        request: out,
        signed_headers,
    }
}

/// `path` absolute, without dot segments or empty segments when it holds any.
fn normalize_path(path: &str) -> Cow<'_, str> {
    if path.is_empty() {
        return Cow::Borrowed("/");
    }
    let path: Cow<'_, str> = if path.starts_with('/') {
        Cow::Borrowed(path)
    } else {
        Cow::Owned(format!("/{path}"))
    };
    if !path.contains('.') && !path.contains("//") {
        return path;
    }
    let mut kept: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                kept.pop();
            }
            other => kept.push(other),
        }
    }
    let mut out = String::with_capacity(path.len());
    for segment in &kept {
        out.push('/');
        out.push_str(segment);
    }
    let directory = ["/", "/.", "/./", "/..", "/../"]
        .iter()
        .any(|end| path.ends_with(end));
    if out.is_empty() || directory {
        out.push('/');
    }
    Cow::Owned(out)
}

/// Appends the canonical form of `query` (see the module's documentation).
fn write_query(out: &mut String, query: &str) {
    if query.is_empty() {
        return;
    }
    let mut pairs: Vec<(String, String)> = form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| {
            (
                utf8_percent_encode(&k, QUERY).to_string(),
                utf8_percent_encode(&v, QUERY).to_string(),
            )
        })
        .collect();
    pairs.sort();
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
}

/// `value` without leading or trailing spaces and with each run of spaces made one
/// (spaces only: tabs stay).
fn trim_spaces(value: &str) -> Cow<'_, str> {
    let value = value.trim_matches(' ');
    if !value.contains("  ") {
        return Cow::Borrowed(value);
    }
    let mut out = String::with_capacity(value.len());
    let mut last_space = false;
    for c in value.chars() {
        if c == ' ' && last_space {
            continue;
        }
        last_space = c == ' ';
        out.push(c);
    }
    Cow::Owned(out)
}

/// `bytes` as lowercase hex.
pub fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 15)]));
    }
    out
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn stamps_are_utc_calendar_dates() {
        let at = |secs| Stamp::new(UNIX_EPOCH + Duration::from_secs(secs)).unwrap();
        assert_eq!(at(0).date_time(), "19700101T000000Z");
        assert_eq!(at(1_440_938_160).date_time(), "20150830T123600Z");
        assert_eq!(at(951_782_400).date_time(), "20000229T000000Z");
        assert_eq!(at(4_107_542_399).date_time(), "21000228T235959Z");
        assert_eq!(at(4_107_542_400).date(), "21000301");
    }

    #[test]
    fn paths_lose_dot_and_empty_segments() {
        for (path, normal) in [
            ("", "/"),
            ("/", "/"),
            ("/a//b", "/a/b"),
            ("/a/./b/../c", "/a/c"),
            ("/a/b/.", "/a/b/"),
            ("/..", "/"),
            ("/a.b/c", "/a.b/c"),
            ("/a/", "/a/"),
        ] {
            assert_eq!(normalize_path(path), normal, "{path}");
        }
    }

    #[test]
    fn header_values_keep_one_space_per_run() {
        assert_eq!(trim_spaces("  a   b c  "), "a b c");
        assert_eq!(trim_spaces("a\t\tb"), "a\t\tb");
    }
}
