//! What an accept loop does after an error (the daemon socket's and the gateway's).

use std::time::Duration;

/// Waits after an accept error: nothing for a connection that failed on its own, growing
/// waits (to a second) while the process is out of descriptors or memory.
#[derive(Default)]
pub struct AcceptBackoff {
    delay: Duration,
    failures: u64,
}

impl AcceptBackoff {
    /// An accept succeeded: the next error starts over.
    pub fn reset(&mut self) {
        if self.failures > 1 {
            tracing::info!(failures = self.failures, "accepting connections again");
        }
        *self = AcceptBackoff::default();
    }

    /// Waits as `e` calls for (logged once per burst).
    pub async fn wait(&mut self, e: &std::io::Error) {
        let starved = matches!(
            e.raw_os_error(),
            Some(libc::EMFILE | libc::ENFILE | libc::ENOBUFS | libc::ENOMEM)
        );
        if !starved {
            tracing::debug!("accept failed: {e}");
            return;
        }
        self.failures += 1;
        if self.failures == 1 {
            tracing::warn!("accept failed: {e}; backing off until descriptors free up");
        }
        self.delay = (self.delay * 2).clamp(Duration::from_millis(10), Duration::from_secs(1));
        tokio::time::sleep(self.delay).await;
    }
}
