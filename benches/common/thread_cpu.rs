//! CPU time of this process's threads by role, read from `/proc/self/task` (Linux).

/// CPU seconds (user + system) used so far by this process's threads, by role: the
/// threads named `client`, `receiver`, and the rest (the gateway's runtime, the SQLite
/// connection threads, the store's writer).
#[derive(Debug, Clone, Copy, Default)]
pub struct Cpu {
    /// Every thread not named `client` or `receiver`.
    pub gateway: f64,
    /// Threads named `receiver*`.
    pub receiver: f64,
    /// Threads named `client*`.
    pub client: f64,
}

impl Cpu {
    /// The CPU seconds used so far.
    pub fn now() -> Self {
        // USER_HZ is 100 on Linux.
        const TICK: f64 = 0.01;
        let mut cpu = Cpu::default();
        let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
            return cpu;
        };
        for t in tasks.flatten() {
            let Ok(stat) = std::fs::read_to_string(t.path().join("stat")) else {
                continue;
            };
            // pid (comm) state ... : fields after the comm's closing parenthesis.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let comm = &stat[open + 1..close];
            let rest: Vec<&str> = stat[close + 2..].split(' ').collect();
            let ticks = |i: usize| {
                rest.get(i)
                    .and_then(|v| v.parse::<f64>().ok())
                    .unwrap_or(0.0)
            };
            // utime and stime are fields 14 and 15 (1-based), 11 and 12 after the comm.
            let secs = (ticks(11) + ticks(12)) * TICK;
            if comm.starts_with("client") {
                cpu.client += secs;
            } else if comm.starts_with("receiver") {
                cpu.receiver += secs;
            } else {
                cpu.gateway += secs;
            }
        }
        cpu
    }

    /// The CPU seconds used between `before` and `self`.
    pub fn since(self, before: Cpu) -> Cpu {
        Cpu {
            gateway: self.gateway - before.gateway,
            receiver: self.receiver - before.receiver,
            client: self.client - before.client,
        }
    }
}
