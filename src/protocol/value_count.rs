//! Counting the values of a request before it is parsed, so that what one request can
//! cost in memory is bounded by more than its size in bytes.
//!
//! A parsed JSON value takes far more memory than its text: `[0,0,…]` spends two bytes
//! of the body per element, and each element becomes a 32-byte [`serde_json::Value`]
//! (and again in every copy the request makes on its way to the store). A 10 MiB body
//! of zeros is five million values. So every binding counts the values of a request
//! here first, in one pass that allocates nothing, and refuses one that carries more
//! than [`MAX_REQUEST_VALUES`] before any value tree is built (the gRPC binding counts
//! the fields of the protobuf message the same way, `crate::transport::grpc::codec`).

use std::fmt;

/// Most values one request may carry: every JSON scalar, array and object counts one
/// (an object's keys do not count), and every field occurrence of a protobuf message
/// (each element of a repeated field, each `google.protobuf.Value`). 100,000 values
/// cost a few tens of MiB at most while the request is handled, whatever the body's
/// size; a request over it is refused with `InvalidParams` (gRPC `INVALID_ARGUMENT`).
pub const MAX_REQUEST_VALUES: usize = 100_000;

/// A request carries more values than its limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TooManyValues {
    /// The limit that was exceeded.
    pub limit: usize,
}

impl fmt::Display for TooManyValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the request carries more than {} values (JSON values or protobuf fields), \
             the gateway's limit per request (MAX_REQUEST_VALUES)",
            self.limit
        )
    }
}

impl std::error::Error for TooManyValues {}

/// Checks that the JSON text `json` holds at most `limit` values.
///
/// The count is taken on the bytes, without parsing: one for the document, plus one
/// per `,` and per `[` or `{` outside strings. For valid JSON that is the number of
/// values, except that an empty array or object counts two; it never counts fewer.
/// Invalid JSON is counted the same way and left for the parser to refuse.
///
/// # Errors
/// [`TooManyValues`] as soon as the count passes `limit`.
pub fn check_json(json: &[u8], limit: usize) -> Result<(), TooManyValues> {
    let mut count: usize = 1;
    if count > limit {
        return Err(TooManyValues { limit });
    }
    let mut in_string = false;
    let mut escaped = false;
    for &b in json {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b',' | b'[' | b'{' => {
                count += 1;
                if count > limit {
                    return Err(TooManyValues { limit });
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// The size of JSON written through it, counted as [`check_json`] counts: its bytes and
/// its values (an upper bound, as there), without keeping anything. Serialize a value
/// into it (`serde_json::to_writer`) to learn what its text would cost, allocating
/// nothing.
#[derive(Debug, Default)]
pub struct JsonSize {
    /// Bytes written so far.
    pub bytes: u64,
    /// Values counted so far (at least 1, for the document).
    pub values: usize,
    in_string: bool,
    escaped: bool,
}

impl JsonSize {
    /// The size of `value` as serde_json writes it.
    ///
    /// # Errors
    /// What serializing `value` fails with (a map with non-string keys).
    pub fn of<T: serde::Serialize + ?Sized>(value: &T) -> serde_json::Result<Self> {
        let mut size = JsonSize {
            values: 1,
            ..JsonSize::default()
        };
        serde_json::to_writer(&mut size, value)?;
        Ok(size)
    }
}

impl std::io::Write for JsonSize {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.bytes += buf.len() as u64;
        for &b in buf {
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if b == b'\\' {
                    self.escaped = true;
                } else if b == b'"' {
                    self.in_string = false;
                }
                continue;
            }
            match b {
                b'"' => self.in_string = true,
                b',' | b'[' | b'{' => self.values += 1,
                _ => {}
            }
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_size_counts_as_check_json_does() {
        for text in [
            "0",
            r#"{"a":1,"b":[true,null]}"#,
            r#"["a,b,[{", "\"],{"]"#,
            r#"{"k\\":[1,2]}"#,
        ] {
            let value: serde_json::Value = serde_json::from_str(text).unwrap();
            let size = JsonSize::of(&value).unwrap();
            assert_eq!(size.values, count(text), "{text}");
            assert_eq!(size.bytes, serde_json::to_vec(&value).unwrap().len() as u64);
        }
    }

    fn count(json: &str) -> usize {
        (0..100)
            .find(|&limit| check_json(json.as_bytes(), limit).is_ok())
            .expect("under 100 values")
    }

    #[test]
    fn counts_each_value_once_and_no_key() {
        assert_eq!(count("0"), 1);
        assert_eq!(count(r#""text""#), 1);
        assert_eq!(count("[0,0,0]"), 4);
        assert_eq!(count(r#"{"a":1,"b":[true,null]}"#), 5);
        assert_eq!(count("[[0],[0]]"), 5);
        // An empty container counts two: the count is an upper bound.
        assert_eq!(count("[]"), 2);
        assert_eq!(count("{}"), 2);
    }

    #[test]
    fn structure_inside_strings_is_not_counted() {
        assert_eq!(count(r#"["a,b,[{", "\"],{"]"#), 3);
        assert_eq!(count(r#"{"k\\":[1,2]}"#), 4);
    }

    #[test]
    fn refuses_past_the_limit_and_names_it() {
        let zeros = format!("[{}0]", "0,".repeat(200));
        assert_eq!(check_json(zeros.as_bytes(), 202), Ok(()));
        let err = check_json(zeros.as_bytes(), 201).unwrap_err();
        assert_eq!(err, TooManyValues { limit: 201 });
        assert!(err.to_string().contains("more than 201 values"), "{err}");
    }
}
