//! Small text helpers of the upstream side's messages.

use std::time::Duration;

/// Human form of a limit: `900 s`, `250 ms`.
pub fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 && d.as_secs() > 0 {
        format!("{} s", d.as_secs())
    } else {
        format!("{} ms", d.as_millis())
    }
}
