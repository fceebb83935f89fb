//! Ports on the loopback interface.

/// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, then released),
/// for a child process that must be told its port before it starts (a balancer's
/// backends, a server restarted on the same port). Prefer binding `127.0.0.1:0` and
/// reading the address where the listener is in this process.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind 127.0.0.1:0")
        .port()
}
