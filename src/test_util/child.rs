//! A child process that does not outlive its test.

use std::process::Child;

/// A child process (a peer: a Python runtime, a balancer, Prometheus) that is killed with
/// SIGKILL and reaped when the guard is dropped, also when the test panics.
#[derive(Debug)]
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
