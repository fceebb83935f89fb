//! What Linux's `/proc` says about a process and the machine: resident memory, CPU time,
//! open files, load. Where `/proc` does not answer (another system, a process that is
//! gone) the sizes and counts read as zero (a benchmark prints a zero instead of
//! stopping) and the CPU times as `None`.

use std::time::Duration;

/// Resident set size of process `pid` in KiB (`VmRSS` of `/proc/PID/status`).
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// Peak resident set size of process `pid` in KiB (`VmHWM`). Writing `5` to
/// `/proc/PID/clear_refs` resets it to the current size.
pub fn peak_rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmHWM:")
}

/// User plus system CPU time process `pid` has used so far, its ended threads included
/// (`/proc/PID/stat` fields 14 and 15, in clock ticks of 1/100 s: Linux's `USER_HZ`);
/// `None` when `/proc` has no such process.
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let (user, system) = cpu_ticks(pid)?;
    Some(Duration::from_millis((user + system) * 10))
}

/// User and system CPU time of process `pid` so far, each in clock ticks (1/100 s on
/// Linux; `getconf CLK_TCK`), as `/proc/PID/stat` fields 14 and 15 hold them; `None`
/// when `/proc` has no such process.
pub fn cpu_ticks(pid: u32) -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the command name, which is in parentheses and may hold spaces;
    // `rest` starts at field 3.
    let (_, rest) = stat.rsplit_once(')')?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((f.get(11)?.parse().ok()?, f.get(12)?.parse().ok()?))
}

/// Open file descriptors of process `pid` (entries of `/proc/PID/fd`).
pub fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// The soft open-file limit of this process (`Max open files` of `/proc/self/limits`).
pub fn open_file_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(0)
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` prints them (`"0.52 0.40
/// 0.31"`).
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_has_memory_files_and_cpu_time() {
        let me = std::process::id();
        assert!(rss_kib(me) > 0);
        assert!(peak_rss_kib(me) >= rss_kib(me));
        assert!(open_fds(me) >= 3, "stdin, stdout, stderr");
        assert!(open_file_limit() > 0);
        assert_eq!(loadavg().split(' ').count(), 3, "{}", loadavg());
        let spin = std::time::Instant::now();
        while cpu_time(me).expect("this process's CPU time") == Duration::ZERO {
            assert!(
                spin.elapsed() < Duration::from_secs(5),
                "no CPU time counted"
            );
        }
    }

    #[test]
    fn a_process_that_is_gone_reads_as_zero() {
        // Above the largest pid Linux hands out (2^22).
        let gone = 1 << 23;
        assert_eq!(rss_kib(gone), 0);
        assert_eq!(cpu_time(gone), None);
        assert_eq!(open_fds(gone), 0);
    }
}
