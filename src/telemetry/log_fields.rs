//! How the `pretty` log format writes fields: as the default formatter does (`name=value`,
//! strings quoted), but with every control character escaped, so that no value can
//! end a line or drive the terminal.
//!
//! Clients choose many logged values (a `contextId`, a task id, a method name, a
//! caller's token claims); a newline in one would forge a log line, an ESC sequence
//! would rewrite the operator's terminal. Quoted strings already come escaped (`Debug`),
//! but values logged with `%` (`Display`) and the message itself do not, so every
//! field's text goes through [`escape_controls`]. The `json` format needs nothing: JSON
//! escapes control characters in strings.

use std::borrow::Cow;
use std::fmt::{self, Write as _};

use tracing::field::{Field, Visit};
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::FormatFields;
use tracing_subscriber::fmt::format::Writer;

/// `text` with each control character (`\n`, `\r`, `\t`, ESC, DEL, the C1 range…)
/// written as an escape (`\n`, `\r`, `\t`, `\u{1b}`); borrowed when there is none.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// The field formatter of the `pretty` format: fields separated by a space, the
/// message bare, others as `name=value` (strings quoted, as the default formatter
/// writes them), each escaped by [`escape_controls`]; the `log.*` fields of records
/// bridged from the `log` crate are left out, as the default formatter does.
#[derive(Debug, Clone, Copy, Default)]
pub struct Escaping;

impl<'w> FormatFields<'w> for Escaping {
    fn format_fields<R: RecordFields>(&self, writer: Writer<'w>, fields: R) -> fmt::Result {
        let mut visitor = Visitor {
            writer,
            first: true,
            result: Ok(()),
        };
        fields.record(&mut visitor);
        visitor.result
    }
}

struct Visitor<'w> {
    writer: Writer<'w>,
    first: bool,
    result: fmt::Result,
}

impl Visit for Visitor<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if self.result.is_err() || field.name().starts_with("log.") {
            return;
        }
        let text = format!("{value:?}");
        let text = escape_controls(&text);
        let sep = if self.first { "" } else { " " };
        self.first = false;
        self.result = if field.name() == "message" {
            write!(self.writer, "{sep}{text}")
        } else {
            write!(self.writer, "{sep}{}={text}", field.name())
        };
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape_controls("plain"), "plain");
        assert!(matches!(escape_controls("plain"), Cow::Borrowed(_)));
        assert_eq!(
            escape_controls("a\nb\r\tc\u{1b}[2Jd\u{7f}"),
            "a\\nb\\r\\tc\\u{1b}[2Jd\\u{7f}"
        );
    }

    /// A writer into a shared buffer.
    #[derive(Clone)]
    struct Sink(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Sink {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_display_field_or_a_span_field_cannot_forge_a_line() {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let sink = Sink(buf.clone());
        let subscriber = tracing_subscriber::fmt()
            .compact()
            .with_ansi(false)
            .fmt_fields(Escaping)
            .with_writer(move || sink.clone())
            .finish();
        let forged = "ctx\n2026-12-07T00:00:00Z  INFO forged line\u{1b}[31m";
        tracing::subscriber::with_default(subscriber, || {
            let span = tracing::info_span!("task", context.id = %forged);
            let _entered = span.enter();
            tracing::info!(task.id = %forged, quoted = forged, "ran {forged}");
        });
        let out = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert_eq!(out.lines().count(), 1, "{out}");
        assert!(!out.contains('\u{1b}'), "{out}");
        assert!(out.contains("context.id=ctx\\n2026"), "{out}");
        assert!(out.contains("ran ctx\\n2026"), "{out}");
        assert!(
            out.contains("quoted=\"ctx\\n2026"),
            "strings quoted as before: {out}"
        );
    }
}
