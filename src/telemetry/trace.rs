//! W3C Trace Context (`traceparent`, <https://www.w3.org/TR/trace-context/> §3.2) across
//! the gateway: an inbound `traceparent` is continued into each upstream attempt (the
//! same trace id and flags, a fresh parent id per attempt), so the runtime's traces join
//! the caller's; without one each attempt starts a new sampled trace.

use rand::Rng;

/// A valid inbound trace context: the parts an outgoing `traceparent` keeps.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TraceParent {
    /// 32 lowercase hex digits, not all zero.
    pub trace_id: String,
    /// The caller's span: 16 lowercase hex digits, not all zero.
    pub parent_id: String,
    /// The trace flags, 2 lowercase hex digits (`01`: sampled).
    pub flags: String,
}

impl TraceParent {
    /// Parses a `traceparent` header value: version `00` exactly
    /// (`00-<trace id>-<parent id>-<flags>`), or a later version's first four fields;
    /// `None` for anything else (an all-zero id, upper-case hex, version `ff`), which
    /// the spec says to ignore.
    pub fn parse(value: &str) -> Option<Self> {
        let value = value.trim();
        let mut parts = value.split('-');
        let (version, trace, parent, flags) =
            (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
        let hex = |s: &str, n: usize| {
            s.len() == n
                && s.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        if !hex(version, 2) || version == "ff" || (version == "00" && parts.next().is_some()) {
            return None;
        }
        if !hex(trace, 32) || !hex(parent, 16) || !hex(flags, 2) {
            return None;
        }
        if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
            return None;
        }
        Some(Self {
            trace_id: trace.to_owned(),
            parent_id: parent.to_owned(),
            flags: flags.to_owned(),
        })
    }
}

/// The `traceparent` of one upstream attempt: a child of `inbound` when there is one
/// (same trace id and flags), else a new sampled trace; the parent id is fresh.
pub fn attempt_traceparent(inbound: Option<&TraceParent>) -> String {
    let mut rng = rand::rng();
    let span: u64 = rng.random_range(1..=u64::MAX);
    match inbound {
        Some(tp) => format!("00-{}-{span:016x}-{}", tp.trace_id, tp.flags),
        None => {
            let trace: u128 = rng.random_range(1..=u128::MAX);
            format!("00-{trace:032x}-{span:016x}-01")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_continues() {
        let tp =
            TraceParent::parse("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").unwrap();
        let out = attempt_traceparent(Some(&tp));
        assert!(
            out.starts_with("00-4bf92f3577b34da6a3ce929d0e0e4736-"),
            "{out}"
        );
        assert!(out.ends_with("-01"));
        assert_ne!(&out[36..52], "00f067aa0ba902b7");
        assert_eq!(out.len(), 55);
        // A later version may carry more fields.
        assert!(
            TraceParent::parse("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00-x")
                .is_some()
        );
    }

    #[test]
    fn invalid_values_are_ignored() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad}");
        }
        let fresh = attempt_traceparent(None);
        assert!(TraceParent::parse(&fresh).is_some(), "{fresh}");
    }
}
