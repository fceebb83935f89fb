//! The `a2a-gateway` binary as a child process of a test or a benchmark.
//!
//! ```no_run
//! # use a2a_gateway::test_util::GatewayProcess;
//! # let runtime_url = "http://127.0.0.1:9/invocations";
//! // In an integration test or a bench: `env!("CARGO_BIN_EXE_a2a-gateway")`.
//! let gw = GatewayProcess::init("target/debug/a2a-gateway")
//!     .arg("serve")
//!     .listen("127.0.0.1:0")
//!     .env("A2A_GATEWAY_UPSTREAM__URL", runtime_url)
//!     .env("A2A_GATEWAY_STORE__URL", "memory:")
//!     .start();
//! println!("{} answers at {}", gw.pid(), gw.url);
//! ```

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::time::{Duration, Instant};

use super::output::{Captured, Pipe, announced_url};
use super::proc_stat;

/// How long [`GatewayBuilder::start`] waits for the URL, and [`GatewayBuilder::run`] for
/// the exit, unless [`GatewayBuilder::timeout`] says otherwise.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// How a [`GatewayProcess`] is started: the binary (and a wrapper in front of it), its
/// arguments, its environment, its working directory and config file. Made by
/// [`GatewayProcess::init`]; [`start`](Self::start) or [`run`](Self::run) it.
///
/// The child's environment is cleared: it gets `NO_COLOR=1`, this process's `PATH`, and
/// what [`env`](Self::env) adds, nothing else (the test's own environment never leaks
/// into the gateway's configuration).
#[derive(Clone, Debug)]
pub struct GatewayBuilder {
    bin: PathBuf,
    wrapper: Vec<OsString>,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    dir: Option<PathBuf>,
    config: Option<String>,
    timeout: Duration,
}

impl GatewayBuilder {
    /// Appends one argument (the subcommand first: `serve`, `demo`, `send`, ...).
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets one environment variable of the child (e.g. `A2A_GATEWAY_STORE__URL`).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Sets environment variables of the child, in order (a later one wins).
    pub fn envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        for (k, v) in vars {
            self = self.env(k, v);
        }
        self
    }

    /// `A2A_GATEWAY_SERVER__LISTEN=addr`: `127.0.0.1:0` for a port of its own (read back
    /// into [`GatewayProcess::url`]), or a fixed `127.0.0.1:PORT` (from
    /// [`free_port`](super::free_port)) where something must know it in advance.
    pub fn listen(self, addr: impl AsRef<OsStr>) -> Self {
        self.env("A2A_GATEWAY_SERVER__LISTEN", addr)
    }

    /// Runs the child in `dir` (relative paths of its config resolve there). Without it,
    /// in a fresh temporary directory that lives as long as the [`GatewayProcess`].
    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Writes `toml` to `gateway.toml` in the working directory when the child starts, and
    /// appends `--config PATH` to the arguments.
    pub fn config(mut self, toml: impl Into<String>) -> Self {
        self.config = Some(toml.into());
        self
    }

    /// How long [`start`](Self::start) waits for the line that names the URL, and
    /// [`run`](Self::run) for the exit (60 s unless set). Either panics after it, naming
    /// this timeout.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Runs the binary under a wrapper command given as one line of words (e.g. `heaptrack
    /// -o /tmp/gw` or `perf record -g --`): the wrapper is the child, the gateway its
    /// argument. An empty line is no wrapper. [`GatewayProcess::pid`] and its readings are
    /// then the wrapper's.
    pub fn wrapper(mut self, words: &str) -> Self {
        self.wrapper = words.split_whitespace().map(OsString::from).collect();
        self
    }

    /// Starts the child and waits until it says where it listens: `serve`'s "listening on
    /// URL" log line (plain or JSON), or `demo`'s "gateway: URL" banner line.
    ///
    /// Panics, with everything it wrote, when it cannot be spawned, exits first, or does
    /// not name its URL within the [`timeout`](Self::timeout).
    pub fn start(self) -> GatewayProcess {
        let dir = WorkDir::new(self.dir.clone());
        let config = self.write_config(dir.path());
        let what = self.describe();
        let mut child = self
            .command_in(dir.path(), config.as_deref())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {what}: {e}"));
        let output = Captured::default();
        let (tx, lines) = mpsc::channel();
        output.pump(
            Pipe::Stdout,
            child.stdout.take().expect("piped"),
            tx.clone(),
        );
        output.pump(Pipe::Stderr, child.stderr.take().expect("piped"), tx);
        let deadline = Instant::now() + self.timeout;
        let url = loop {
            match lines.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(line) => {
                    if let Some(url) = announced_url(&line) {
                        break url;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!(
                        "{what} did not name its URL within the start timeout ({:?}, \
                         GatewayBuilder::timeout); its output:\n{}",
                        self.timeout,
                        output.all()
                    );
                }
                Err(RecvTimeoutError::Disconnected) => {
                    let status = child.wait().map(|s| s.to_string());
                    panic!(
                        "{what} exited before it named its URL ({}); its output:\n{}",
                        status.unwrap_or_else(|e| e.to_string()),
                        output.all()
                    );
                }
            }
        };
        GatewayProcess {
            url,
            child,
            output,
            what,
            config,
            dir,
        }
    }

    /// Runs the child to its exit (a command such as `check-config`, `send`, `migrate`)
    /// and returns its status, stdout and stderr. Its pipes are read while it runs, so a
    /// long output never blocks it.
    ///
    /// Panics when it cannot be spawned or has not exited within the
    /// [`timeout`](Self::timeout) (it is killed then).
    pub fn run(self) -> Output {
        let dir = WorkDir::new(self.dir.clone());
        let config = self.write_config(dir.path());
        let what = self.describe();
        let mut child = self
            .command_in(dir.path(), config.as_deref())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot spawn {what}: {e}"));
        let (tx, rx) = mpsc::channel::<(Pipe, Vec<u8>)>();
        let readers = [
            read_all(
                Pipe::Stdout,
                child.stdout.take().expect("piped"),
                tx.clone(),
            ),
            read_all(Pipe::Stderr, child.stderr.take().expect("piped"), tx),
        ];
        let deadline = Instant::now() + self.timeout;
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for the child") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "{what} did not exit within {:?} (GatewayBuilder::timeout)",
                    self.timeout
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        for r in readers {
            let _ = r.join();
        }
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        for (pipe, bytes) in rx.try_iter() {
            match pipe {
                Pipe::Stdout => stdout = bytes,
                Pipe::Stderr => stderr = bytes,
            }
        }
        Output {
            status,
            stdout,
            stderr,
        }
    }

    /// [`run`](Self::run) on tokio's blocking pool, so the servers of an async test keep
    /// running while the command does.
    pub async fn run_async(self) -> Output {
        tokio::task::spawn_blocking(move || self.run())
            .await
            .unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()))
    }

    /// The command [`start`](Self::start) and [`run`](Self::run) spawn (wrapper, arguments,
    /// cleared environment, working directory), for a caller that wires its stdio itself
    /// (e.g. a closed pipe as stdout). It runs in this process's directory unless
    /// [`current_dir`](Self::current_dir) was set; panics when a
    /// [`config`](Self::config) was set (only `start` and `run` write it).
    pub fn command(&self) -> Command {
        assert!(
            self.config.is_none(),
            "GatewayBuilder::command does not write the config file; use start or run"
        );
        let here = PathBuf::from(".");
        self.command_in(self.dir.as_deref().unwrap_or(&here), None)
    }

    /// The binary and its arguments, for messages.
    fn describe(&self) -> String {
        let name = self
            .bin
            .file_name()
            .unwrap_or(self.bin.as_os_str())
            .to_string_lossy();
        let mut what = name.into_owned();
        for a in &self.args {
            what.push(' ');
            what.push_str(&a.to_string_lossy());
        }
        what
    }

    fn write_config(&self, dir: &Path) -> Option<PathBuf> {
        let toml = self.config.as_ref()?;
        let path = dir.join("gateway.toml");
        std::fs::write(&path, toml).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        Some(path)
    }

    fn command_in(&self, dir: &Path, config: Option<&Path>) -> Command {
        let mut cmd = match self.wrapper.split_first() {
            Some((program, words)) => {
                let mut c = Command::new(program);
                c.args(words).arg(&self.bin);
                c
            }
            None => Command::new(&self.bin),
        };
        cmd.current_dir(dir).env_clear().env("NO_COLOR", "1");
        if let Some(path) = std::env::var_os("PATH") {
            cmd.env("PATH", path);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .args(&self.args);
        if let Some(config) = config {
            cmd.arg("--config").arg(config);
        }
        cmd
    }
}

/// Reads `pipe` to its end on a thread of its own and sends the bytes to `tx`.
fn read_all(
    pipe: Pipe,
    mut from: impl std::io::Read + Send + 'static,
    tx: mpsc::Sender<(Pipe, Vec<u8>)>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = from.read_to_end(&mut bytes);
        let _ = tx.send((pipe, bytes));
    })
}

/// The working directory of a child: the caller's, or a temporary one it owns.
#[derive(Debug)]
enum WorkDir {
    Given(PathBuf),
    Temp(tempfile::TempDir),
}

impl WorkDir {
    fn new(given: Option<PathBuf>) -> WorkDir {
        match given {
            Some(dir) => WorkDir::Given(dir),
            None => WorkDir::Temp(tempfile::tempdir().expect("a temporary directory")),
        }
    }

    fn path(&self) -> &Path {
        match self {
            WorkDir::Given(dir) => dir,
            WorkDir::Temp(dir) => dir.path(),
        }
    }
}

/// A running `a2a-gateway` (`serve` or `demo`) started by [`GatewayBuilder::start`]:
/// its URL, its output so far, signals and resource readings. Dropped, it is killed
/// (SIGKILL) and reaped; when that happens while the test panics, its output is printed
/// on stderr first, so a failed test shows what the gateway said.
#[derive(Debug)]
pub struct GatewayProcess {
    /// The base URL it named, `http://127.0.0.1:PORT/` (`https://` with TLS): where
    /// JSON-RPC is posted and `.well-known/agent-card.json` is read.
    pub url: String,
    child: Child,
    output: Captured,
    what: String,
    config: Option<PathBuf>,
    dir: WorkDir,
}

impl GatewayProcess {
    /// A builder for the gateway binary at `bin` (an integration test or bench passes
    /// `env!("CARGO_BIN_EXE_a2a-gateway")`; another build's path compares two builds).
    pub fn init(bin: impl Into<PathBuf>) -> GatewayBuilder {
        GatewayBuilder {
            bin: bin.into(),
            wrapper: Vec::new(),
            args: Vec::new(),
            env: Vec::new(),
            dir: None,
            config: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The process id (the wrapper's, under [`GatewayBuilder::wrapper`]).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The working directory it runs in.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The config file [`GatewayBuilder::config`] wrote, if any.
    pub fn config_path(&self) -> Option<&Path> {
        self.config.as_deref()
    }

    /// Every line it wrote so far, stdout and stderr in the order they arrived, ANSI
    /// colours removed.
    pub fn logs(&self) -> String {
        self.output.all()
    }

    /// The lines it wrote on stdout so far (`demo`'s banner; `serve` logs on stderr).
    pub fn stdout(&self) -> String {
        self.output.stdout()
    }

    /// The lines it wrote on stderr so far (the log).
    pub fn stderr(&self) -> String {
        self.output.stderr()
    }

    /// The lines so far that carry `WARN` or `ERROR`.
    pub fn problems(&self) -> Vec<String> {
        self.logs()
            .lines()
            .filter(|l| l.contains("WARN") || l.contains("ERROR"))
            .map(str::to_owned)
            .collect()
    }

    /// [`logs`](Self::logs) as soon as `ready` holds for them, or when `within` has passed
    /// (then as they are; the caller's assertion says what was missing). The gateway
    /// writes its log from a thread of its own, a moment after it answers. Blocks the
    /// calling thread, polling every 20 ms.
    pub fn logs_when(&self, ready: impl Fn(&str) -> bool, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            let logs = self.logs();
            if ready(&logs) || Instant::now() >= deadline {
                return logs;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Sends SIGTERM (a graceful shutdown); does not wait.
    #[cfg(unix)]
    pub fn terminate(&self) {
        self.signal(rustix::process::Signal::TERM);
    }

    /// Sends SIGINT (Ctrl-C); does not wait.
    #[cfg(unix)]
    pub fn interrupt(&self) {
        self.signal(rustix::process::Signal::INT);
    }

    /// Sends SIGHUP (`serve` reads its API keys again); does not wait.
    #[cfg(unix)]
    pub fn hang_up(&self) {
        self.signal(rustix::process::Signal::HUP);
    }

    #[cfg(unix)]
    fn signal(&self, signal: rustix::process::Signal) {
        let pid = i32::try_from(self.pid())
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .expect("a child's pid");
        rustix::process::kill_process(pid, signal)
            .unwrap_or_else(|e| panic!("signal {signal:?} to {}: {e}", self.what));
    }

    /// SIGKILL, and waits until the process is gone. Panics when it had already exited
    /// with success (it was meant to be killed while running).
    pub fn kill(&mut self) -> ExitStatus {
        self.child.kill().expect("SIGKILL");
        let status = self.child.wait().expect("wait for the killed child");
        assert!(!status.success(), "killed, not exited: {status}");
        status
    }

    /// Its exit status once it exits within `limit` (zero: only whether it has already),
    /// or `None` while it still runs.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the child") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Its resident set size in KiB ([`proc_stat::rss_kib`]).
    pub fn rss_kib(&self) -> u64 {
        proc_stat::rss_kib(self.pid())
    }

    /// Its peak resident set size in KiB ([`proc_stat::peak_rss_kib`]).
    pub fn peak_rss_kib(&self) -> u64 {
        proc_stat::peak_rss_kib(self.pid())
    }

    /// Resets its peak resident set size to the current one (`5` to `clear_refs`), so
    /// [`peak_rss_kib`](Self::peak_rss_kib) measures from now on.
    pub fn reset_peak_rss(&self) {
        let _ = std::fs::write(format!("/proc/{}/clear_refs", self.pid()), "5");
    }

    /// The user plus system CPU time it has used so far ([`proc_stat::cpu_time`]; zero
    /// once it is gone).
    pub fn cpu(&self) -> Duration {
        proc_stat::cpu_time(self.pid()).unwrap_or_default()
    }

    /// Its open file descriptors ([`proc_stat::open_fds`]).
    pub fn open_fds(&self) -> usize {
        proc_stat::open_fds(self.pid())
    }
}

impl Drop for GatewayProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "---- output of {} (pid {}, {}) ----\n{}---- end of its output ----",
                self.what,
                self.pid(),
                self.url,
                self.logs()
            );
        }
    }
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;

    /// `sh -c SCRIPT` standing in for the gateway binary (`$0` and `$1` are what the
    /// builder appends: `--config PATH`).
    fn sh(script: &str) -> GatewayBuilder {
        GatewayProcess::init("/bin/sh").args(["-c", script])
    }

    fn panic_text(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
        let err = std::panic::catch_unwind(f).expect_err("panics");
        err.downcast_ref::<String>()
            .cloned()
            .or_else(|| err.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default()
    }

    #[test]
    fn start_reads_the_url_and_keeps_the_output_of_a_cleared_environment() {
        let dir = tempfile::tempdir().unwrap();
        let mut gw = sh(r#"
            echo "banner on stdout"
            echo "env: NO_COLOR=$NO_COLOR HOME=${HOME:-unset} LISTEN=$A2A_GATEWAY_SERVER__LISTEN" >&2
            echo "config $0 $(cat "$1")" >&2
            echo "pwd $(pwd)" >&2
            printf '\033[32m INFO\033[0m a2a-gateway listening on http://127.0.0.1:4711/\n' >&2
            exec sleep 30"#)
        .listen("127.0.0.1:0")
        .current_dir(dir.path())
        .config("[store]\nurl = \"memory:\"")
        .start();
        assert_eq!(gw.url, "http://127.0.0.1:4711/");
        let config = dir.path().join("gateway.toml");
        assert_eq!(gw.config_path(), Some(config.as_path()));
        assert_eq!(gw.dir(), dir.path());
        let logs = gw.logs_when(|l| l.contains("listening"), Duration::from_secs(5));
        assert!(
            logs.contains("env: NO_COLOR=1 HOME=unset LISTEN=127.0.0.1:0"),
            "{logs}"
        );
        assert!(logs.contains("config --config [store]"), "{logs}");
        assert!(
            logs.contains(&format!("pwd {}", dir.path().display())),
            "{logs}"
        );
        assert!(
            logs.contains(" INFO a2a-gateway listening on"),
            "colours removed: {logs}"
        );
        assert_eq!(gw.stdout(), "banner on stdout\n");
        assert!(!gw.stderr().contains("banner"));
        assert!(gw.alive());
        assert!(gw.rss_kib() > 0);
        assert!(gw.open_fds() > 0);
        let status = gw.kill();
        assert!(!status.success());
        assert!(!gw.alive());
    }

    #[test]
    fn a_child_that_exits_first_or_stays_silent_fails_the_start_naming_why() {
        let text = panic_text(|| {
            sh("echo 'no such store' >&2; exit 3").start();
        });
        assert!(text.contains("sh -c"), "{text}");
        assert!(text.contains("exited before it named its URL"), "{text}");
        assert!(text.contains("exit status: 3"), "{text}");
        assert!(text.contains("no such store"), "{text}");

        let text = panic_text(|| {
            sh("echo starting; exec sleep 30")
                .timeout(Duration::from_millis(300))
                .start();
        });
        assert!(text.contains("start timeout (300ms"), "{text}");
        assert!(text.contains("starting"), "{text}");
    }

    #[test]
    fn run_returns_a_long_output_and_the_status() {
        let out = sh("head -c 200000 /dev/zero | tr '\\0' x; echo done >&2; exit 2").run();
        assert_eq!(out.status.code(), Some(2));
        assert_eq!(out.stdout.len(), 200_000);
        assert_eq!(out.stderr, b"done\n");

        let text = panic_text(|| {
            sh("exec sleep 30")
                .timeout(Duration::from_millis(200))
                .run();
        });
        assert!(text.contains("did not exit within 200ms"), "{text}");
    }

    #[test]
    fn signals_reach_the_child_and_drop_kills_it() {
        let script = "trap 'echo got TERM; exit 0' TERM; \
                      echo 'listening on http://127.0.0.1:1/'; \
                      while :; do sleep 0.05; done";
        let mut gw = sh(script).start();
        gw.terminate();
        let status = gw
            .wait_exit(Duration::from_secs(10))
            .expect("exits on SIGTERM");
        assert!(status.success(), "{status}");
        assert!(
            gw.logs_when(|l| l.contains("got TERM"), Duration::from_secs(5))
                .contains("got TERM")
        );

        let gw = sh("echo 'listening on http://127.0.0.1:1/'; exec sleep 30").start();
        let pid = gw.pid();
        drop(gw);
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn a_wrapper_runs_the_binary_as_its_argument() {
        let out = GatewayProcess::init("/bin/echo")
            .wrapper("/usr/bin/env A=1")
            .arg("hello")
            .run();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "hello\n");
    }
}
