//! The output of a child process, kept as it arrives.

use std::io::{BufRead, BufReader, Read};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};

/// Which pipe a line came from.
#[derive(Clone, Copy)]
pub(crate) enum Pipe {
    Stdout,
    Stderr,
}

/// Every line a child wrote on stdout and stderr, ANSI escapes removed: one log in the
/// order the lines arrived, and one per pipe. Cheap to clone (a shared handle).
#[derive(Clone, Debug, Default)]
pub(crate) struct Captured(Arc<Mutex<Lines>>);

#[derive(Debug, Default)]
struct Lines {
    all: String,
    stdout: String,
    stderr: String,
}

impl Captured {
    /// Reads `pipe` line by line on a thread of its own until it closes, keeping each
    /// line and sending it to `tx` (sends that nobody receives are dropped).
    pub(crate) fn pump(
        &self,
        from: Pipe,
        pipe: impl Read + Send + 'static,
        tx: mpsc::Sender<String>,
    ) {
        let lines = self.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(pipe).lines().map_while(Result::ok) {
                let line = strip_ansi(&line);
                {
                    let mut l = lines.lock().unwrap_or_else(PoisonError::into_inner);
                    let Lines {
                        all,
                        stdout,
                        stderr,
                    } = &mut *l;
                    let own = match from {
                        Pipe::Stdout => stdout,
                        Pipe::Stderr => stderr,
                    };
                    for buf in [all, own] {
                        buf.push_str(&line);
                        buf.push('\n');
                    }
                }
                let _ = tx.send(line);
            }
        });
    }

    /// Every line so far, both pipes, in arrival order.
    pub(crate) fn all(&self) -> String {
        self.read(|l| l.all.clone())
    }

    /// The stdout lines so far.
    pub(crate) fn stdout(&self) -> String {
        self.read(|l| l.stdout.clone())
    }

    /// The stderr lines so far.
    pub(crate) fn stderr(&self) -> String {
        self.read(|l| l.stderr.clone())
    }

    fn read(&self, f: impl FnOnce(&Lines) -> String) -> String {
        f(&self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

/// `s` without ANSI escape sequences (colours: ESC, then up to the first letter).
pub fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The base URL a start line announces: `serve`'s "a2a-gateway listening on URL" (plain
/// or inside a JSON log line) or `demo`'s banner line "gateway: URL".
pub(crate) fn announced_url(line: &str) -> Option<String> {
    let rest = line
        .split_once("listening on ")
        .map(|(_, r)| r)
        .or_else(|| line.strip_prefix("gateway: "))?;
    let url = rest.split(|c: char| c.is_whitespace() || c == '"').next()?;
    url.starts_with("http").then(|| url.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_of_serve_demo_and_json_log_lines() {
        let plain = "2026-01-01T00:00:00Z  INFO a2a_gateway::cli::serve: a2a-gateway listening on http://127.0.0.1:4711/";
        assert_eq!(
            announced_url(plain).as_deref(),
            Some("http://127.0.0.1:4711/")
        );
        let json = r#"{"level":"INFO","fields":{"message":"a2a-gateway listening on https://127.0.0.1:4712/"}}"#;
        assert_eq!(
            announced_url(json).as_deref(),
            Some("https://127.0.0.1:4712/")
        );
        assert_eq!(
            announced_url("gateway: http://127.0.0.1:4713/").as_deref(),
            Some("http://127.0.0.1:4713/")
        );
        assert_eq!(
            announced_url("gRPC listening on its own port listen=127.0.0.1:9"),
            None
        );
        assert_eq!(announced_url("the gateway: starting"), None);
    }

    #[test]
    fn ansi_colours_are_removed() {
        assert_eq!(
            strip_ansi("\u{1b}[2m2026\u{1b}[0m \u{1b}[32m INFO\u{1b}[0m ok"),
            "2026  INFO ok"
        );
    }

    #[test]
    fn lines_are_kept_per_pipe_and_in_one_log() {
        let captured = Captured::default();
        let (tx, rx) = mpsc::channel();
        captured.pump(Pipe::Stdout, &b"one\ntwo\n"[..], tx.clone());
        for _ in 0..2 {
            rx.recv().unwrap();
        }
        captured.pump(Pipe::Stderr, &b"\x1b[31mthree\x1b[0m\n"[..], tx);
        assert_eq!(rx.recv().unwrap(), "three");
        assert_eq!(captured.stdout(), "one\ntwo\n");
        assert_eq!(captured.stderr(), "three\n");
        assert_eq!(captured.all(), "one\ntwo\nthree\n");
    }
}
