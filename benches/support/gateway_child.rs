//! The release `a2a-gateway serve` as a child process of a benchmark: started with a
//! cleared environment plus the given `A2A_GATEWAY_*` variables, listening on
//! `127.0.0.1:0` (its URL read from the "listening on" line), killed on drop. Its
//! resident memory and CPU time are read from `/proc/<pid>/status` and `/proc/<pid>/stat`
//! (Linux), so the figures do not depend on what else shares the machine.
//! `BENCH_WRAP` (e.g. `heaptrack -o /tmp/gw`) runs the gateway under that command for
//! profiling; its figures are then the wrapper's, not the gateway's.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_a2a-gateway");
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running `a2a-gateway serve`.
pub struct GatewayChild {
    child: Child,
    /// Its base URL, `http://127.0.0.1:PORT/`.
    pub url: String,
    /// Lines it logged at warn or error after the start (stdout and stderr).
    pub problems: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Drop for GatewayChild {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl GatewayChild {
    /// Starts this build's `serve` with exactly `env` (plus `PATH`) and waits for it to
    /// listen. Panics with its output when it does not start within a minute.
    pub fn start(dir: &std::path::Path, env: &[(&str, String)]) -> GatewayChild {
        Self::start_bin(BIN, dir, env)
    }

    /// [`GatewayChild::start`] with the gateway binary at `bin` (another build measured
    /// side by side).
    pub fn start_bin(bin: &str, dir: &std::path::Path, env: &[(&str, String)]) -> GatewayChild {
        let wrap = std::env::var("BENCH_WRAP").unwrap_or_default();
        let mut wrap = wrap.split_whitespace();
        let mut cmd = match wrap.next() {
            Some(program) => {
                let mut c = Command::new(program);
                c.args(wrap).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        cmd.current_dir(dir)
            .env_clear()
            .env("NO_COLOR", "1")
            .env("A2A_GATEWAY_SERVER__LISTEN", "127.0.0.1:0")
            .arg("serve")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("spawn a2a-gateway serve");
        let problems = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel::<String>();
        for r in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let (tx, problems) = (tx.clone(), problems.clone());
            std::thread::spawn(move || {
                for line in BufReader::new(r).lines().map_while(Result::ok) {
                    if line.contains("WARN") || line.contains("ERROR") {
                        problems.lock().unwrap().push(line.clone());
                    }
                    let _ = tx.send(line);
                }
            });
        }
        let deadline = Instant::now() + START_TIMEOUT;
        let mut seen = String::new();
        let url = loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Some(url) = line
                        .split_once("listening on ")
                        .and_then(|(_, r)| r.split_whitespace().next())
                        .filter(|u| u.starts_with("http"))
                    {
                        break url.to_owned();
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(_) => {
                    let _ = child.kill();
                    panic!("a2a-gateway serve did not start:\n{seen}");
                }
            }
        };
        // Keep draining its output so it never blocks on a full pipe.
        std::thread::spawn(move || while rx.recv().is_ok() {});
        GatewayChild {
            child,
            url,
            problems,
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident set size in KiB (`VmRSS` of `/proc/<pid>/status`).
    pub fn rss_kib(&self) -> u64 {
        status_kib(self.pid(), "VmRSS:")
    }

    /// Peak resident set size in KiB (`VmHWM`).
    pub fn peak_rss_kib(&self) -> u64 {
        status_kib(self.pid(), "VmHWM:")
    }

    /// User plus system CPU time used so far (`/proc/<pid>/stat` fields 14 and 15).
    pub fn cpu(&self) -> Duration {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // Fields after the parenthesized command name, which may hold spaces.
        let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
        let f: Vec<&str> = rest.split_whitespace().collect();
        let ticks: u64 = f.get(11).and_then(|s| s.parse().ok()).unwrap_or(0)
            + f.get(12).and_then(|s| s.parse().ok()).unwrap_or(0);
        // USER_HZ is 100 on Linux.
        Duration::from_millis(ticks * 10)
    }

    /// Open file descriptors of the process.
    pub fn open_fds(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/fd", self.pid()))
            .map(|d| d.count())
            .unwrap_or(0)
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

fn status_kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The soft open-file limit of this process (`/proc/self/limits`).
pub fn open_file_limit() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        .unwrap_or(0)
}

/// The 1, 5 and 15 minute load averages, as `/proc/loadavg` prints them.
pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}
