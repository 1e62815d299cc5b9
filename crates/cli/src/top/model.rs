//! What `iosets top` shows, apart from how: the servers' latest answers, the jobs merged across
//! servers, their bandwidth history, the sort order, the scroll position, the refresh interval.
//!
//! Nothing here polls, sleeps or draws: a round of answers comes in through
//! [`Model::ingest_round`] with the time it was taken (time is an argument), keys come in as
//! [`Action`]s, and the drawing code reads [`Model::rows`] and friends. That is what lets the
//! tests build any state (a server down, a long job list, a bandwidth spike) and render it.
//!
//! Merging a job over several servers: operations, bytes, bandwidth, queued and in-service
//! requests are sums; the peers are the union of the servers' lists; the wait p99 is the
//! largest of the servers' p99s. That last one is an upper bound of the p99 over all the job's
//! requests, not the p99 itself (if no more than 1 % of each server's waits exceed M, no more
//! than 1 % of all of them do); the reports carry percentiles, not histograms, so nothing
//! tighter can be said. The priority is the one of highest precedence (control, then auto,
//! then hint); servers that disagree on it are flagged ([`JobRow::priority_differs`]).
//!
//! Bandwidth is measured by `top` itself, as the change of each job's byte counters between
//! two answers of the same server divided by the time between them, so reads and writes are
//! told apart (the server's own `bw_1s_mib_s` lumps them together). The first answer of a
//! server, and one whose counters went backwards (the job was forgotten and came back, or the
//! server restarted), give no rate.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::Duration;

use iosets_proto::{JobReport, JobsReport, RulesReport, ServerReport};
use iosets_types::PrioritySource;

const MIB: f64 = 1024.0 * 1024.0;

/// One server's answers to one round of polling: its jobs, its statistics and its rules.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    /// `iosets ctl jobs`.
    pub jobs: JobsReport,
    /// `iosets ctl stats`.
    pub stats: ServerReport,
    /// `iosets ctl rule list`.
    pub rules: RulesReport,
}

/// Whether a server answers.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Health {
    /// Not asked yet (before the first round).
    Waiting,
    /// It answered the last round.
    Up,
    /// It did not answer the last round: why.
    Down(String),
}

/// Byte counters at one time, to measure a rate against the next ones.
#[derive(Clone, Copy, Debug)]
struct Counters {
    read: u64,
    written: u64,
    at: Duration,
}

/// Bytes per second between two counter readings, read and written; none when the counters
/// went backwards or no time passed.
fn rate(prev: &Counters, now: &Counters) -> Option<(f64, f64)> {
    let dt = now.at.checked_sub(prev.at)?.as_secs_f64();
    if dt <= 0.0 {
        return None;
    }
    let r = now.read.checked_sub(prev.read)?;
    let w = now.written.checked_sub(prev.written)?;
    Some((r as f64 / dt, w as f64 / dt))
}

/// One server as `top` knows it.
#[derive(Debug)]
pub(crate) struct ServerState {
    /// The address it was given as.
    pub name: String,
    /// Whether it answers.
    pub health: Health,
    /// Its last answers (kept while it is down, but not counted in the merged rows).
    pub last: Option<Snapshot>,
    /// Each job's counters at the last answer.
    job_counters: HashMap<u64, Counters>,
    /// Each job's read and write rates, bytes/s, between its last two answers.
    job_rates: HashMap<u64, (f64, f64)>,
    /// The server's total counters at the last answer.
    counters: Option<Counters>,
    /// Its total read and write rates, bytes/s, between its last two answers.
    pub rate: Option<(f64, f64)>,
}

impl ServerState {
    fn new(name: String) -> ServerState {
        ServerState {
            name,
            health: Health::Waiting,
            last: None,
            job_counters: HashMap::new(),
            job_rates: HashMap::new(),
            counters: None,
            rate: None,
        }
    }

    fn ingest(&mut self, at: Duration, answer: Result<Snapshot, String>) {
        let snap = match answer {
            Ok(s) => s,
            Err(why) => {
                self.health = Health::Down(why);
                // Rates across an outage would average over it: start afresh when it is back.
                self.job_counters.clear();
                self.job_rates.clear();
                self.counters = None;
                self.rate = None;
                return;
            }
        };
        self.health = Health::Up;
        let mut counters = HashMap::with_capacity(snap.jobs.jobs.len());
        self.job_rates.clear();
        for j in &snap.jobs.jobs {
            let now = Counters {
                read: j.bytes_read,
                written: j.bytes_written,
                at,
            };
            if let Some(r) = self.job_counters.get(&j.job).and_then(|p| rate(p, &now)) {
                self.job_rates.insert(j.job, r);
            }
            counters.insert(j.job, now);
        }
        self.job_counters = counters;
        let now = Counters {
            read: snap.stats.bytes_read,
            written: snap.stats.bytes_written,
            at,
        };
        self.rate = self.counters.as_ref().and_then(|p| rate(p, &now));
        self.counters = Some(now);
        self.last = Some(snap);
    }

    /// Its last answers, if it is up.
    pub fn live(&self) -> Option<&Snapshot> {
        match self.health {
            Health::Up => self.last.as_ref(),
            _ => None,
        }
    }
}

/// One job, merged over the servers that answered and know it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct JobRow {
    /// The job id.
    pub job: u64,
    /// Its name, when a server knows it.
    pub name: Option<String>,
    /// Its IO-SETS set, when its priority maps to one.
    pub set: Option<i32>,
    /// The priority in force.
    pub priority: Option<f64>,
    /// Where it comes from; `None` without a priority.
    pub source: Option<PrioritySource>,
    /// Whether the servers disagree on the priority or its source.
    pub priority_differs: bool,
    /// Read bandwidth, MiB/s, summed over the servers that gave a rate; none before any did.
    pub read_mib_s: Option<f64>,
    /// Write bandwidth, MiB/s, likewise.
    pub write_mib_s: Option<f64>,
    /// Requests waiting in the queues.
    pub queued: u64,
    /// Requests being served.
    pub in_service: u64,
    /// The largest of the servers' queue-wait p99s, microseconds (an upper bound of the job's
    /// p99); none if no request of it was dispatched yet.
    pub wait_p99_us: Option<f64>,
    /// Distinct client addresses its requests came from.
    pub peers: usize,
    /// Servers that know it.
    pub servers: usize,
    /// Requests completed.
    pub ops: u64,
    /// Its queue waits split by cause, summed over the servers (`iosets ctl why`).
    pub waits: iosets_proto::WaitCausesReport,
}

/// Precedence of a priority source, the higher winning when servers disagree: the order of
/// [`PrioritySource`]'s variants (control, auto, hint), then no source.
fn source_rank(s: Option<PrioritySource>) -> u8 {
    s.map_or(0, |s| 3 - s as u8)
}

impl JobRow {
    fn new(j: &JobReport) -> JobRow {
        JobRow {
            job: j.job,
            name: None,
            set: j.set,
            priority: j.priority,
            source: j.priority_source,
            priority_differs: false,
            read_mib_s: None,
            write_mib_s: None,
            queued: 0,
            in_service: 0,
            wait_p99_us: None,
            peers: 0,
            servers: 0,
            ops: 0,
            waits: iosets_proto::WaitCausesReport::default(),
        }
    }

    /// Adds one server's line for the job, with its rates if that server gave some.
    fn add(&mut self, j: &JobReport, rates: Option<(f64, f64)>) {
        if self.servers > 0 && (j.priority != self.priority || j.priority_source != self.source) {
            self.priority_differs = true;
            if source_rank(j.priority_source) > source_rank(self.source) {
                self.priority = j.priority;
                self.source = j.priority_source;
                self.set = j.set;
            }
        }
        self.servers += 1;
        if self.name.is_none() {
            self.name.clone_from(&j.name);
        }
        self.ops += j.ops;
        self.queued += j.queued;
        self.in_service += j.in_service;
        if let Some((r, w)) = rates {
            *self.read_mib_s.get_or_insert(0.0) += r / MIB;
            *self.write_mib_s.get_or_insert(0.0) += w / MIB;
        }
        self.waits.merge(&j.wait_causes);
        if j.queue_wait.count > 0 {
            let p = self.wait_p99_us.unwrap_or(0.0);
            self.wait_p99_us = Some(p.max(j.queue_wait.p99_us));
        }
    }

    /// The cause it waited on most and its fraction of the wait, if it waited at all.
    pub fn waited_on(&self) -> Option<(&'static str, f64)> {
        let (name, c) = self.waits.dominant()?;
        Some((name, c.ns as f64 / self.waits.wait_ns.max(1) as f64))
    }

    /// Read plus write bandwidth, MiB/s, if known.
    pub fn total_mib_s(&self) -> Option<f64> {
        match (self.read_mib_s, self.write_mib_s) {
            (None, None) => None,
            (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
        }
    }
}

/// One quota rule, merged by name over the servers that answered.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RuleRow {
    /// Its name.
    pub name: String,
    /// What it matches (on the first server that has it).
    pub matcher: String,
    /// Its limits (likewise).
    pub limits: String,
    /// Service threads it may hold, summed over the servers.
    pub threads: Option<u64>,
    /// Requests in service under it.
    pub in_service: u64,
    /// Requests it holds back.
    pub held: u64,
    /// Distinct jobs with requests admitted or held.
    pub jobs: usize,
    /// Seconds its admitted requests waited for a thread, summed over the servers.
    pub held_threads_s: f64,
    /// Seconds they were held by a rate, summed over the servers.
    pub held_rate_s: f64,
    /// The job it held most over the last minute (summed over the servers) and its seconds.
    pub top_1m: Option<(u64, f64)>,
    /// Servers that have it.
    pub servers: usize,
    /// Whether the servers' rules of this name match or limit differently.
    pub differs: bool,
}

/// A column of the jobs table. To add one (say, a wait cause), add a variant here, to
/// [`Column::ALL`], a field to [`JobRow`] filled in [`JobRow::add`], and its cell in
/// `view::cell`; sorting and the plain-text frames follow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Column {
    /// The job id.
    Job,
    /// The IO-SETS set.
    Set,
    /// The priority.
    Priority,
    /// Where the priority comes from.
    Source,
    /// Read MiB/s.
    Read,
    /// Write MiB/s.
    Write,
    /// The sparkline of read+write bandwidth (not sortable).
    Trend,
    /// Queued requests.
    Queued,
    /// Requests in service.
    InService,
    /// Queue-wait p99.
    WaitP99,
    /// The cause it waited on most, with its share of the wait.
    WaitedOn,
    /// Client addresses.
    Peers,
}

impl Column {
    /// Every column, in display order.
    pub const ALL: [Column; 12] = [
        Column::Job,
        Column::Set,
        Column::Priority,
        Column::Source,
        Column::Read,
        Column::Write,
        Column::Trend,
        Column::Queued,
        Column::InService,
        Column::WaitP99,
        Column::WaitedOn,
        Column::Peers,
    ];

    /// Whether `s` may sort by it.
    pub fn sortable(self) -> bool {
        self != Column::Trend
    }

    /// Its heading.
    pub fn title(self) -> &'static str {
        match self {
            Column::Job => "JOB",
            Column::Set => "SET",
            Column::Priority => "PRIORITY",
            Column::Source => "SOURCE",
            Column::Read => "READ MiB/s",
            Column::Write => "WRITE MiB/s",
            Column::Trend => "R+W TREND",
            Column::Queued => "QUEUED",
            Column::InService => "IN SVC",
            Column::WaitP99 => "WAIT P99",
            Column::WaitedOn => "WAITED ON",
            Column::Peers => "PEERS",
        }
    }

    /// Whether its natural order is ascending (ids, sets, names) rather than largest first
    /// (priorities, bandwidth, queues, waits).
    fn ascending(self) -> bool {
        matches!(self, Column::Job | Column::Set | Column::Source)
    }

    /// `a` against `b` by this column in its natural order; missing values last.
    fn compare(self, a: &JobRow, b: &JobRow) -> std::cmp::Ordering {
        use std::cmp::Ordering;
        fn opt<T: PartialOrd>(a: Option<T>, b: Option<T>, asc: bool) -> Ordering {
            match (a, b) {
                (Some(x), Some(y)) => {
                    let o = x.partial_cmp(&y).unwrap_or(Ordering::Equal);
                    if asc {
                        o
                    } else {
                        o.reverse()
                    }
                }
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        }
        let asc = self.ascending();
        match self {
            Column::Job => a.job.cmp(&b.job),
            Column::Set => opt(a.set, b.set, asc),
            Column::Priority => opt(a.priority, b.priority, asc),
            Column::Source => source_rank(b.source).cmp(&source_rank(a.source)),
            Column::Read => opt(a.read_mib_s, b.read_mib_s, asc),
            Column::Write => opt(a.write_mib_s, b.write_mib_s, asc),
            Column::Trend => Ordering::Equal,
            Column::Queued => b.queued.cmp(&a.queued),
            Column::InService => b.in_service.cmp(&a.in_service),
            Column::WaitP99 => opt(a.wait_p99_us, b.wait_p99_us, asc),
            Column::WaitedOn => opt(
                a.waited_on().map(|(n, _)| n),
                b.waited_on().map(|(n, _)| n),
                true,
            ),
            Column::Peers => b.peers.cmp(&a.peers),
        }
    }
}

/// What a key asks of the model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Sort by the next sortable column.
    NextSort,
    /// Reverse the sort order.
    ReverseSort,
    /// Stop or resume polling.
    TogglePause,
    /// A longer refresh interval.
    Slower,
    /// A shorter refresh interval.
    Faster,
    /// One row up.
    Up,
    /// One row down.
    Down,
    /// A page up.
    PageUp,
    /// A page down.
    PageDown,
}

/// The refresh intervals `+` and `-` step through, seconds.
pub(crate) const INTERVAL_STEPS: [f64; 9] = [0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0];

/// Everything `iosets top` shows.
#[derive(Debug)]
pub(crate) struct Model {
    /// The servers, in the order given.
    pub servers: Vec<ServerState>,
    /// Each job's read+write bandwidth, MiB/s, one value per round that measured it, oldest
    /// first, at most `history_len` values.
    history: HashMap<u64, VecDeque<f64>>,
    /// How many bandwidth values a sparkline keeps.
    pub history_len: usize,
    /// The merged jobs, sorted.
    rows: Vec<JobRow>,
    /// The merged rules, in rank order.
    rules: Vec<RuleRow>,
    /// The sort column.
    pub sort: Column,
    /// Whether the sort order is reversed.
    pub reversed: bool,
    /// The first row shown.
    pub scroll: usize,
    /// Rows in a page (set by the drawing code from the screen's height).
    pub page: usize,
    /// Seconds between rounds.
    pub interval_s: f64,
    /// Whether polling is paused.
    pub paused: bool,
    /// When the last round was taken.
    pub last_round: Option<Duration>,
    /// Rounds taken.
    pub rounds: u64,
    /// A line for the user (e.g. why `+` did nothing), cleared by the next key.
    pub note: Option<String>,
}

impl Model {
    /// A model of `servers`, refreshed every `interval_s` seconds, keeping `history_len`
    /// bandwidth values per job.
    pub fn new(servers: &[String], interval_s: f64, history_len: usize) -> Model {
        Model {
            servers: servers.iter().cloned().map(ServerState::new).collect(),
            history: HashMap::new(),
            history_len,
            rows: Vec::new(),
            rules: Vec::new(),
            sort: Column::Job,
            reversed: false,
            scroll: 0,
            page: 10,
            interval_s,
            paused: false,
            last_round: None,
            rounds: 0,
            note: None,
        }
    }

    /// Takes in one round of answers, one per server in order (an error: the server did not
    /// answer, and why), taken at `at` since `top` started; merges the jobs and rules again
    /// and extends the bandwidth history.
    ///
    /// # Panics
    /// If `answers` does not have one entry per server (a bug of the caller).
    pub fn ingest_round(&mut self, at: Duration, answers: Vec<Result<Snapshot, String>>) {
        assert_eq!(answers.len(), self.servers.len(), "one answer per server");
        for (s, a) in self.servers.iter_mut().zip(answers) {
            s.ingest(at, a);
        }
        self.merge();
        let live: HashSet<u64> = self.rows.iter().map(|r| r.job).collect();
        self.history.retain(|j, _| live.contains(j));
        for r in &self.rows {
            if let Some(bw) = r.total_mib_s() {
                let h = self.history.entry(r.job).or_default();
                h.push_back(bw);
                while h.len() > self.history_len {
                    h.pop_front();
                }
            }
        }
        self.last_round = Some(at);
        self.rounds += 1;
    }

    fn merge(&mut self) {
        let mut jobs: BTreeMap<u64, JobRow> = BTreeMap::new();
        let mut peers: HashMap<u64, HashSet<&str>> = HashMap::new();
        let mut rules: Vec<RuleRow> = Vec::new();
        let mut rule_jobs: HashMap<String, HashSet<u64>> = HashMap::new();
        let mut rule_top: HashMap<String, BTreeMap<u64, f64>> = HashMap::new();
        for s in &self.servers {
            let Some(snap) = s.live() else { continue };
            for j in &snap.jobs.jobs {
                jobs.entry(j.job)
                    .or_insert_with(|| JobRow::new(j))
                    .add(j, s.job_rates.get(&j.job).copied());
                peers
                    .entry(j.job)
                    .or_default()
                    .extend(j.peers.iter().map(String::as_str));
            }
            for r in &snap.rules.rules {
                rule_jobs.entry(r.name.clone()).or_default().extend(&r.jobs);
                let top = rule_top.entry(r.name.clone()).or_default();
                for h in &r.top.jobs_1m {
                    *top.entry(h.id).or_default() += h.threads_s + h.rate_s;
                }
                match rules.iter_mut().find(|x| x.name == r.name) {
                    Some(x) => {
                        x.differs |= x.matcher != r.matcher || x.limits != r.limits;
                        x.threads = match (x.threads, r.threads) {
                            (None, None) => None,
                            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
                        };
                        x.in_service += r.in_service;
                        x.held += r.held;
                        x.held_threads_s += r.held_threads_s;
                        x.held_rate_s += r.held_rate_s;
                        x.servers += 1;
                    }
                    None => rules.push(RuleRow {
                        name: r.name.clone(),
                        matcher: r.matcher.clone(),
                        limits: r.limits.clone(),
                        threads: r.threads,
                        in_service: r.in_service,
                        held: r.held,
                        jobs: 0,
                        held_threads_s: r.held_threads_s,
                        held_rate_s: r.held_rate_s,
                        top_1m: None,
                        servers: 1,
                        differs: false,
                    }),
                }
            }
        }
        for (job, row) in &mut jobs {
            row.peers = peers.get(job).map_or(0, HashSet::len);
        }
        for r in &mut rules {
            r.jobs = rule_jobs.get(&r.name).map_or(0, HashSet::len);
            r.top_1m = rule_top.get(&r.name).and_then(|t| {
                t.iter()
                    .max_by(|a, b| a.1.total_cmp(b.1).then(b.0.cmp(a.0)))
                    .map(|(&j, &s)| (j, s))
            });
        }
        self.rows = jobs.into_values().collect();
        self.rules = rules;
        self.sort_rows();
    }

    fn sort_rows(&mut self) {
        let (col, rev) = (self.sort, self.reversed);
        self.rows.sort_by(|a, b| {
            let o = col.compare(a, b).then(a.job.cmp(&b.job));
            if rev {
                o.reverse()
            } else {
                o
            }
        });
    }

    /// The merged jobs, in the current order.
    pub fn rows(&self) -> &[JobRow] {
        &self.rows
    }

    /// The merged quota rules, in the first server's rank order.
    pub fn rules(&self) -> &[RuleRow] {
        &self.rules
    }

    /// Job `job`'s bandwidth history, oldest first.
    pub fn history(&self, job: u64) -> Vec<f64> {
        self.history
            .get(&job)
            .map(|h| h.iter().copied().collect())
            .unwrap_or_default()
    }

    /// The largest bandwidth value in any job's history, MiB/s (the sparklines' common scale).
    pub fn history_max(&self) -> f64 {
        self.history.values().flatten().copied().fold(0.0, f64::max)
    }

    /// Servers up and servers not up (down or not answered yet).
    pub fn up_down(&self) -> (usize, usize) {
        let up = self
            .servers
            .iter()
            .filter(|s| s.health == Health::Up)
            .count();
        (up, self.servers.len() - up)
    }

    /// Carries out a key's action.
    pub fn act(&mut self, action: Action) {
        self.note = None;
        let last = self.rows.len().saturating_sub(1);
        match action {
            Action::NextSort => {
                let at = Column::ALL
                    .iter()
                    .position(|c| *c == self.sort)
                    .unwrap_or(0);
                self.sort = Column::ALL
                    .iter()
                    .cycle()
                    .skip(at + 1)
                    .find(|c| c.sortable())
                    .copied()
                    .unwrap_or(Column::Job);
                self.reversed = false;
                self.sort_rows();
            }
            Action::ReverseSort => {
                self.reversed = !self.reversed;
                self.sort_rows();
            }
            Action::TogglePause => self.paused = !self.paused,
            Action::Slower => match INTERVAL_STEPS.iter().find(|s| **s > self.interval_s) {
                Some(s) => self.interval_s = *s,
                None => self.note = Some(format!("{} s is the longest interval", self.interval_s)),
            },
            Action::Faster => match INTERVAL_STEPS.iter().rev().find(|s| **s < self.interval_s) {
                Some(s) => self.interval_s = *s,
                None => self.note = Some(format!("{} s is the shortest interval", self.interval_s)),
            },
            Action::Up => self.scroll = self.scroll.saturating_sub(1),
            Action::Down => self.scroll = (self.scroll + 1).min(last),
            Action::PageUp => self.scroll = self.scroll.saturating_sub(self.page.max(1)),
            Action::PageDown => self.scroll = (self.scroll + self.page.max(1)).min(last),
        }
    }

    /// The policies the live servers run, each with how many run it, most common first.
    pub fn policies(&self) -> Vec<(String, usize)> {
        let mut count: BTreeMap<&str, usize> = BTreeMap::new();
        for s in &self.servers {
            if let Some(snap) = s.live() {
                *count.entry(snap.stats.policy.as_str()).or_default() += 1;
            }
        }
        let mut v: Vec<(String, usize)> = count.into_iter().map(|(p, n)| (p.into(), n)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// Totals over the live servers: queued, in service, connections, and read and write
    /// MiB/s (none before two answers).
    pub fn totals(&self) -> Totals {
        let mut t = Totals::default();
        for s in &self.servers {
            let Some(snap) = s.live() else { continue };
            t.queued += snap.stats.queued;
            t.in_service += snap.stats.in_service;
            t.connections += snap.stats.connections;
            if let Some((r, w)) = s.rate {
                *t.read_mib_s.get_or_insert(0.0) += r / MIB;
                *t.write_mib_s.get_or_insert(0.0) += w / MIB;
            }
        }
        t
    }
}

/// Totals over the servers that answered.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Totals {
    /// Requests queued.
    pub queued: u64,
    /// Requests in service.
    pub in_service: u64,
    /// Client connections.
    pub connections: u64,
    /// Read MiB/s.
    pub read_mib_s: Option<f64>,
    /// Write MiB/s.
    pub write_mib_s: Option<f64>,
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Reports as servers send them, for the tests of the model and of the drawing.
    use super::*;
    use iosets_proto::{JobRuleReport, RuleReport, WaitReport};

    /// A job line: `job` with `priority` from `source`, counters and queue depths.
    pub fn job(
        job: u64,
        priority: Option<f64>,
        source: &str,
        read: u64,
        written: u64,
    ) -> JobReport {
        JobReport {
            job,
            name: None,
            priority,
            priority_source: source.parse().ok(),
            set: priority.map(|p| (-p.log10()).round() as i32),
            period_s: None,
            ops: (read + written) / 4096,
            bytes_read: read,
            bytes_written: written,
            failed: 0,
            bw_1s_mib_s: 0.0,
            bw_10s_mib_s: 0.0,
            queued: 0,
            in_service: 0,
            queue_wait: WaitReport::default(),
            wait_causes: Default::default(),
            rules: Vec::<JobRuleReport>::new(),
            peers: Vec::new(),
        }
    }

    /// A server's answers with `jobs` and `rules`.
    pub fn snapshot(policy: &str, jobs: Vec<JobReport>, rules: Vec<RuleReport>) -> Snapshot {
        let (read, written) = jobs
            .iter()
            .fold((0, 0), |(r, w), j| (r + j.bytes_read, w + j.bytes_written));
        Snapshot {
            stats: ServerReport {
                policy: policy.into(),
                uptime_s: 10.0,
                workers: 4,
                throttle_mib_s: None,
                connections: 1,
                frames: 0,
                bad_frames: 0,
                errors: 0,
                submitted: 0,
                inserted: 0,
                merged: 0,
                dispatched: 0,
                completed: 0,
                failed: 0,
                withdrawn: 0,
                queued: jobs.iter().map(|j| j.queued).sum(),
                in_service: jobs.iter().map(|j| j.in_service).sum(),
                balanced: true,
                switches: 0,
                bytes_read: read,
                bytes_written: written,
                jobs_known: jobs.len() as u64,
                job_book_bytes: 0,
                jobs_forgotten: 0,
                jobs_evicted: 0,
                hints: String::new(),
            },
            jobs: JobsReport {
                policy: policy.into(),
                jobs,
            },
            rules: RulesReport {
                threads: 4,
                job_share_pct: 100.0,
                lend: true,
                keep_ms: 0.0,
                rules,
            },
        }
    }

    /// A rule line.
    pub fn rule(name: &str, matcher: &str, in_service: u64, held: u64, jobs: &[u64]) -> RuleReport {
        RuleReport {
            rank: 0,
            name: name.into(),
            matcher: matcher.into(),
            limits: "threads=50%".into(),
            threads: Some(2),
            job_ceiling: Some(2),
            admitted: in_service,
            in_service,
            held,
            peak_in_service: in_service,
            matched_total: 0,
            admitted_total: 0,
            lent_total: 0,
            reserved_total: 0,
            kept_total: 0,
            completed_total: 0,
            jobs: jobs.to_vec(),
            held_threads_s: 0.0,
            held_rate_s: 0.0,
            top: Default::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::{job, rule, snapshot};
    use super::*;

    const M: u64 = 1 << 20;

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn rates_come_from_counter_deltas_and_split_reads_from_writes() {
        let mut m = Model::new(&["a".into()], 1.0, 10);
        m.ingest_round(
            secs(1),
            vec![Ok(snapshot(
                "wfq",
                vec![job(1, None, "none", 0, 0)],
                vec![],
            ))],
        );
        assert_eq!(m.rows()[0].read_mib_s, None, "one answer gives no rate");
        m.ingest_round(
            secs(3),
            vec![Ok(snapshot(
                "wfq",
                vec![job(1, None, "none", 4 * M, 10 * M)],
                vec![],
            ))],
        );
        let r = &m.rows()[0];
        assert_eq!((r.read_mib_s, r.write_mib_s), (Some(2.0), Some(5.0)));
        assert_eq!(m.history(1), vec![7.0]);
        assert_eq!(m.totals().write_mib_s, Some(5.0));
    }

    #[test]
    fn counters_going_backwards_give_no_rate_instead_of_a_huge_one() {
        let mut m = Model::new(&["a".into()], 1.0, 10);
        let at = |m: &mut Model, t, w| {
            m.ingest_round(
                secs(t),
                vec![Ok(snapshot(
                    "wfq",
                    vec![job(1, None, "none", 0, w)],
                    vec![],
                ))],
            )
        };
        at(&mut m, 1, 100 * M);
        at(&mut m, 2, M);
        assert_eq!(m.rows()[0].write_mib_s, None);
        at(&mut m, 3, 2 * M);
        assert_eq!(m.rows()[0].write_mib_s, Some(1.0));
    }

    #[test]
    fn jobs_merge_across_servers() {
        let mut m = Model::new(&["a".into(), "b".into()], 1.0, 10);
        let mut a = job(7, Some(0.01), "hint", 0, 0);
        a.queued = 3;
        a.in_service = 1;
        a.queue_wait.count = 10;
        a.queue_wait.p99_us = 500.0;
        a.peers = vec!["10.0.0.1:1".into(), "10.0.0.2:1".into()];
        let mut b = job(7, Some(1.0), "control", 0, 0);
        b.queued = 4;
        b.queue_wait.count = 5;
        b.queue_wait.p99_us = 900.0;
        b.peers = vec!["10.0.0.2:1".into()];
        m.ingest_round(
            secs(1),
            vec![
                Ok(snapshot("wfq", vec![a], vec![rule("r", "*", 1, 2, &[7])])),
                Ok(snapshot(
                    "wfq",
                    vec![b],
                    vec![rule("r", "*", 3, 0, &[7, 8])],
                )),
            ],
        );
        let r = &m.rows()[0];
        assert_eq!((r.queued, r.in_service, r.servers, r.peers), (7, 1, 2, 2));
        assert_eq!(r.wait_p99_us, Some(900.0), "the larger p99: an upper bound");
        assert_eq!(
            (r.priority, r.source),
            (Some(1.0), Some(PrioritySource::Control))
        );
        assert!(r.priority_differs);
        let rr = &m.rules()[0];
        assert_eq!((rr.in_service, rr.held, rr.jobs, rr.servers), (4, 2, 2, 2));
        assert_eq!(rr.threads, Some(4));
    }

    #[test]
    fn a_down_server_drops_out_of_the_sums_and_comes_back() {
        let mut m = Model::new(&["a".into(), "b".into()], 1.0, 10);
        let mut j = job(1, None, "none", 0, 0);
        j.queued = 2;
        let round = |up: bool| {
            vec![
                Ok(snapshot("wfq", vec![j.clone()], vec![])),
                if up {
                    Ok(snapshot("fifo", vec![j.clone()], vec![]))
                } else {
                    Err("no response within 2s".into())
                },
            ]
        };
        m.ingest_round(secs(1), round(true));
        assert_eq!(m.rows()[0].queued, 4);
        m.ingest_round(secs(2), round(false));
        assert_eq!(m.rows()[0].queued, 2);
        assert_eq!(m.up_down(), (1, 1));
        assert_eq!(
            m.servers[1].health,
            Health::Down("no response within 2s".into())
        );
        assert_eq!(m.policies(), vec![("wfq".to_string(), 1)]);
        m.ingest_round(secs(3), round(true));
        assert_eq!((m.rows()[0].queued, m.up_down()), (4, (2, 0)));
    }

    #[test]
    fn sorting_cycles_columns_in_their_natural_order_and_reverses() {
        let mut m = Model::new(&["a".into()], 1.0, 10);
        let mut jobs = vec![
            job(1, Some(0.01), "hint", 0, 0),
            job(2, Some(1.0), "control", 0, 0),
            job(3, None, "none", 0, 0),
        ];
        jobs[0].queued = 5;
        m.ingest_round(secs(1), vec![Ok(snapshot("wfq", jobs, vec![]))]);
        let order = |m: &Model| m.rows().iter().map(|r| r.job).collect::<Vec<_>>();
        assert_eq!(order(&m), [1, 2, 3]);
        m.act(Action::NextSort);
        assert_eq!((m.sort, order(&m)), (Column::Set, vec![2, 1, 3]));
        m.act(Action::NextSort);
        assert_eq!((m.sort, order(&m)), (Column::Priority, vec![2, 1, 3]));
        m.act(Action::ReverseSort);
        assert_eq!(order(&m), [3, 1, 2]);
        for _ in 0..4 {
            m.act(Action::NextSort);
        }
        assert_eq!(m.sort, Column::Queued, "the trend column is skipped");
        assert_eq!(order(&m), [1, 2, 3]);
        for _ in 0..5 {
            m.act(Action::NextSort);
        }
        assert_eq!(m.sort, Column::Job, "the cycle wraps");
    }

    #[test]
    fn history_is_bounded_and_forgets_gone_jobs() {
        let mut m = Model::new(&["a".into()], 1.0, 3);
        for t in 0..6 {
            m.ingest_round(
                secs(t),
                vec![Ok(snapshot(
                    "wfq",
                    vec![job(1, None, "none", 0, t * t * M)],
                    vec![],
                ))],
            );
        }
        assert_eq!(m.history(1), vec![5.0, 7.0, 9.0]);
        assert_eq!(m.history_max(), 9.0);
        m.ingest_round(secs(7), vec![Ok(snapshot("wfq", vec![], vec![]))]);
        assert!(m.history(1).is_empty());
    }

    #[test]
    fn interval_keys_step_and_say_so_at_the_ends() {
        let mut m = Model::new(&["a".into()], 1.5, 3);
        m.act(Action::Slower);
        assert_eq!(m.interval_s, 2.0);
        m.act(Action::Faster);
        m.act(Action::Faster);
        assert_eq!(m.interval_s, 0.5);
        m.act(Action::Faster);
        m.act(Action::Faster);
        assert_eq!(m.interval_s, 0.25);
        assert!(m.note.as_deref().unwrap().contains("shortest"));
    }

    #[test]
    fn scrolling_stays_within_the_rows() {
        let mut m = Model::new(&["a".into()], 1.0, 3);
        let jobs = (1..=5).map(|j| job(j, None, "none", 0, 0)).collect();
        m.ingest_round(secs(1), vec![Ok(snapshot("wfq", jobs, vec![]))]);
        m.page = 3;
        m.act(Action::PageDown);
        m.act(Action::PageDown);
        assert_eq!(m.scroll, 4);
        m.act(Action::Up);
        m.act(Action::PageUp);
        assert_eq!(m.scroll, 0);
    }
}
