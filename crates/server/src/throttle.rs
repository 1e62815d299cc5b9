//! The emulated device: a bandwidth limit shared by every worker (`--throttle-mib-s`).
//!
//! This is **emulation**, for laptops and CI, so that contention and scheduling effects show on
//! any machine: the backing store really does the I/O (into the page cache, usually far faster),
//! and then the worker waits until the request's bytes would have passed through a device of
//! `R` bytes per second. Requests are served one after the other on that virtual device, in the
//! order the workers reach it (which is the policy's dispatch order): each reservation starts
//! when the previous one ends (or now, if the device is idle) and lasts `bytes / R`. Idle time is
//! not banked, so the device never serves more than `R` bytes in any interval beyond one request.

use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// A bandwidth limit shared by the workers.
#[derive(Debug)]
pub struct Throttle {
    bytes_per_sec: f64,
    busy_until: Mutex<Instant>,
}

impl Throttle {
    /// A device of `mib_per_sec` MiB/s (must be finite and positive; checked by the config).
    pub fn new(mib_per_sec: f64) -> Throttle {
        Throttle {
            bytes_per_sec: mib_per_sec * 1024.0 * 1024.0,
            busy_until: Mutex::new(Instant::now()),
        }
    }

    /// Reserves the device for `bytes`; returns when the transfer ends on the virtual device.
    pub fn reserve(&self, bytes: u64) -> Instant {
        // The configuration keeps the rate in [0.001, 1e9] MiB/s; saturate anyway rather than
        // panic a worker.
        let len = Duration::try_from_secs_f64(bytes as f64 / self.bytes_per_sec)
            .unwrap_or(Duration::from_secs(86_400));
        let now = Instant::now();
        let mut busy = self.busy_until.lock();
        let start = (*busy).max(now);
        *busy = start + len;
        *busy
    }

    /// Sleeps until `until`.
    pub fn wait(until: Instant) {
        let now = Instant::now();
        if until > now {
            std::thread::sleep(until - now);
        }
    }
}
