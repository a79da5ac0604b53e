//! Failed authentications per peer address. Each address has a one-minute window; once its
//! failures in the window reach the limit, every request from it is refused until the window
//! ends, whatever token it carries, so a guess that happens to be right is not told apart
//! from a wrong one.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The window failures are counted over.
const WINDOW: Duration = Duration::from_secs(60);
/// Addresses tracked at once; past it, expired windows are dropped first, and then a new
/// address is not tracked (each address costs a connection, so this is far out of reach).
const MAX_TRACKED: usize = 65_536;

struct Window {
    started: Instant,
    failures: u32,
}

/// Failed authentications by peer address.
pub struct AuthFailures {
    limit: u32,
    windows: Mutex<HashMap<IpAddr, Window>>,
    /// Whether any failure was ever counted: until then a request takes no lock here.
    any: AtomicBool,
}

impl AuthFailures {
    /// At most `limit` failures per address per minute.
    pub fn new(limit: u32) -> Self {
        AuthFailures {
            limit,
            windows: Mutex::new(HashMap::new()),
            any: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, Window>> {
        self.windows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How long `ip` stays refused, if it is refused now.
    pub fn blocked(&self, ip: IpAddr) -> Option<Duration> {
        if !self.any.load(Ordering::Relaxed) {
            return None;
        }
        let now = Instant::now();
        let w = self.lock();
        let w = w.get(&ip)?;
        let left = WINDOW.checked_sub(now.duration_since(w.started))?;
        (w.failures >= self.limit && !left.is_zero()).then_some(left)
    }

    /// Counts one failed authentication of `ip`.
    pub fn failed(&self, ip: IpAddr) {
        self.any.store(true, Ordering::Relaxed);
        let now = Instant::now();
        let mut windows = self.lock();
        if windows.len() >= MAX_TRACKED && !windows.contains_key(&ip) {
            windows.retain(|_, w| now.duration_since(w.started) < WINDOW);
            if windows.len() >= MAX_TRACKED {
                return;
            }
        }
        let w = windows.entry(ip).or_insert(Window {
            started: now,
            failures: 0,
        });
        if now.duration_since(w.started) >= WINDOW {
            *w = Window {
                started: now,
                failures: 0,
            };
        }
        w.failures = w.failures.saturating_add(1);
        metrics::counter!("vox_http_auth_failures_total").increment(1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_is_refused_once_its_failures_reach_the_limit() {
        let f = AuthFailures::new(3);
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        for _ in 0..2 {
            f.failed(a);
            assert_eq!(f.blocked(a), None);
        }
        f.failed(a);
        assert!(f.blocked(a).is_some_and(|d| d <= WINDOW));
        assert_eq!(f.blocked(b), None, "another address is not");
    }
}
