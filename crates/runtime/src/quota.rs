//! Quota rules: which requests a rule governs, and the limits it puts on them (seed 003's thread
//! quotas, Lustre NRS TBF's rates, Ceph mClock's reservations and weights).
//!
//! # What it is
//! A [`QuotaConfig`] is an ordered list of [`RuleSpec`]s plus two settings. A request falls under
//! the **first** rule whose [`Match`] it satisfies (TBF's order among rules); a request no rule
//! matches is not governed at all. A rule may give:
//! - **`threads_pct = R`**: the rule's requests hold at most `n_R = ⌊N·R/100⌋` (at least 1) of the
//!   scheduler's `N` service threads at once (seed 003: `n_A = n_S · R_A / 100`). Inside the rule
//!   the jobs share those threads fairly (the job holding the fewest goes next), and one job holds
//!   at most `⌊n_R · job_share_pct/100⌋` (at least 1) even when the others are idle (seed 003's
//!   "50 %:50 %, up to 90 % each if available").
//! - **`rate_ops` / `rate_bytes`**: a token bucket **per job** under the rule (TBF gives each
//!   class of a rule its own bucket), in operations or bytes per second. By default a rate
//!   **lends idle capacity**: a job over its rate still goes when nothing else is waiting and a
//!   thread is free. `strict = true` makes it a hard cap.
//! - **`reserve_ops`**: each job under the rule is served first, ahead of every weight, while it
//!   has had fewer than this many operations per second (mClock's reservation phase).
//! - **`weight`**: among rules competing for free threads, a rule's jobs get threads in
//!   proportion to its weight (default 1; mClock's proportional phase).
//!
//! The settings: `job_share_pct` (default 90), `lend` (default false): with `lend`, threads
//! a rule leaves idle are lent to the requests waiting over their rule's quota (and over soft
//! rates), so no thread idles while a request waits; a lent thread comes back when its request
//! completes (nothing is preempted); and `keep_ms` (default 0, off): a thread freed by a job
//! with nothing else waiting is kept that long for the job's next request while other jobs of
//! its rule wait, so that a closed-loop client keeps its share of the threads.
//!
//! # Text forms
//! A match is `*` (everything) or `key=value` terms joined by spaces or `&`, all of which must
//! hold; a value is one item or a set, `{a b}` or `a,b`, any of which may hold (Lustre's
//! `jobid={a b}&opcode={ost_write}`). Keys: `job` (an id, or a job's name as the mount names
//! jobs, `job={dd.1000 myjob}`, hashed as [`JobId::of_name`] hashes it), `uid` or `user`, `gid`
//! or `group` (a number is an id; a name is looked up through the system's name service when
//! the rule is read, so `user=alice` is kept as her uid), `account` (a job's Slurm account, as
//! the control plane told it: [`crate::Scheduler::set_job_info`]), `client` (an address or a
//! CIDR, IPv4 or IPv6), `class` (`data-read`, `data-write`, `meta`).
//!
//! # What it is not
//! Not the mechanism: the scheduler's gate ([`crate::Scheduler::set_quota`]) applies the rules.
//!
//! # Across servers
//! Rates and reservations are **job-wide**: a client tells each server how much of the job other
//! servers served since its last request there ([`Origin::elsewhere_ops`], dmClock's `delta`),
//! and the server charges it to the job's buckets and reservation tag, with no central
//! controller. Thread quotas and weights are per server: threads are a server's own.

use std::collections::BTreeSet;
use std::fmt;
use std::net::IpAddr;

use iosets_types::JobId;

use crate::RuntimeError;

/// The class of an operation (`iosets_types::OpClass`). Rules name `data-read`, `data-write`
/// and `meta`; a rule's `meta` also governs fsync (`data-fsync`), as it did before fsync was a
/// class of its own in the metrics ([`Match::matches`]).
pub use iosets_types::OpClass;

/// A job's name held inline (at most [`iosets_types::MAX_JOB_NAME_LEN`] bytes), so that an
/// [`Origin`] stays `Copy`: what `job=` patterns match.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct JobName {
    len: u8,
    bytes: [u8; iosets_types::MAX_JOB_NAME_LEN],
}

impl JobName {
    /// `name`, if it is 1 to [`iosets_types::MAX_JOB_NAME_LEN`] bytes.
    pub fn new(name: &str) -> Option<JobName> {
        let n = name.len();
        if n == 0 || n > iosets_types::MAX_JOB_NAME_LEN {
            return None;
        }
        let mut bytes = [0; iosets_types::MAX_JOB_NAME_LEN];
        bytes[..n].copy_from_slice(name.as_bytes());
        Some(JobName {
            len: n as u8,
            bytes,
        })
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        std::str::from_utf8(&self.bytes[..usize::from(self.len)]).unwrap_or("")
    }
}

impl fmt::Debug for JobName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

/// Who sent a request, beyond what the request carries (its job and operation): what rules may
/// match on. A field the caller does not know is `None`, and a rule that asks for it does not
/// match.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Origin {
    /// The caller's user id.
    pub uid: Option<u32>,
    /// The caller's group id.
    pub gid: Option<u32>,
    /// The client's network address.
    pub addr: Option<IpAddr>,
    /// The job's account key ([`crate::share::account_key`]), as the control plane told it;
    /// the scheduler fills it in from its job records.
    pub account: Option<u64>,
    /// The operation's name as the server knows it (`create`, `lookup`, `read`…), for its cost
    /// against an ops/s rate ([`QuotaConfig::op_cost`]); `None` costs 1.
    pub op: Option<&'static str>,
    /// The job's name, when a rule has `job=` patterns and the client told it
    /// ([`crate::Scheduler::name_job`]); the scheduler fills it in.
    pub job_name: Option<JobName>,
    /// Requests of the job other servers completed for this client since its last request
    /// here (dmClock's `delta`): charged to the job's rates and reservation before this one,
    /// so that they hold job-wide across servers.
    pub elsewhere_ops: u64,
    /// Bytes those requests moved, charged to the job's byte rate.
    pub elsewhere_bytes: u64,
}

/// An address block: `addr/prefix`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parses `10.1.0.0/16`, `fd00::/8` or a single address (a full-length prefix).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let (a, p) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{text}` is not an address or CIDR block"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|&n| n <= max)
                .ok_or_else(|| format!("`{text}`: the prefix length must be 0 to {max}"))?,
        };
        let cidr = Cidr { addr, prefix };
        if cidr.network() != addr {
            return Err(format!(
                "`{text}` has host bits set (the block is {}/{prefix})",
                cidr.network()
            ));
        }
        // An IPv4-mapped IPv6 block is its IPv4 block: `contains` sees a mapped client as its
        // IPv4 address, so kept as IPv6 the block would match nothing, not even itself. (Host
        // bits are clear, so the prefix covers the `::ffff:` part: it is at least 96.)
        if let IpAddr::V6(v6) = addr {
            if let (Some(v4), Some(prefix)) = (v6.to_ipv4_mapped(), prefix.checked_sub(96)) {
                return Ok(Cidr {
                    addr: IpAddr::V4(v4),
                    prefix,
                });
            }
        }
        Ok(cidr)
    }

    fn bits(addr: IpAddr) -> (u128, u32) {
        match addr {
            IpAddr::V4(a) => (u128::from(u32::from(a)), 32),
            IpAddr::V6(a) => (u128::from(a), 128),
        }
    }

    fn mask(prefix: u8, width: u32) -> u128 {
        if prefix == 0 {
            0
        } else {
            let all = if width == 32 {
                u128::from(u32::MAX)
            } else {
                u128::MAX
            };
            all & !((1u128 << (width - u32::from(prefix))) - 1)
        }
    }

    fn network(self) -> IpAddr {
        let (bits, width) = Cidr::bits(self.addr);
        let net = bits & Cidr::mask(self.prefix, width);
        match self.addr {
            IpAddr::V4(_) => IpAddr::V4((net as u32).into()),
            IpAddr::V6(_) => IpAddr::V6(net.into()),
        }
    }

    /// Whether `addr` is in the block (an IPv4-mapped IPv6 address counts as its IPv4 address).
    pub fn contains(self, addr: IpAddr) -> bool {
        let addr = match addr {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, IpAddr::V4),
            v4 => v4,
        };
        if addr.is_ipv4() != self.addr.is_ipv4() {
            return false;
        }
        let (a, width) = Cidr::bits(addr);
        let (n, _) = Cidr::bits(self.addr);
        let m = Cidr::mask(self.prefix, width);
        a & m == n & m
    }

    /// Whether every address of `other` is in this block.
    pub fn covers(self, other: Cidr) -> bool {
        other.prefix >= self.prefix && self.contains(other.addr)
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// A `job=` pattern: its text, and its glob compiled once (matching is on the request path).
#[derive(Clone, Debug)]
struct JobPattern {
    text: String,
    glob: wildmatch::WildMatch,
}

impl JobPattern {
    fn new(text: &str) -> JobPattern {
        JobPattern {
            text: text.to_owned(),
            glob: wildmatch::WildMatch::new(text),
        }
    }
}

// A pattern is its text: the glob is derived from it.
impl PartialEq for JobPattern {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for JobPattern {}

impl PartialOrd for JobPattern {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for JobPattern {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.text.cmp(&other.text)
    }
}

/// Which requests a rule governs: every key given must hold (a key not given holds for all).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Match {
    jobs: Option<BTreeSet<u64>>,
    /// The names jobs were given by (`job=dd.1000`), by id, to show them as given.
    job_names: std::collections::BTreeMap<u64, String>,
    /// Job-name patterns (`job={dd.* *.500}`: `*` any run, `?` any one character), matched
    /// against the name the job's client told.
    job_patterns: Vec<JobPattern>,
    uids: Option<BTreeSet<u32>>,
    gids: Option<BTreeSet<u32>>,
    /// Account keys, and the names they were given by.
    accounts: Option<std::collections::BTreeMap<u64, String>>,
    clients: Option<Vec<Cidr>>,
    classes: Option<BTreeSet<OpClass>>,
}

/// The keys a match may use, for error messages.
pub const MATCH_KEYS: &str = "job, uid (user), gid (group), account, client, class";

impl Match {
    /// Everything.
    pub fn all() -> Match {
        Match::default()
    }

    /// Parses a match (see the [module documentation](self)).
    pub fn parse(text: &str) -> Result<Match, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("the match is empty (use `*` to match every request)".into());
        }
        if text == "*" {
            return Ok(Match::all());
        }
        let mut m = Match::default();
        for term in terms(text)? {
            let (key, values) = term;
            let dup =
                || format!("`{key}` is given twice (put the values in one set: {key}={{a b}})");
            match key.as_str() {
                "job" | "jobid" => {
                    let mut set = BTreeSet::new();
                    for v in &values {
                        // Digits are an id as `iosets ctl jobs` shows it (a hashed name's too);
                        // anything else a name, hashed as the mount hashes it.
                        let id = match v.parse::<u64>() {
                            Ok(id) => id,
                            Err(_) if v.bytes().all(|b| b.is_ascii_digit()) => {
                                return Err(format!("`{key}={v}`: `{v}` is above the largest id"))
                            }
                            Err(_) => {
                                // What the text form cannot hold back is refused.
                                if v.contains(|c: char| {
                                    c.is_whitespace()
                                        || c.is_control()
                                        || matches!(c, '{' | '}' | ',' | '&' | '=' | '"')
                                }) {
                                    return Err(format!(
                                        "`{key}={v}`: a job name in a rule has no space, `{{`, \
                                         `}}`, `,`, `&`, `=` or `\"` (name such a job by its id)"
                                    ));
                                }
                                if v.contains(['*', '?']) {
                                    if v.len() > iosets_types::MAX_JOB_NAME_LEN {
                                        return Err(format!(
                                            "`{key}={v}`: a pattern is 1 to {} bytes",
                                            iosets_types::MAX_JOB_NAME_LEN
                                        ));
                                    }
                                    m.job_patterns.push(JobPattern::new(v));
                                    continue;
                                }
                                let id = JobId::of_name(v).ok_or_else(|| {
                                    format!(
                                        "`{key}={v}`: a job name is 1 to {} bytes",
                                        iosets_types::MAX_JOB_NAME_LEN
                                    )
                                })?;
                                m.job_names.insert(id.0, v.clone());
                                id.0
                            }
                        };
                        set.insert(id);
                    }
                    m.job_patterns.sort_unstable();
                    m.job_patterns.dedup();
                    if m.jobs.replace(set).is_some() {
                        return Err(dup());
                    }
                }
                "uid" | "user" => {
                    let set = ids(&key, &values, user_id)?;
                    if m.uids.replace(set).is_some() {
                        return Err(dup_id("uid", "user"));
                    }
                }
                "gid" | "group" => {
                    let set = ids(&key, &values, group_id)?;
                    if m.gids.replace(set).is_some() {
                        return Err(dup_id("gid", "group"));
                    }
                }
                "account" => {
                    let mut set = std::collections::BTreeMap::new();
                    for v in &values {
                        crate::share::check_account(v).map_err(|e| format!("`{key}={v}`: {e}"))?;
                        set.insert(crate::share::account_key(v), v.clone());
                    }
                    if m.accounts.replace(set).is_some() {
                        return Err(dup());
                    }
                }
                "client" | "nid" => {
                    let mut nets = Vec::new();
                    for v in &values {
                        nets.push(Cidr::parse(v)?);
                    }
                    nets.sort_unstable();
                    nets.dedup();
                    if m.clients.replace(nets).is_some() {
                        return Err(dup());
                    }
                }
                "class" | "opcode" => {
                    let set = parse_set(&key, &values, |v| match v {
                        "data-read" | "read" => Some(OpClass::DataRead),
                        "data-write" | "write" => Some(OpClass::DataWrite),
                        "meta" | "metadata" => Some(OpClass::Meta),
                        _ => None,
                    })
                    .map_err(|e| format!("{e} (classes: data-read, data-write, meta)"))?;
                    if m.classes.replace(set).is_some() {
                        return Err(dup());
                    }
                }
                other => {
                    return Err(format!(
                        "unknown match key `{other}` (keys: {MATCH_KEYS}, or `*`)"
                    ))
                }
            }
        }
        Ok(m)
    }

    /// Whether the match has `job=` patterns (which need the job's name, [`Origin::job_name`]).
    pub fn has_patterns(&self) -> bool {
        !self.job_patterns.is_empty()
    }

    /// How many jobs it names, if it names them all by id or name (no pattern, a `job=` key):
    /// what a per-job reservation is multiplied by in the reservations' sum.
    pub fn job_count(&self) -> Option<usize> {
        match &self.jobs {
            Some(ids) if self.job_patterns.is_empty() => Some(ids.len()),
            _ => None,
        }
    }

    /// Whether one of its `job=` patterns matches job name `name`.
    pub fn pattern_matches(&self, name: &str) -> bool {
        self.job_patterns.iter().any(|p| p.glob.matches(name))
    }

    /// Whether a request of `job`, class `class`, from `origin` satisfies the match. Rules
    /// know three classes: an fsync (`data-fsync`) is `meta` to them.
    pub fn matches(&self, job: JobId, class: OpClass, origin: &Origin) -> bool {
        let class = match class {
            OpClass::DataFsync => OpClass::Meta,
            c => c,
        };
        self.jobs.as_ref().is_none_or(|s| {
            s.contains(&job.0)
                || origin
                    .job_name
                    .is_some_and(|n| self.pattern_matches(n.as_str()))
        }) && self.classes.as_ref().is_none_or(|s| s.contains(&class))
            && self
                .uids
                .as_ref()
                .is_none_or(|s| origin.uid.is_some_and(|u| s.contains(&u)))
            && self
                .gids
                .as_ref()
                .is_none_or(|s| origin.gid.is_some_and(|g| s.contains(&g)))
            && self
                .accounts
                .as_ref()
                .is_none_or(|s| origin.account.is_some_and(|a| s.contains_key(&a)))
            && self.clients.as_ref().is_none_or(|nets| {
                origin
                    .addr
                    .is_some_and(|a| nets.iter().any(|n| n.contains(a)))
            })
    }

    /// Whether every request `other` matches is matched by `self` too (then a rule with `other`
    /// after a rule with `self` never applies).
    pub fn covers(&self, other: &Match) -> bool {
        fn set<T: Ord>(mine: &Option<BTreeSet<T>>, theirs: &Option<BTreeSet<T>>) -> bool {
            match (mine, theirs) {
                (None, _) => true,
                (Some(_), None) => false,
                (Some(a), Some(b)) => b.is_subset(a),
            }
        }
        let clients = match (&self.clients, &other.clients) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => b.iter().all(|n| a.iter().any(|m| m.covers(*n))),
        };
        let accounts = match (&self.accounts, &other.accounts) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => b.keys().all(|k| a.contains_key(k)),
        };
        let jobs = match (&self.jobs, &other.jobs) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(a), Some(b)) => {
                // A pattern does not cover a job named by id or name: the pattern matches only
                // once the job's client told its name, the id always.
                b.is_subset(a)
                    && other
                        .job_patterns
                        .iter()
                        .all(|p| self.job_patterns.iter().any(|m| m == p || m.text == "*"))
            }
        };
        jobs && accounts
            && set(&self.uids, &other.uids)
            && set(&self.gids, &other.gids)
            && set(&self.classes, &other.classes)
            && clients
    }
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn one<T: fmt::Display>(
            f: &mut fmt::Formatter<'_>,
            first: &mut bool,
            key: &str,
            items: impl Iterator<Item = T>,
        ) -> fmt::Result {
            if !*first {
                f.write_str(" ")?;
            }
            *first = false;
            let items: Vec<String> = items.map(|i| i.to_string()).collect();
            if items.len() == 1 {
                write!(f, "{key}={}", items[0])
            } else {
                write!(f, "{key}={{{}}}", items.join(" "))
            }
        }
        let mut first = true;
        if let Some(s) = &self.jobs {
            let shown = s
                .iter()
                .map(|id| self.job_names.get(id).cloned().unwrap_or(id.to_string()))
                .chain(self.job_patterns.iter().map(|p| p.text.clone()));
            one(f, &mut first, "job", shown)?;
        }
        if let Some(s) = &self.uids {
            one(f, &mut first, "uid", s.iter())?;
        }
        if let Some(s) = &self.gids {
            one(f, &mut first, "gid", s.iter())?;
        }
        if let Some(s) = &self.accounts {
            one(f, &mut first, "account", s.values())?;
        }
        if let Some(s) = &self.clients {
            one(f, &mut first, "client", s.iter())?;
        }
        if let Some(s) = &self.classes {
            one(f, &mut first, "class", s.iter())?;
        }
        if first {
            f.write_str("*")?;
        }
        Ok(())
    }
}

/// Splits `key=value` terms (separated by spaces or `&`; a value may be a `{…}` set with spaces
/// inside) into keys and their items.
fn terms(text: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out = Vec::new();
    let mut rest = text.trim();
    while !rest.is_empty() {
        let Some(eq) = rest.find('=') else {
            return Err(format!("`{rest}` is not a key=value term"));
        };
        let key = rest[..eq].trim().to_ascii_lowercase();
        if key.is_empty() || key.contains(char::is_whitespace) || key.contains('&') {
            return Err(format!("`{}` is not a key=value term", &rest[..eq]));
        }
        let after = rest[eq + 1..].trim_start();
        let (value, tail) = if let Some(inner) = after.strip_prefix('{') {
            let Some(close) = inner.find('}') else {
                return Err(format!("`{key}={after}`: the set has no closing `}}`"));
            };
            (&inner[..close], &inner[close + 1..])
        } else {
            let end = after
                .find(|c: char| c.is_whitespace() || c == '&')
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        let items: Vec<String> = value
            .split(|c: char| c.is_whitespace() || c == ',')
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect();
        if items.is_empty() {
            return Err(format!("`{key}=` has no value"));
        }
        out.push((key, items));
        rest = tail.trim_start().trim_start_matches('&').trim_start();
    }
    Ok(out)
}

/// `uid` and `group` name the same key twice.
fn dup_id(id: &str, name: &str) -> String {
    format!("`{id}` (or `{name}`) is given twice (put the values in one set: {name}={{a b}})")
}

/// The ids of `values`: a number is an id, anything else a name looked up with `lookup` when the
/// rule is read (`user=alice`, `group=physics`), through the system's name service.
fn ids(
    key: &str,
    values: &[String],
    lookup: fn(&str) -> Result<Option<u32>, String>,
) -> Result<BTreeSet<u32>, String> {
    let what = if key.starts_with('g') {
        "group"
    } else {
        "user"
    };
    values
        .iter()
        .map(|v| match v.parse::<u32>() {
            Ok(id) => Ok(id),
            Err(_) => match lookup(v) {
                Ok(Some(id)) => Ok(id),
                Ok(None) => Err(format!(
                    "`{key}={v}`: no {what} `{v}` on this server (names are looked up when the \
                     rule is read; a number is taken as an id)"
                )),
                Err(e) => Err(format!("`{key}={v}`: looking up {what} `{v}`: {e}")),
            },
        })
        .collect()
}

/// The uid of user `name` (getpwnam_r).
pub(crate) fn user_id(name: &str) -> Result<Option<u32>, String> {
    nix::unistd::User::from_name(name)
        .map(|u| u.map(|u| u.uid.as_raw()))
        .map_err(|e| e.to_string())
}

/// The gid of group `name` (getgrnam_r).
fn group_id(name: &str) -> Result<Option<u32>, String> {
    nix::unistd::Group::from_name(name)
        .map(|g| g.map(|g| g.gid.as_raw()))
        .map_err(|e| e.to_string())
}

fn parse_set<T: Ord>(
    key: &str,
    values: &[String],
    parse: impl Fn(&str) -> Option<T>,
) -> Result<BTreeSet<T>, String> {
    values
        .iter()
        .map(|v| parse(v).ok_or_else(|| format!("`{key}={v}`: `{v}` is not a valid {key}")))
        .collect()
}

/// Whom a rule's rates cap: each job apart (TBF's classes), or all its jobs together.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RateScope {
    /// A bucket per job under the rule (the default).
    #[default]
    Job,
    /// One bucket for every job of the rule together (a cap for a whole project).
    Rule,
}

impl RateScope {
    /// Its name in a quota file (`rate_scope = "rule"`).
    pub fn as_str(self) -> &'static str {
        match self {
            RateScope::Job => "job",
            RateScope::Rule => "rule",
        }
    }

    /// The scope named `text`, as [`RateScope::as_str`] spells it.
    pub fn parse(text: &str) -> Option<RateScope> {
        [RateScope::Job, RateScope::Rule]
            .into_iter()
            .find(|s| s.as_str() == text)
    }
}

/// What operations cost against an ops/s rate (`[op_cost]` of a quota file): Ceph's MDS QoS
/// weighs a create above a lookup. A data request, and any operation not listed, costs 1 unless
/// set; by default the operations that make a name (create, mkdir, mknod, symlink, link) cost 3.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct OpCosts {
    set: std::collections::BTreeMap<String, u32>,
}

/// The operations a cost may be set for.
pub const COSTED_OPS: &[&str] = &[
    "read",
    "write",
    "fsync",
    "lookup",
    "lstat",
    "open",
    "create",
    "mkdir",
    "mknod",
    "symlink",
    "link",
    "unlink",
    "rmdir",
    "rename",
    "readdir",
    "readdirplus",
    "readlink",
    "setattr",
    "truncate",
    "statfs",
];

/// The largest cost of one operation.
pub const MAX_OP_COST: u32 = 1000;

impl OpCosts {
    /// The cost of operation `op` (`None`: 1).
    pub fn of(&self, op: Option<&str>) -> u32 {
        let Some(op) = op else { return 1 };
        if let Some(&c) = self.set.get(op) {
            return c;
        }
        match op {
            "create" | "mkdir" | "mknod" | "symlink" | "link" => 3,
            _ => 1,
        }
    }

    /// Sets the cost of `op`.
    ///
    /// # Errors
    /// An unknown operation, or a cost outside 1 to [`MAX_OP_COST`].
    pub fn set(&mut self, op: &str, cost: u32) -> Result<(), String> {
        if !COSTED_OPS.contains(&op) {
            return Err(format!(
                "op_cost: unknown operation `{op}` (operations: {})",
                COSTED_OPS.join(", ")
            ));
        }
        if !(1..=MAX_OP_COST).contains(&cost) {
            return Err(format!(
                "op_cost: `{op}` costs {cost}; a cost is 1 to {MAX_OP_COST}"
            ));
        }
        self.set.insert(op.to_owned(), cost);
        Ok(())
    }

    /// The costs set (not the defaults), by operation.
    pub fn set_costs(&self) -> impl Iterator<Item = (&str, u32)> {
        self.set.iter().map(|(k, &v)| (k.as_str(), v))
    }
}

/// One rule: a name, what it matches, and its limits. At least one limit must be given.
#[derive(Clone, Debug, PartialEq)]
pub struct RuleSpec {
    /// The rule's name (letters, digits, `-`, `_`, `.`; unique).
    pub name: String,
    /// Which requests it governs.
    pub matcher: Match,
    /// Percentage of the service threads the rule's requests may hold at once, in (0, 100].
    pub threads_pct: Option<f64>,
    /// Operations per second per job.
    pub rate_ops: Option<f64>,
    /// Bytes per second per job.
    pub rate_bytes: Option<f64>,
    /// Rates are hard caps (no lending of idle capacity).
    pub strict: bool,
    /// Whether the rates cap each job (the default) or every job of the rule together.
    pub rate_scope: RateScope,
    /// Operations per second per job served ahead of every weight.
    pub reserve_ops: Option<f64>,
    /// Share of contended threads relative to other rules (default 1).
    pub weight: Option<f64>,
}

impl RuleSpec {
    /// A rule named `name` matching `matcher`, with no limit yet.
    pub fn new(name: impl Into<String>, matcher: Match) -> RuleSpec {
        RuleSpec {
            name: name.into(),
            matcher,
            threads_pct: None,
            rate_ops: None,
            rate_bytes: None,
            strict: false,
            rate_scope: RateScope::Job,
            reserve_ops: None,
            weight: None,
        }
    }

    /// The rule's limits in the text form of `iosets ctl rule list`.
    pub fn limits(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.threads_pct {
            parts.push(format!("threads={p}%"));
        }
        if let Some(r) = self.rate_ops {
            parts.push(format!("rate={r}ops/s"));
        }
        if let Some(r) = self.rate_bytes {
            parts.push(format!("rate={r}B/s"));
        }
        if self.rate_scope == RateScope::Rule {
            parts.push("per-rule".into());
        }
        if self.strict {
            parts.push("strict".into());
        }
        if let Some(r) = self.reserve_ops {
            parts.push(format!("reserve={r}ops/s"));
        }
        if let Some(w) = self.weight {
            parts.push(format!("weight={w}"));
        }
        parts.join(" ")
    }

    fn check(&self) -> Result<(), String> {
        let positive = |what: &str, v: Option<f64>| match v {
            Some(x) if !(x.is_finite() && x > 0.0) => {
                Err(format!("{what} must be a positive number, not {x}"))
            }
            _ => Ok(()),
        };
        if let Some(p) = self.threads_pct {
            if !(p.is_finite() && p > 0.0 && p <= 100.0) {
                return Err(format!("threads must be a percentage in (0, 100], not {p}"));
            }
        }
        positive("rate (ops/s)", self.rate_ops)?;
        positive("rate (bytes/s)", self.rate_bytes)?;
        positive("reserve (ops/s)", self.reserve_ops)?;
        positive("weight", self.weight)?;
        if self.threads_pct.is_none()
            && self.rate_ops.is_none()
            && self.rate_bytes.is_none()
            && self.reserve_ops.is_none()
            && self.weight.is_none()
        {
            return Err("the rule sets no limit (give threads, rate, reserve or weight)".into());
        }
        if self.strict && self.rate_ops.is_none() && self.rate_bytes.is_none() {
            return Err("`strict` applies to a rate, and the rule has none".into());
        }
        if self.rate_scope == RateScope::Rule
            && self.rate_ops.is_none()
            && self.rate_bytes.is_none()
        {
            return Err("`rate_scope = \"rule\"` applies to a rate, and the rule has none".into());
        }
        if let (Some(res), Some(rate)) = (self.reserve_ops, self.rate_ops) {
            if res > rate {
                return Err(format!(
                    "the reservation ({res} ops/s) is above the rule's own rate ({rate} ops/s)"
                ));
            }
        }
        Ok(())
    }
}

/// The quota layer's configuration: the ordered rules and the two settings.
#[derive(Clone, Debug, PartialEq)]
pub struct QuotaConfig {
    /// The rules, in the order they are tried.
    pub rules: Vec<RuleSpec>,
    /// A job's ceiling inside its rule, in percent of the rule's threads (default 90).
    pub job_share_pct: f64,
    /// Lend idle threads (and capacity beyond soft rates) to requests waiting over quota.
    pub lend: bool,
    /// Milliseconds a thread freed by a job with nothing waiting is kept for that job's next
    /// request while other jobs of its rule wait (0: off, the default). A closed-loop client
    /// (mdtest, a synchronous application) sends its next request only after its answer; without
    /// a keep the thread goes to a waiting job of the rule meanwhile and the client waits for
    /// the next one to free (the anticipatory scheduler's idea, for threads).
    pub keep_ms: f64,
    /// What operations cost against ops/s rates (`[op_cost]`).
    pub op_cost: OpCosts,
    /// What the device can do, in operations per second (`device_ops`): the reservations must
    /// add up to no more (mClock reserves what the device can serve; Ceph's #49975 asks for
    /// this check). `None`: not checked.
    pub device_ops: Option<f64>,
}

impl Default for QuotaConfig {
    fn default() -> QuotaConfig {
        QuotaConfig {
            rules: Vec::new(),
            job_share_pct: 90.0,
            lend: false,
            keep_ms: 0.0,
            op_cost: OpCosts::default(),
            device_ops: None,
        }
    }
}

/// A bad rule set: the rule at fault (or `*` for a setting) and why.
fn bad(rule: &str, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Quota {
        rule: rule.to_owned(),
        reason: reason.into(),
    }
}

impl QuotaConfig {
    /// Checks the whole set: names, limits, percentages in total, and that no rule is shadowed
    /// by an earlier one (it would never apply) or repeats an earlier one's name.
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] naming the first rule at fault.
    pub fn validate(&self) -> Result<(), RuntimeError> {
        if !(self.job_share_pct.is_finite()
            && self.job_share_pct > 0.0
            && self.job_share_pct <= 100.0)
        {
            return Err(bad(
                "*",
                format!(
                    "job_share_pct must be a percentage in (0, 100], not {}",
                    self.job_share_pct
                ),
            ));
        }
        if !(self.keep_ms.is_finite() && (0.0..=1000.0).contains(&self.keep_ms)) {
            return Err(bad(
                "*",
                format!(
                    "keep_ms must be a number of milliseconds in [0, 1000], not {}",
                    self.keep_ms
                ),
            ));
        }
        let mut total = 0.0;
        for (i, r) in self.rules.iter().enumerate() {
            if r.name.is_empty()
                || r.name.len() > 64
                || !r
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            {
                return Err(bad(
                    &r.name,
                    "a rule name is 1 to 64 letters, digits, `-`, `_` or `.`",
                ));
            }
            r.check().map_err(|e| bad(&r.name, e))?;
            for earlier in &self.rules[..i] {
                if earlier.name == r.name {
                    return Err(bad(&r.name, "another rule has this name"));
                }
                if earlier.matcher.covers(&r.matcher) {
                    return Err(bad(
                        &r.name,
                        format!(
                            "never applies: rule `{}` before it matches everything it matches \
                             (`{}` covers `{}`); delete one or narrow the earlier rule",
                            earlier.name, earlier.matcher, r.matcher
                        ),
                    ));
                }
            }
            total += r.threads_pct.unwrap_or(0.0);
            if total > 100.0 + 1e-9 {
                return Err(bad(
                    &r.name,
                    format!("the thread percentages add up to {total} %, over 100 %"),
                ));
            }
        }
        self.check_reservations()
    }

    /// With `device_ops`, the reservations must fit in it: each rule's per-job reservation
    /// times the jobs it names (at least one when it names them by pattern or not at all).
    fn check_reservations(&self) -> Result<(), RuntimeError> {
        let Some(device) = self.device_ops else {
            return Ok(());
        };
        if !(device.is_finite() && device > 0.0) {
            return Err(bad(
                "*",
                format!("device_ops must be a positive number, not {device}"),
            ));
        }
        let mut sum = 0.0;
        let mut parts = Vec::new();
        for r in &self.rules {
            let Some(res) = r.reserve_ops else { continue };
            let (jobs, what) = match r.matcher.job_count() {
                Some(n) => (n, format!("{n} jobs")),
                None => (1, "at least 1 job".to_string()),
            };
            sum += res * jobs as f64;
            parts.push(format!("`{}`: {res} × {what}", r.name));
        }
        if sum > device + 1e-9 {
            let last = self
                .rules
                .iter()
                .rev()
                .find(|r| r.reserve_ops.is_some())
                .map_or("*", |r| r.name.as_str());
            return Err(bad(
                last,
                format!(
                    "the reservations add up to {sum} ops/s ({}), over the device's {device} \
                     ops/s (device_ops): the device cannot meet them",
                    parts.join(", ")
                ),
            ));
        }
        Ok(())
    }

    /// Reads the TOML form:
    /// ```toml
    /// job_share_pct = 90
    /// lend = false
    /// [[rule]]
    /// name = "compute"
    /// match = "job={1 2}"
    /// threads_pct = 71
    /// ```
    /// Rule keys: `name`, `match`, `threads_pct`, `rate_ops`, `rate_bytes`, `strict`,
    /// `reserve_ops`, `weight`. Unknown keys are errors.
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] naming the rule at fault (`*` when it is not one rule's).
    pub fn from_toml_value(value: &TomlQuota) -> Result<QuotaConfig, RuntimeError> {
        let mut cfg = QuotaConfig::default();
        if let Some(p) = value.job_share_pct {
            cfg.job_share_pct = p;
        }
        cfg.lend = value.lend.unwrap_or(false);
        if let Some(k) = value.keep_ms {
            cfg.keep_ms = k;
        }
        for (i, r) in value.rule.iter().enumerate() {
            cfg.rules.push(r.to_spec(i)?);
        }
        for (op, &cost) in &value.op_cost {
            cfg.op_cost.set(op, cost).map_err(|e| bad("*", e))?;
        }
        cfg.device_ops = value.device_ops;
        cfg.validate()?;
        Ok(cfg)
    }
}

/// The quota settings as a TOML table (or any serde format) holds them, before validation: the
/// caller deserializes with its own reader and [`QuotaConfig::from_toml_value`] checks it. Field
/// names are the keys; unknown keys are refused.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TomlQuota {
    /// `job_share_pct`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_share_pct: Option<f64>,
    /// `lend`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lend: Option<bool>,
    /// `keep_ms`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub keep_ms: Option<f64>,
    /// `device_ops`: what the device can do, operations per second (checks reservations).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub device_ops: Option<f64>,
    /// `[[rule]]` tables.
    #[serde(default)]
    pub rule: Vec<TomlRule>,
    /// Costs of operations against ops/s rates, by operation name.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub op_cost: std::collections::BTreeMap<String, u32>,
    /// Share weights of the fair-share tree ([`crate::share`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub share: Vec<crate::share::TomlShare>,
}

impl TomlQuota {
    /// The share weights it gives, checked ([`crate::share::check_shares`]).
    ///
    /// # Errors
    /// [`RuntimeError::Share`] naming the node at fault.
    pub fn shares(&self) -> Result<Vec<crate::ShareSpec>, RuntimeError> {
        let shares = self
            .share
            .iter()
            .map(crate::share::TomlShare::to_spec)
            .collect::<Result<Vec<_>, _>>()?;
        crate::share::check_shares(&shares)?;
        Ok(shares)
    }
}

impl From<&QuotaConfig> for TomlQuota {
    /// The TOML form of a configuration: [`QuotaConfig::from_toml_value`] of it gives it back
    /// (what the server's state file holds).
    fn from(cfg: &QuotaConfig) -> TomlQuota {
        TomlQuota {
            job_share_pct: Some(cfg.job_share_pct),
            lend: Some(cfg.lend),
            keep_ms: Some(cfg.keep_ms),
            device_ops: cfg.device_ops,
            rule: cfg.rules.iter().map(TomlRule::from).collect(),
            op_cost: cfg
                .op_cost
                .set_costs()
                .map(|(k, v)| (k.to_owned(), v))
                .collect(),
            share: Vec::new(),
        }
    }
}

impl From<&RuleSpec> for TomlRule {
    fn from(r: &RuleSpec) -> TomlRule {
        TomlRule {
            name: Some(r.name.clone()),
            matcher: Some(r.matcher.to_string()),
            threads_pct: r.threads_pct,
            rate_ops: r.rate_ops,
            rate_bytes: r.rate_bytes,
            strict: r.strict.then_some(true),
            // The default is not written.
            rate_scope: (r.rate_scope != RateScope::Job).then(|| r.rate_scope.as_str().to_owned()),
            reserve_ops: r.reserve_ops,
            weight: r.weight,
        }
    }
}

impl TomlRule {
    /// The rule this table describes (`index`: its place in its file, for the error message
    /// of a rule without a name). Only this rule is checked; [`QuotaConfig::validate`] checks
    /// it among the others.
    ///
    /// # Errors
    /// [`RuntimeError::Quota`] naming the rule.
    pub fn to_spec(&self, index: usize) -> Result<RuleSpec, RuntimeError> {
        let name = self.name.clone().unwrap_or_default();
        let label = if name.is_empty() {
            format!("#{}", index + 1)
        } else {
            name.clone()
        };
        let Some(text) = &self.matcher else {
            return Err(bad(
                &label,
                "has no `match` (use \"*\" to match everything)",
            ));
        };
        let matcher = Match::parse(text).map_err(|e| bad(&label, e))?;
        let mut spec = RuleSpec::new(name, matcher);
        spec.threads_pct = self.threads_pct;
        spec.rate_ops = self.rate_ops;
        spec.rate_bytes = self.rate_bytes;
        spec.strict = self.strict.unwrap_or(false);
        spec.rate_scope = match self.rate_scope.as_deref() {
            None => RateScope::Job,
            Some(text) => RateScope::parse(text).ok_or_else(|| {
                bad(
                    &label,
                    format!("rate_scope must be \"job\" or \"rule\", not \"{text}\""),
                )
            })?,
        };
        spec.reserve_ops = self.reserve_ops;
        spec.weight = self.weight;
        Ok(spec)
    }
}

/// One `[[rule]]` table.
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct TomlRule {
    /// `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// `match`.
    #[serde(rename = "match", skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
    /// `threads_pct`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads_pct: Option<f64>,
    /// `rate_ops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_ops: Option<f64>,
    /// `rate_bytes`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_bytes: Option<f64>,
    /// `strict`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// `rate_scope`: `"job"` (default) or `"rule"`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate_scope: Option<String>,
    /// `reserve_ops`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reserve_ops: Option<f64>,
    /// `weight`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub weight: Option<f64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin(uid: u32, addr: &str) -> Origin {
        Origin {
            uid: Some(uid),
            gid: Some(100),
            addr: Some(addr.parse().unwrap()),
            ..Origin::default()
        }
    }

    /// `user=` and `group=` take names (looked up when the rule is read) as well as ids.
    #[test]
    fn users_and_groups_by_name_or_id() {
        let m = Match::parse("user={root 1000} group=root").unwrap();
        assert_eq!(m.to_string(), "uid={0 1000} gid=0");
        assert_eq!(m, Match::parse("uid={0 1000} gid=0").unwrap());
        let e = Match::parse("user=no-such-user-iosets").unwrap_err();
        assert!(e.contains("no user `no-such-user-iosets`"), "{e}");
        let e = Match::parse("group={root no-such-group-iosets}").unwrap_err();
        assert!(e.contains("no group `no-such-group-iosets`"), "{e}");
        let e = Match::parse("uid=1 user=root").unwrap_err();
        assert!(e.contains("given twice"), "{e}");
    }

    /// What the server's state file holds: every rule's fields, written as TOML and read back.
    #[test]
    fn jobs_by_name_and_accounts_match() {
        let m = Match::parse("job={dd.1000 42 myjob} account={physics bio}").unwrap();
        // Ids in order (a name's is its hash): 42, then the two names by their hashes.
        assert_eq!(
            m.to_string(),
            "job={42 dd.1000 myjob} account={bio physics}"
        );
        let back = Match::parse(&m.to_string()).unwrap();
        assert_eq!(back, m, "the text form reads back as the same match");
        let named = JobId::of_name("dd.1000").unwrap();
        let physics = Origin {
            account: Some(crate::share::account_key("physics")),
            ..Origin::default()
        };
        assert!(m.matches(named, OpClass::Meta, &physics));
        assert!(m.matches(JobId(42), OpClass::Meta, &physics));
        assert!(!m.matches(JobId(43), OpClass::Meta, &physics));
        // No account told: a rule on accounts does not match.
        assert!(!m.matches(JobId(42), OpClass::Meta, &Origin::default()));
        let other = Origin {
            account: Some(crate::share::account_key("chemistry")),
            ..Origin::default()
        };
        assert!(!m.matches(JobId(42), OpClass::Meta, &other));
        assert!(Match::parse("account={physics bio}")
            .unwrap()
            .covers(&Match::parse("account=bio job=1").unwrap()));
        for (text, needle) in [
            (
                "job=dd.*xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
                "a pattern is 1 to 64",
            ),
            ("job=99999999999999999999", "above the largest id"),
            ("account=a/b", "not an account name"),
        ] {
            let e = Match::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text}: {e}");
        }
    }

    #[test]
    fn reservations_the_device_cannot_meet_are_refused_with_the_figure() {
        let text = |device: f64| {
            format!(
                "device_ops = {device}\n\
                 [[rule]]\nname = \"vip\"\nmatch = \"job={{1 2 3}}\"\nreserve_ops = 200\n\
                 [[rule]]\nname = \"md\"\nmatch = \"class=meta\"\nreserve_ops = 150\n"
            )
        };
        let read = |t: &str| QuotaConfig::from_toml_value(&toml::from_str::<TomlQuota>(t).unwrap());
        // 3 × 200 + at least 1 × 150 = 750.
        assert!(read(&text(750.0)).is_ok());
        let e = read(&text(700.0)).unwrap_err().to_string();
        assert!(
            e.contains("750 ops/s")
                && e.contains("`vip`: 200 × 3 jobs")
                && e.contains("`md`: 150 × at least 1 job")
                && e.contains("700"),
            "{e}"
        );
        let e = read(&text(-1.0)).unwrap_err().to_string();
        assert!(e.contains("device_ops must be a positive number"), "{e}");
    }

    #[test]
    fn job_patterns_match_the_name_the_client_told() {
        let m = Match::parse("job={dd.* *.500 42} class=meta").unwrap();
        assert!(m.has_patterns());
        assert_eq!(m.to_string(), "job={42 *.500 dd.*} class=meta");
        assert_eq!(Match::parse(&m.to_string()).unwrap(), m);
        let named = |name: &str| Origin {
            job_name: JobName::new(name),
            ..Origin::default()
        };
        let id = |name: &str| JobId::of_name(name).unwrap();
        assert!(m.matches(id("dd.1000"), OpClass::Meta, &named("dd.1000")));
        assert!(m.matches(id("tar.500"), OpClass::Meta, &named("tar.500")));
        assert!(!m.matches(id("tar.501"), OpClass::Meta, &named("tar.501")));
        assert!(m.matches(JobId(42), OpClass::Meta, &Origin::default()));
        // A job whose name was never told matches no pattern.
        assert!(!m.matches(id("dd.1000"), OpClass::Meta, &Origin::default()));
        assert!(!m.matches(id("dd.1000"), OpClass::DataRead, &named("dd.1000")));
        // A pattern covers itself, not the jobs it would name (it matches them only once their
        // names are told; by id they always match).
        let wide = Match::parse("job=dd.*").unwrap();
        assert!(!wide.covers(&Match::parse("job={dd.1000 dd.2}").unwrap()));
        assert!(wide.covers(&Match::parse("job=dd.* class=meta").unwrap()));
        assert!(!wide.covers(&Match::parse("job={dd.1000 cp.2}").unwrap()));
        assert!(!wide.covers(&Match::parse("job=d*").unwrap()));
        assert!(Match::parse("job=*").unwrap().covers(&wide));
    }

    #[test]
    fn the_toml_form_gives_the_configuration_back() {
        let mut a = RuleSpec::new("tbf", Match::parse("uid=1000 class=data-write").unwrap());
        a.rate_bytes = Some(104_857_600.0);
        a.strict = true;
        let mut b = RuleSpec::new("gio", Match::parse("client=10.0.0.0/8 job={1 2}").unwrap());
        b.threads_pct = Some(25.0);
        b.weight = Some(2.0);
        let mut c = RuleSpec::new("md", Match::parse("class=meta").unwrap());
        c.rate_ops = Some(500.0);
        c.reserve_ops = Some(50.0);
        c.rate_scope = RateScope::Rule;
        let mut op_cost = OpCosts::default();
        op_cost.set("unlink", 2).unwrap();
        let cfg = QuotaConfig {
            rules: vec![a, b, c],
            job_share_pct: 80.0,
            lend: true,
            keep_ms: 2.0,
            op_cost,
            device_ops: Some(1000.0),
        };
        cfg.validate().unwrap();
        let text = toml::to_string(&TomlQuota::from(&cfg)).unwrap();
        let back: TomlQuota = toml::from_str(&text).unwrap();
        assert_eq!(QuotaConfig::from_toml_value(&back).unwrap(), cfg, "{text}");
        assert!(!text.contains("strict = false"), "{text}");
        assert!(text.contains("rate_scope = \"rule\""), "{text}");
        assert_eq!(cfg.op_cost.of(Some("unlink")), 2);
        assert_eq!(cfg.op_cost.of(Some("create")), 3);
        assert_eq!(cfg.op_cost.of(Some("lookup")), 1);
        assert_eq!(cfg.op_cost.of(None), 1);
        let mut costs = OpCosts::default();
        assert!(costs
            .set("frobnicate", 2)
            .unwrap_err()
            .contains("unknown operation"));
        assert!(costs.set("create", 0).unwrap_err().contains("1 to 1000"));
        let bad: TomlQuota = toml::from_str(
            "[[rule]]\nname = \"x\"\nmatch = \"*\"\nrate_scope = \"rule\"\nthreads_pct = 5\n",
        )
        .unwrap();
        let e = QuotaConfig::from_toml_value(&bad).unwrap_err().to_string();
        assert!(e.contains("applies to a rate"), "{e}");
    }

    #[test]
    fn a_meta_rule_governs_fsync_and_no_data_rule_does() {
        let o = origin(1000, "10.0.0.1");
        let fsync = OpClass::of(iosets_types::Op::Other);
        assert_eq!(fsync, OpClass::DataFsync);
        assert!(Match::parse("class=meta")
            .unwrap()
            .matches(JobId(1), fsync, &o));
        for data in ["class=data-write", "class=data-read"] {
            assert!(
                !Match::parse(data).unwrap().matches(JobId(1), fsync, &o),
                "{data}"
            );
        }
        assert!(Match::all().matches(JobId(1), fsync, &o));
        assert!(Match::parse("class=data-fsync").is_err());
    }

    #[test]
    fn matches_lustre_style_expressions() {
        let m = Match::parse("job={1 2}&class=meta").unwrap();
        let o = origin(1000, "10.0.0.1");
        assert!(m.matches(JobId(1), OpClass::Meta, &o));
        assert!(m.matches(JobId(2), OpClass::Meta, &o));
        assert!(!m.matches(JobId(3), OpClass::Meta, &o));
        assert!(!m.matches(JobId(1), OpClass::DataWrite, &o));
        assert_eq!(m.to_string(), "job={1 2} class=meta");
        assert_eq!(Match::parse("job=1,2 class=metadata").unwrap(), m);
        let c = Match::parse("client=10.0.0.0/8 uid=1000").unwrap();
        assert!(c.matches(JobId(9), OpClass::DataRead, &o));
        assert!(!c.matches(JobId(9), OpClass::DataRead, &origin(1000, "192.168.0.1")));
        assert!(!c.matches(JobId(9), OpClass::DataRead, &origin(1001, "10.2.3.4")));
        // A key the caller cannot tell does not match.
        assert!(!c.matches(JobId(9), OpClass::DataRead, &Origin::default()));
        assert!(Match::parse("*")
            .unwrap()
            .matches(JobId(5), OpClass::Meta, &Origin::default()));
        let mapped = Match::parse("client=127.0.0.0/8").unwrap();
        assert!(mapped.matches(
            JobId(1),
            OpClass::Meta,
            &Origin {
                addr: Some("::ffff:127.0.0.1".parse().unwrap()),
                ..Origin::default()
            }
        ));
    }

    #[test]
    fn bad_matches_say_what_is_wrong() {
        for (text, needle) in [
            ("", "empty"),
            ("color=red", "unknown match key `color`"),
            ("client=10.0.0.0/33", "prefix length"),
            ("client=10.0.0.1/8", "host bits"),
            ("client=ten", "not an address"),
            ("class=bulk", "classes: data-read"),
            ("job=1 job=dd.*", "given twice"),
            ("jobid=1,2}opcode=metadata", "has no space"),
            ("job={1 2", "closing"),
            ("job=1 job=2", "given twice"),
            ("job=", "no value"),
            ("job", "not a key=value"),
        ] {
            let e = Match::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }

    #[test]
    fn covers_is_set_inclusion() {
        let p = |s| Match::parse(s).unwrap();
        assert!(p("*").covers(&p("job=1")));
        assert!(p("job={1 2}").covers(&p("job=1 class=meta")));
        assert!(!p("job=1 class=meta").covers(&p("job=1")));
        assert!(p("client=10.0.0.0/8").covers(&p("client=10.1.0.0/16")));
        assert!(!p("client=10.1.0.0/16").covers(&p("client=10.0.0.0/8")));
        assert!(!p("job=1").covers(&p("job=2")));
    }

    fn rule(name: &str, m: &str, pct: f64) -> RuleSpec {
        let mut r = RuleSpec::new(name, Match::parse(m).unwrap());
        r.threads_pct = Some(pct);
        r
    }

    #[test]
    fn validation_names_the_rule_at_fault() {
        let cfg = |rules: Vec<RuleSpec>| QuotaConfig {
            rules,
            ..QuotaConfig::default()
        };
        let err = |c: QuotaConfig| match c.validate().unwrap_err() {
            RuntimeError::Quota { rule, reason } => (rule, reason),
            e => panic!("{e}"),
        };
        let (r, why) = err(cfg(vec![
            rule("a", "job=1", 71.0),
            rule("b", "job=2", 30.0),
        ]));
        assert_eq!(r, "b");
        assert!(why.contains("101 %"), "{why}");
        let (r, why) = err(cfg(vec![
            rule("a", "job={1 2}", 10.0),
            rule("b", "job=1", 10.0),
        ]));
        assert_eq!(r, "b");
        assert!(why.contains("never applies"), "{why}");
        let (r, _) = err(cfg(vec![
            rule("a", "job=1", 10.0),
            rule("a", "job=2", 10.0),
        ]));
        assert_eq!(r, "a");
        let (r, _) = err(cfg(vec![rule("bad name", "job=1", 10.0)]));
        assert_eq!(r, "bad name");
        let (_, why) = err(cfg(vec![RuleSpec::new("x", Match::all())]));
        assert!(why.contains("no limit"), "{why}");
        let mut c = RuleSpec::new("c", Match::all());
        c.rate_ops = Some(10.0);
        c.reserve_ops = Some(20.0);
        let (_, why) = err(cfg(vec![c]));
        assert!(why.contains("above the rule's own rate"), "{why}");
        let (_, why) = err(cfg(vec![rule("z", "job=1", 0.0)]));
        assert!(why.contains("(0, 100]"), "{why}");
        let (r, _) = err(QuotaConfig {
            job_share_pct: 120.0,
            ..QuotaConfig::default()
        });
        assert_eq!(r, "*");
        for keep in [-1.0, f64::NAN, 1000.5] {
            let (r, why) = err(QuotaConfig {
                keep_ms: keep,
                ..QuotaConfig::default()
            });
            assert_eq!(r, "*");
            assert!(why.contains("keep_ms"), "{why}");
        }
        cfg(vec![rule("a", "job=1", 71.0), rule("b", "job=2", 29.0)])
            .validate()
            .unwrap();
    }
}
