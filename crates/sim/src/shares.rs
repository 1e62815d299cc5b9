//! Byte shares over a sliding window of dispatched requests (seed 000's method).
//!
//! Seed 000 checks weighted fair queuing by walking the list of requests in the order they were
//! served: for each run of `window_n` consecutive requests (the window slides by one request), it
//! computes the share of the window's bytes that each queue received. While every queue is
//! backlogged, those shares should match the weights; when a queue drains, its share goes to the
//! others in proportion to their weights. [`window_shares`] does exactly that on a replay's records,
//! with the queue chosen by job, class or priority ([`ShareKey`]).
//!
//! A queue is *backlogged* at a dispatch when it holds a request that has arrived and is not yet
//! dispatched (the request being dispatched counts for its own queue). A window is backlogged when
//! every queue is backlogged at every one of its dispatches. A queue *drains* at its last dispatch.
//! With every request queued at time zero (seed 000's setting) a queue is backlogged exactly until it
//! drains; with arrivals over time a queue can also be empty for a while in between.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use iosets_types::{ClassId, JobId, Nanos, Priority};

use crate::replay::RequestRecord;
use crate::SimError;

/// What a queue is, for share accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum ShareKey {
    /// One queue per job.
    #[default]
    Job,
    /// One queue per class (requests without a class form one queue).
    Class,
    /// One queue per priority hint (requests without a priority form one queue).
    Priority,
}

impl ShareKey {
    /// The name used on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            ShareKey::Job => "job",
            ShareKey::Class => "class",
            ShareKey::Priority => "priority",
        }
    }
}

impl fmt::Display for ShareKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ShareKey {
    type Err = String;
    fn from_str(s: &str) -> Result<ShareKey, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "job" => Ok(ShareKey::Job),
            "class" => Ok(ShareKey::Class),
            "priority" => Ok(ShareKey::Priority),
            other => Err(format!(
                "unknown share key {other:?}: expected job, class or priority"
            )),
        }
    }
}

/// One queue under a [`ShareKey`].
///
/// Ordered by kind, then by id or priority value (no class / no priority first).
#[derive(Clone, Copy, Debug)]
pub enum QueueKey {
    /// A job's queue.
    Job(JobId),
    /// A class's queue; `None` for requests without a class.
    Class(Option<ClassId>),
    /// A priority's queue; `None` for requests without a priority.
    Priority(Option<Priority>),
}

impl QueueKey {
    /// The queue `record` belongs to under `key`.
    pub fn of(record: &RequestRecord, key: ShareKey) -> QueueKey {
        match key {
            ShareKey::Job => QueueKey::Job(record.job),
            ShareKey::Class => QueueKey::Class(record.class),
            ShareKey::Priority => QueueKey::Priority(record.priority),
        }
    }

    /// A name without spaces, for CSV headers: `job_3`, `class_none`, `priority_0.1`.
    pub fn column(&self) -> String {
        self.to_string().replace(' ', "_")
    }

    fn rank(&self) -> (u8, u64) {
        match *self {
            QueueKey::Job(j) => (0, j.0),
            QueueKey::Class(None) => (1, 0),
            QueueKey::Class(Some(c)) => (2, c.0),
            QueueKey::Priority(None) => (3, 0),
            QueueKey::Priority(Some(p)) => (4, p.key()),
        }
    }
}

impl PartialEq for QueueKey {
    fn eq(&self, other: &QueueKey) -> bool {
        self.rank() == other.rank()
    }
}

impl Eq for QueueKey {}

impl PartialOrd for QueueKey {
    fn partial_cmp(&self, other: &QueueKey) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for QueueKey {
    fn cmp(&self, other: &QueueKey) -> Ordering {
        self.rank().cmp(&other.rank())
    }
}

impl Hash for QueueKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.rank().hash(state);
    }
}

impl fmt::Display for QueueKey {
    /// `job 3`, `class 2`, `class none`, `priority 0.1`, `priority none`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QueueKey::Job(j) => write!(f, "job {j}"),
            QueueKey::Class(Some(c)) => write!(f, "class {c}"),
            QueueKey::Class(None) => f.write_str("class none"),
            QueueKey::Priority(Some(p)) => write!(f, "priority {p}"),
            QueueKey::Priority(None) => f.write_str("priority none"),
        }
    }
}

/// A queue's totals and when it drained.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QueueDrain {
    /// The queue.
    pub queue: QueueKey,
    /// Requests it had.
    pub requests: usize,
    /// Bytes it had.
    pub bytes: u64,
    /// Dispatch index of its last request (it was empty from then on).
    pub drain_index: usize,
    /// Dispatch time of its last request.
    pub drain_time: Nanos,
    /// Bytes it received in dispatches at which every queue was backlogged.
    pub busy_bytes: u64,
}

/// The shares of one window.
#[derive(Clone, Debug, PartialEq)]
pub struct Window {
    /// Dispatch index of the window's first request.
    pub start: usize,
    /// Dispatch index one past its last request (`end - start` = the window size).
    pub end: usize,
    /// Dispatch time of its last request.
    pub time: Nanos,
    /// Share of the window's bytes of each queue, in the order of [`WindowShares::queues`]
    /// (fractions summing to 1; all 0 if the window holds no bytes).
    pub shares: Vec<f64>,
    /// Every queue was backlogged at every dispatch of the window.
    pub all_backlogged: bool,
}

/// Sliding-window shares of a replay; see the [module docs](self).
#[derive(Clone, Debug, PartialEq)]
pub struct WindowShares {
    /// How queues were keyed.
    pub key: ShareKey,
    /// Requests per window.
    pub window: usize,
    /// Every queue, in [`QueueKey`] order, with its totals and drain point.
    pub queues: Vec<QueueDrain>,
    /// One window per start index `0..=n - window` (none if fewer than `window` requests).
    pub windows: Vec<Window>,
    /// Dispatches at which every queue was backlogged.
    pub busy_dispatches: usize,
}

/// Mean, min and max share of one queue over the backlogged windows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BacklogShare {
    /// The queue.
    pub queue: QueueKey,
    /// Number of windows in which all queues were backlogged.
    pub windows: usize,
    /// Mean share over those windows (`None` if there are none).
    pub mean: Option<f64>,
    /// Smallest share over them.
    pub min: Option<f64>,
    /// Largest share over them.
    pub max: Option<f64>,
    /// The queue's share of the bytes dispatched while all queues were backlogged (independent of
    /// the window size; `None` if there were no such dispatches or they moved no bytes).
    pub busy_share: Option<f64>,
}

impl WindowShares {
    /// Position of `queue` in [`WindowShares::queues`] and in each window's shares.
    pub fn position(&self, queue: QueueKey) -> Option<usize> {
        self.queues.iter().position(|q| q.queue == queue)
    }

    /// For each queue, its share over the windows where every queue was still backlogged.
    pub fn backlogged(&self) -> Vec<BacklogShare> {
        let busy: Vec<&Window> = self.windows.iter().filter(|w| w.all_backlogged).collect();
        let busy_total: u64 = self.queues.iter().map(|q| q.busy_bytes).sum();
        self.queues
            .iter()
            .enumerate()
            .map(|(i, q)| {
                let vals = busy.iter().map(|w| w.shares[i]);
                let n = busy.len();
                BacklogShare {
                    queue: q.queue,
                    windows: n,
                    mean: (n > 0).then(|| vals.clone().sum::<f64>() / n as f64),
                    min: vals.clone().min_by(f64::total_cmp),
                    max: vals.max_by(f64::total_cmp),
                    busy_share: (busy_total > 0).then(|| q.busy_bytes as f64 / busy_total as f64),
                }
            })
            .collect()
    }
}

/// Seed 000's sliding-window shares of `records` (in dispatch order, as in
/// [`crate::replay::ReplayResult::records`]; they are sorted by `order` first if not).
///
/// # Errors
/// [`SimError::ZeroWindow`] if `window_n` is 0.
pub fn window_shares(
    records: &[RequestRecord],
    window_n: usize,
    key: ShareKey,
) -> Result<WindowShares, SimError> {
    if window_n == 0 {
        return Err(SimError::ZeroWindow);
    }
    let mut sorted: Vec<&RequestRecord> = records.iter().collect();
    sorted.sort_by_key(|r| r.order);
    let n = sorted.len();

    let mut keys: Vec<QueueKey> = sorted.iter().map(|r| QueueKey::of(r, key)).collect();
    let queue_of = keys.clone();
    keys.sort();
    keys.dedup();
    let q_of: Vec<usize> = queue_of
        .iter()
        .map(|k| keys.binary_search(k).expect("key listed"))
        .collect();
    let nq = keys.len();

    // Prefix sums of bytes per queue: prefix[i * nq + q] = bytes of q in dispatches [0, i).
    let mut prefix = vec![0u64; (n + 1) * nq];
    for (i, r) in sorted.iter().enumerate() {
        let (head, tail) = prefix.split_at_mut((i + 1) * nq);
        tail[..nq].copy_from_slice(&head[i * nq..]);
        tail[q_of[i]] += r.bytes;
    }

    // Backlog at each dispatch: arrived by then and not dispatched before it.
    let mut arrivals: Vec<Vec<Nanos>> = vec![Vec::new(); nq];
    for (i, r) in sorted.iter().enumerate() {
        arrivals[q_of[i]].push(r.arrival);
    }
    for a in &mut arrivals {
        a.sort();
    }
    let mut dispatched = vec![0usize; nq];
    // not_busy_prefix[i] = dispatches in [0, i) at which some queue was not backlogged.
    let mut not_busy_prefix = vec![0usize; n + 1];
    let mut busy_bytes = vec![0u64; nq];
    for (i, r) in sorted.iter().enumerate() {
        let all = (0..nq).all(|q| {
            let arrived = arrivals[q].partition_point(|&t| t <= r.dispatch);
            arrived > dispatched[q]
        });
        if all {
            busy_bytes[q_of[i]] += r.bytes;
        }
        not_busy_prefix[i + 1] = not_busy_prefix[i] + usize::from(!all);
        dispatched[q_of[i]] += 1;
    }

    let mut queues: Vec<QueueDrain> = keys
        .iter()
        .enumerate()
        .map(|(q, &queue)| QueueDrain {
            queue,
            requests: 0,
            bytes: prefix[n * nq + q],
            drain_index: 0,
            drain_time: Nanos::ZERO,
            busy_bytes: busy_bytes[q],
        })
        .collect();
    for (i, r) in sorted.iter().enumerate() {
        let q = &mut queues[q_of[i]];
        q.requests += 1;
        q.drain_index = i;
        q.drain_time = r.dispatch;
    }

    let windows = (0..(n + 1).saturating_sub(window_n))
        .map(|start| {
            let end = start + window_n;
            let bytes: Vec<u64> = (0..nq)
                .map(|q| prefix[end * nq + q] - prefix[start * nq + q])
                .collect();
            let total: u64 = bytes.iter().sum();
            let shares = bytes
                .iter()
                .map(|&b| {
                    if total > 0 {
                        b as f64 / total as f64
                    } else {
                        0.0
                    }
                })
                .collect();
            Window {
                start,
                end,
                time: sorted[end - 1].dispatch,
                shares,
                all_backlogged: not_busy_prefix[end] == not_busy_prefix[start],
            }
        })
        .collect();

    Ok(WindowShares {
        key,
        window: window_n,
        queues,
        windows,
        busy_dispatches: n - not_busy_prefix[n],
    })
}
