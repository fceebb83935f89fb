//! Out of file descriptors (EMFILE): failed accepts back off, are logged once per spell and
//! counted in `a2a_accept_errors_total`, and the server serves again once descriptors free.
//! Alone in its own test binary because it lowers the process's open-file limit.

#![cfg(target_os = "linux")]

use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Log lines written by the test subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn counter(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.trim().parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

fn highest_open_fd() -> i32 {
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .max()
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn accept_errors_back_off_and_are_logged_once_per_spell() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::INFO)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    let metrics = a2a_gateway::ops::install_metrics().expect("the recorder");

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/healthz", get(|| async { "ok\n" }));
    tokio::spawn(a2a_gateway::server::serve(
        listener,
        app,
        futures::future::pending(),
    ));
    // Client sockets made while descriptors are still available; connecting needs none.
    let sockets: Vec<_> = (0..4)
        .map(|_| tokio::net::TcpSocket::new_v4().unwrap())
        .collect();

    // Use up every descriptor below a lowered soft limit.
    let saved = getrlimit(Resource::Nofile);
    let limit = u64::try_from(highest_open_fd()).unwrap() + 8;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(limit),
            maximum: saved.maximum,
        },
    )
    .unwrap();
    let mut fillers = Vec::new();
    while let Ok(f) = std::fs::File::open("/dev/null") {
        fillers.push(f);
        assert!(fillers.len() < 10_000);
    }

    let mut clients = Vec::new();
    for s in sockets {
        clients.push(s.connect(addr).await.unwrap());
    }
    // The server keeps failing to accept them (EMFILE) for a while.
    for _ in 0..200 {
        if counter(&metrics.render(), "a2a_accept_errors_total") >= 10 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let errors = counter(&metrics.render(), "a2a_accept_errors_total");

    // Descriptors free: the pending connections are accepted and served.
    drop(fillers);
    setrlimit(Resource::Nofile, saved).unwrap();
    let mut client = clients.pop().unwrap();
    client
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut reply = String::new();
    tokio::time::timeout(Duration::from_secs(10), client.read_to_string(&mut reply))
        .await
        .expect("served after descriptors freed")
        .unwrap();
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");

    assert!(errors >= 10, "only {errors} accept errors counted");
    let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    let failed = text.matches("accept failed").count();
    assert_eq!(
        failed, 1,
        "{errors} accept errors, logged {failed} times:\n{text}"
    );
    assert_eq!(
        text.matches("accepting connections again").count(),
        1,
        "{text}"
    );
}
