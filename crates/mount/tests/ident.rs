//! Job identity of FUSE callers (`iosets_mount::ident`), by behaviour: against fake proc trees
//! (sources, their order, refusals, caching and pid reuse) and against the real `/proc` with
//! real child processes (environment, inheritance, exit).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use iosets_mount::ident::{
    job_id_of, parse_sources, IdentConfig, IdentError, JobResolver, ReuseCheck, Source,
};
use iosets_types::hash::fnv1a64;
use iosets_types::JobId;
use rustix::process::{kill_process, Pid, Signal};

const UID: u32 = 1000;

// ---------------------------------------------------------------------------------------------
// A fake proc tree.

/// A temporary directory laid out like `/proc`, holding only the files the resolver reads.
struct FakeProc {
    dir: tempfile::TempDir,
}

/// One thread of a [`FakeProc`]: `<root>/<tid>/{stat,status,comm,cgroup,environ}`.
struct Task {
    dir: PathBuf,
    tid: u32,
}

impl FakeProc {
    fn new() -> Self {
        FakeProc {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }

    /// A single-threaded process `pid` named `app`, started at tick 1000, with no cgroup or
    /// environment files.
    fn process(&self, pid: u32) -> Task {
        self.thread(pid, pid)
    }

    /// Thread `tid` of process `tgid`.
    fn thread(&self, tid: u32, tgid: u32) -> Task {
        let dir = self.root().join(tid.to_string());
        fs::create_dir_all(&dir).unwrap();
        let task = Task { dir, tid };
        task.write(
            "status",
            &format!("Name:\tapp\nTgid:\t{tgid}\nPid:\t{tid}\n"),
        );
        task.comm("app").start_time(1000)
    }

    /// A resolver over this tree, checking reuse by start time (there are no real pids here).
    fn resolver(&self, edit: impl FnOnce(&mut IdentConfig)) -> JobResolver {
        let mut cfg = IdentConfig {
            proc_root: self.root().to_owned(),
            reuse_check: ReuseCheck::StartTime,
            ..IdentConfig::default()
        };
        edit(&mut cfg);
        JobResolver::new(cfg).unwrap()
    }
}

impl Task {
    fn write(&self, file: &str, text: &str) {
        fs::write(self.dir.join(file), text).unwrap();
    }

    /// Sets `/proc/TID/comm`, and the `(comm)` of `/proc/TID/stat` keeping the start time.
    fn comm(self, comm: &str) -> Self {
        self.write("comm", &format!("{comm}\n"));
        let start = self.read_start_time();
        self.stat(comm, start)
    }

    fn start_time(self, start: u64) -> Self {
        let comm = fs::read_to_string(self.dir.join("comm")).unwrap();
        self.stat(comm.trim_end_matches('\n'), start)
    }

    fn stat(self, comm: &str, start: u64) -> Self {
        let tid = self.tid;
        // Fields 3 to 21, then field 22, the start time, then a few more.
        let fields = "S 1 1 1 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0";
        self.write(
            "stat",
            &format!("{tid} ({comm}) {fields} {start} 12345 67 0 0"),
        );
        self
    }

    fn read_start_time(&self) -> u64 {
        let stat = fs::read_to_string(self.dir.join("stat")).unwrap_or_default();
        let after_comm = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        after_comm
            .split_whitespace()
            .nth(19)
            .map_or(1000, |field| field.parse().unwrap())
    }

    fn cgroup(self, text: &str) -> Self {
        self.write("cgroup", text);
        self
    }

    fn env(self, vars: &[(&str, &str)]) -> Self {
        let block: String = vars.iter().map(|(k, v)| format!("{k}={v}\0")).collect();
        self.write("environ", &format!("PATH=/usr/bin\0HOME=/home/u\0{block}"));
        self
    }

    /// Makes `/proc/TID/environ` fail to read (a directory), as for a non-dumpable process
    /// read by an unprivileged mount.
    fn environ_unreadable(self) -> Self {
        fs::create_dir(self.dir.join("environ")).unwrap();
        self
    }

    fn remove(&self, file: &str) {
        fs::remove_file(self.dir.join(file)).unwrap();
    }
}

fn hashed(name: &str) -> JobId {
    JobId(fnv1a64(name.as_bytes()) | 1 << 63)
}

const SLURM_V1: &str = "12:freezer:/slurm_host/uid_0/job_42/step_0\n\
                        11:memory:/slurm_host/uid_0/job_42/step_0/task_0\n\
                        1:name=systemd:/system.slice/slurmd.service\n";
const SLURM_V2: &str = "0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_0\n";
const NO_SLURM: &str = "0::/user.slice/user-1000.slice/session-3.scope\n";

// ---------------------------------------------------------------------------------------------
// Sources and their order.

#[test]
fn cgroup_v1_and_v2_lines_name_the_slurm_job() {
    let proc = FakeProc::new();
    proc.process(10).cgroup(SLURM_V1);
    proc.process(11).cgroup(SLURM_V2);
    let resolver = proc.resolver(|_| {});
    for tid in [10, 11] {
        let resolved = resolver.resolve(tid, UID);
        assert_eq!((resolved.job, resolved.name.as_str()), (JobId(42), "42"));
        assert_eq!(resolved.source, Source::Cgroup);
    }
}

#[test]
fn cgroup_wins_over_env_when_both_name_a_job() {
    let proc = FakeProc::new();
    proc.process(10)
        .cgroup(SLURM_V2)
        .env(&[("IOSETS_JOB_ID", "7"), ("SLURM_JOB_ID", "8")]);
    let resolved = proc.resolver(|_| {}).resolve(10, UID);
    assert_eq!((resolved.job, resolved.source), (JobId(42), Source::Cgroup));
}

#[test]
fn a_cgroup_without_a_slurm_job_leaves_the_answer_to_env() {
    let proc = FakeProc::new();
    proc.process(10)
        .cgroup(NO_SLURM)
        .env(&[("SLURM_JOB_ID", "8")]);
    // A user can make cgroups under user.slice; a job_ component there is not Slurm's.
    proc.process(11)
        .cgroup("0::/user.slice/user-1000.slice/user@1000.service/slurm/job_5\n")
        .env(&[("SLURM_JOB_ID", "8")]);
    let resolver = proc.resolver(|_| {});
    for tid in [10, 11] {
        let resolved = resolver.resolve(tid, UID);
        assert_eq!((resolved.job, resolved.source), (JobId(8), Source::Env));
    }
}

#[test]
fn env_reads_iosets_job_id_then_slurm_job_id_then_extra_variables() {
    let proc = FakeProc::new();
    proc.process(10).env(&[
        ("PBS_JOBID", "3"),
        ("SLURM_JOB_ID", "2"),
        ("IOSETS_JOB_ID", "1"),
    ]);
    proc.process(11)
        .env(&[("PBS_JOBID", "3"), ("SLURM_JOB_ID", "2")]);
    proc.process(12).env(&[("PBS_JOBID", "3")]);
    let resolver = proc.resolver(|cfg| cfg.env_vars.push("PBS_JOBID".to_owned()));
    let jobs: Vec<JobId> = [10, 11, 12]
        .map(|tid| resolver.resolve(tid, UID).job)
        .to_vec();
    assert_eq!(jobs, [JobId(1), JobId(2), JobId(3)]);
}

#[test]
fn an_empty_value_is_skipped() {
    let proc = FakeProc::new();
    proc.process(10)
        .env(&[("IOSETS_JOB_ID", ""), ("SLURM_JOB_ID", "77")]);
    proc.process(11)
        .env(&[("IOSETS_JOB_ID", ""), ("SLURM_JOB_ID", "")]);
    let resolver = proc.resolver(|_| {});
    assert_eq!(resolver.resolve(10, UID).job, JobId(77));
    let resolved = resolver.resolve(11, UID);
    assert_eq!(
        (resolved.name.as_str(), resolved.source),
        ("app.1000", Source::ProcnameUid)
    );
}

#[test]
fn a_missing_or_unreadable_environ_falls_back_to_procname_uid() {
    let proc = FakeProc::new();
    proc.process(10);
    proc.process(11).comm("ior").environ_unreadable();
    let resolver = proc.resolver(|_| {});
    for (tid, name) in [(10, "app.1000"), (11, "ior.1000")] {
        let resolved = resolver.resolve(tid, UID);
        assert_eq!(
            (resolved.name.as_str(), resolved.source),
            (name, Source::ProcnameUid)
        );
        assert_eq!(resolved.job, hashed(name));
    }
    assert_eq!(resolver.stats().fallbacks, 2);
}

#[test]
fn the_sources_are_tried_in_the_configured_order() {
    let proc = FakeProc::new();
    proc.process(10)
        .cgroup(SLURM_V2)
        .env(&[("IOSETS_JOB_ID", "7")]);
    let env_first = proc.resolver(|cfg| cfg.sources = parse_sources("env,cgroup").unwrap());
    assert_eq!(env_first.resolve(10, UID).job, JobId(7));
    let name_first = proc.resolver(|cfg| cfg.sources = vec![Source::ProcnameUid, Source::Env]);
    assert_eq!(name_first.resolve(10, UID).name, "app.1000");
}

#[test]
fn procname_uid_is_the_last_resort_even_when_not_listed() {
    let proc = FakeProc::new();
    proc.process(10).comm("a.out");
    let resolver = proc.resolver(|cfg| cfg.sources = vec![Source::Cgroup]);
    let resolved = resolver.resolve(10, 0);
    assert_eq!(
        (resolved.name.as_str(), resolved.source),
        ("a.out.0", Source::ProcnameUid)
    );
}

#[test]
fn an_unreadable_name_resolves_to_unknown_uid() {
    let proc = FakeProc::new();
    proc.process(10).remove("comm");
    let resolver = proc.resolver(|_| {});
    let resolved = resolver.resolve(10, UID);
    assert_eq!(
        (resolved.name.as_str(), resolved.job),
        ("unknown.1000", hashed("unknown.1000"))
    );
    // A tid with no /proc entry at all: the same answer, and nothing to cache.
    assert_eq!(resolver.resolve(99, UID).name, "unknown.1000");
    let stats = resolver.stats();
    assert_eq!((stats.unknown, stats.uncached, stats.entries), (2, 1, 1));
}

#[test]
fn every_thread_of_a_process_gets_the_process_name_not_its_own() {
    let proc = FakeProc::new();
    proc.process(10).comm("solver");
    proc.thread(13, 10).comm("omp worker 3");
    let resolver = proc.resolver(|_| {});
    assert_eq!(resolver.resolve(13, UID).name, "solver.1000");
    assert_eq!(resolver.resolve(13, UID), resolver.resolve(10, UID));
}

// ---------------------------------------------------------------------------------------------
// Names that do not fit.

#[test]
fn a_value_of_65_bytes_is_refused_and_the_next_candidate_used() {
    let proc = FakeProc::new();
    proc.process(10)
        .env(&[("IOSETS_JOB_ID", &"j".repeat(65)), ("SLURM_JOB_ID", "77")]);
    proc.process(11).env(&[("IOSETS_JOB_ID", &"j".repeat(65))]);
    proc.process(12).env(&[("IOSETS_JOB_ID", &"j".repeat(64))]);
    let resolver = proc.resolver(|_| {});
    assert_eq!(resolver.resolve(10, UID).job, JobId(77));
    assert_eq!(resolver.resolve(11, UID).name, "app.1000");
    let fits = resolver.resolve(12, UID);
    assert_eq!(
        (fits.name, fits.job),
        ("j".repeat(64), hashed(&"j".repeat(64)))
    );
    assert_eq!(resolver.stats().refused_too_long, 2);
}

#[test]
fn a_number_above_i64_max_is_refused_and_the_next_source_used() {
    let proc = FakeProc::new();
    proc.process(10)
        .cgroup("0::/system.slice/slurmstepd.scope/job_9223372036854775808/step_0\n")
        .env(&[("IOSETS_JOB_ID", "5")]);
    proc.process(11)
        .env(&[("IOSETS_JOB_ID", "9223372036854775808")]);
    proc.process(12)
        .env(&[("IOSETS_JOB_ID", "9223372036854775807")]);
    let resolver = proc.resolver(|_| {});
    assert_eq!(resolver.resolve(10, UID).job, JobId(5));
    assert_eq!(resolver.resolve(11, UID).source, Source::ProcnameUid);
    assert_eq!(resolver.resolve(12, UID).job, JobId(i64::MAX as u64));
    assert_eq!(resolver.stats().refused_out_of_range, 2);
}

#[test]
fn a_refused_value_warns_once_per_thread_not_at_every_read() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", &"j".repeat(100))]);
    proc.process(11).env(&[("IOSETS_JOB_ID", &"j".repeat(100))]);
    // Zero ttl: every call reads /proc again.
    let resolver = proc.resolver(|cfg| {
        cfg.ttl = Duration::ZERO;
        cfg.fallback_ttl = Duration::ZERO;
    });
    let warnings = Arc::new(AtomicUsize::new(0));
    tracing::subscriber::with_default(CountWarnings(Arc::clone(&warnings)), || {
        // Another test's thread may have registered the warning's callsite, with no
        // subscriber, while this one was being created: its cached "never" would hide every
        // warning here. Ask every callsite again, with this subscriber in place.
        tracing::callsite::rebuild_interest_cache();
        for _ in 0..3 {
            resolver.resolve(10, UID);
            resolver.resolve(11, UID);
        }
    });
    assert_eq!(resolver.stats().refused_too_long, 6, "every read refuses");
    assert_eq!(
        warnings.load(Ordering::Relaxed),
        2,
        "one warning per thread"
    );
    // A new thread under the same tid warns again.
    proc.process(10).start_time(2000);
    tracing::subscriber::with_default(CountWarnings(Arc::clone(&warnings)), || {
        tracing::callsite::rebuild_interest_cache();
        resolver.resolve(10, UID);
    });
    assert_eq!(warnings.load(Ordering::Relaxed), 3);
}

#[test]
fn hashed_names_have_the_top_bit_set_and_numeric_ones_do_not() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", "42")]);
    proc.process(11).env(&[("IOSETS_JOB_ID", "climate-run")]);
    proc.process(12);
    let resolver = proc.resolver(|_| {});
    for tid in [10, 11, 12] {
        let resolved = resolver.resolve(tid, UID);
        assert_eq!(
            job_id_of(&resolved.name),
            Ok(resolved.job),
            "job is the name's id"
        );
        let numeric = resolved.name.bytes().all(|b| b.is_ascii_digit());
        assert_eq!(resolved.job.0 >> 63 == 0, numeric, "{}", resolved.name);
    }
}

#[test]
fn parse_sources_refuses_unknown_names_and_empty_lists() {
    assert_eq!(
        parse_sources("cgroup,env,procname-uid"),
        Ok(Source::ALL.to_vec())
    );
    let error = parse_sources("cgroup,procname_uid").unwrap_err();
    assert_eq!(
        error,
        IdentError::UnknownSource {
            name: "procname_uid".to_owned()
        }
    );
    assert!(
        error
            .to_string()
            .contains("valid: cgroup, env, procname-uid"),
        "{error}"
    );
    assert_eq!(parse_sources(""), Err(IdentError::NoSources));
    let empty = IdentConfig {
        sources: Vec::new(),
        ..IdentConfig::default()
    };
    assert_eq!(JobResolver::new(empty).unwrap_err(), IdentError::NoSources);
}

// ---------------------------------------------------------------------------------------------
// Caching.

#[test]
fn a_warm_call_is_a_hit_and_gives_the_same_answer() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|_| {});
    let first = resolver.resolve(10, UID);
    // What a hit answers is the cache's, not /proc's: change /proc and look.
    proc.process(10).env(&[("IOSETS_JOB_ID", "10")]);
    assert_eq!(resolver.resolve(10, UID), first);
    assert_eq!(counts(&resolver), (1, [1, 0, 0], 1));
}

#[test]
fn cached_answers_only_a_fresh_entry_and_reads_nothing_else() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|_| {});
    // Nothing cached yet: no answer, and no miss counted (the cold resolve counts it).
    assert_eq!(resolver.cached(10, UID), None);
    assert_eq!(counts(&resolver), (0, [0, 0, 0], 0));
    let first = resolver.resolve(10, UID);
    assert_eq!(resolver.cached(10, UID), Some(first));
    // Another uid under the same tid is not this entry's.
    assert_eq!(resolver.cached(10, UID + 1), None);
    assert_eq!(counts(&resolver), (1, [1, 0, 0], 1));
}

#[test]
fn a_zero_ttl_reads_proc_at_every_call() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|cfg| {
        cfg.ttl = Duration::ZERO;
        cfg.fallback_ttl = Duration::ZERO;
    });
    for _ in 0..3 {
        assert_eq!(resolver.resolve(10, UID).job, JobId(9));
    }
    proc.process(10).env(&[("IOSETS_JOB_ID", "10")]);
    assert_eq!(resolver.resolve(10, UID).job, JobId(10));
    assert_eq!(counts(&resolver), (0, [1, 3, 0], 1));
}

#[test]
fn an_entry_is_read_again_once_its_ttl_has_passed() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|cfg| cfg.ttl = Duration::from_secs(30));
    let t0 = Instant::now();
    resolver.resolve_at(10, UID, t0);
    proc.process(10).env(&[("IOSETS_JOB_ID", "10")]);
    assert_eq!(
        resolver
            .resolve_at(10, UID, t0 + Duration::from_secs(29))
            .job,
        JobId(9)
    );
    assert_eq!(
        resolver
            .resolve_at(10, UID, t0 + Duration::from_secs(30))
            .job,
        JobId(10)
    );
    assert_eq!(counts(&resolver), (1, [1, 1, 0], 1));
}

#[test]
fn procname_uid_answers_expire_after_the_shorter_fallback_ttl() {
    let proc = FakeProc::new();
    proc.process(10).comm("bash");
    proc.process(11).env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|cfg| {
        cfg.ttl = Duration::from_secs(30);
        cfg.fallback_ttl = Duration::from_secs(1);
    });
    let t0 = Instant::now();
    resolver.resolve_at(10, UID, t0);
    resolver.resolve_at(11, UID, t0);
    // bash execs the job's program, whose environment names the job.
    proc.process(10).comm("ior").env(&[("IOSETS_JOB_ID", "9")]);
    let later = t0 + Duration::from_secs(2);
    assert_eq!(resolver.resolve_at(10, UID, later).job, JobId(9));
    assert_eq!(resolver.resolve_at(11, UID, later).job, JobId(9));
    assert_eq!(counts(&resolver), (1, [2, 1, 0], 2));
}

#[test]
fn a_new_thread_under_a_cached_tid_is_read_afresh() {
    let proc = FakeProc::new();
    proc.process(10).env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|_| {});
    assert_eq!(resolver.resolve(10, UID).job, JobId(9));
    // The process exits; its pid is reused by another one: same tid, new start time.
    proc.process(10)
        .start_time(5000)
        .env(&[("IOSETS_JOB_ID", "10")]);
    assert_eq!(resolver.resolve(10, UID).job, JobId(10));
    assert_eq!(counts(&resolver), (0, [1, 0, 1], 1));
}

#[test]
fn a_comm_with_spaces_and_parentheses_does_not_confuse_the_start_time() {
    let proc = FakeProc::new();
    proc.process(10)
        .comm("a) (b c) 9 9")
        .env(&[("IOSETS_JOB_ID", "9")]);
    let resolver = proc.resolver(|_| {});
    resolver.resolve(10, UID);
    resolver.resolve(10, UID);
    proc.process(10).comm("a) (b c) 9 9").start_time(1001);
    resolver.resolve(10, UID);
    // Misparsing would see the same (wrong) field twice and hit, or no start time and never
    // cache.
    assert_eq!(counts(&resolver), (1, [1, 0, 1], 1));
}

#[test]
fn a_changed_uid_is_read_afresh() {
    let proc = FakeProc::new();
    proc.process(10);
    let resolver = proc.resolver(|_| {});
    assert_eq!(resolver.resolve(10, 1000).name, "app.1000");
    assert_eq!(resolver.resolve(10, 0).name, "app.0");
    assert_eq!(resolver.stats().misses_stale, 1);
}

#[test]
fn the_cache_is_bounded_and_evicts_expired_then_oldest() {
    let proc = FakeProc::new();
    // 16 entries in all: one per shard, and tids 10, 26, 42 share a shard.
    let resolver = proc.resolver(|cfg| cfg.max_entries = 16);
    for tid in [10, 26, 42] {
        proc.process(tid)
            .env(&[("IOSETS_JOB_ID", &tid.to_string())]);
    }
    let t0 = Instant::now();
    resolver.resolve_at(10, UID, t0);
    resolver.resolve_at(26, UID, t0 + Duration::from_secs(1));
    assert_eq!(
        (resolver.stats().entries, resolver.stats().evictions),
        (1, 1)
    );
    resolver.resolve_at(42, UID, t0 + Duration::from_secs(2));
    resolver.resolve_at(26, UID, t0 + Duration::from_secs(3));
    let stats = resolver.stats();
    assert_eq!((stats.entries, stats.evictions, stats.hits), (1, 3, 0));
}

#[test]
fn prune_drops_expired_entries_and_exited_threads() {
    let proc = FakeProc::new();
    for tid in [10, 11, 12] {
        proc.process(tid).env(&[("IOSETS_JOB_ID", "9")]);
    }
    proc.process(13);
    let resolver = proc.resolver(|_| {});
    let t0 = Instant::now();
    for tid in [10, 11, 12, 13] {
        resolver.resolve_at(tid, UID, t0);
    }
    proc.process(11).remove("stat"); // exited
                                     // 13's `<comm>.<uid>` answer has expired (fallback ttl 1 s), the others have not.
    assert_eq!(resolver.prune(t0 + Duration::from_secs(2)), 2);
    assert_eq!(resolver.stats().entries, 2);
    resolver.clear();
    assert_eq!(resolver.stats().entries, 0);
}

#[test]
fn concurrent_callers_are_each_counted_once() {
    let proc = FakeProc::new();
    for tid in 10..18 {
        proc.process(tid)
            .env(&[("IOSETS_JOB_ID", &tid.to_string())]);
    }
    let resolver = proc.resolver(|_| {});
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for i in 0..500u32 {
                    let tid = 10 + i % 8;
                    assert_eq!(resolver.resolve(tid, UID).job, JobId(u64::from(tid)));
                }
            });
        }
    });
    let stats = resolver.stats();
    assert_eq!(stats.resolves(), 2000);
    assert_eq!(stats.entries, 8);
    assert!(stats.misses_new >= 8, "{stats:?}");
}

// ---------------------------------------------------------------------------------------------
// The real /proc, with real processes.

/// A child process, killed and reaped when dropped (also when a test fails).
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Running {
    fn pid(&self) -> u32 {
        self.0.id()
    }
}

/// Runs `program args` with exactly the environment `vars` (plus `PATH`), and waits until it
/// has exec'd (before that, /proc shows the test binary's name and environment).
fn spawn(vars: &[(&str, &str)], program: &str, args: &[&str]) -> Running {
    let mut command = Command::new(program);
    command
        .args(args)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    command.envs(vars.iter().copied());
    let child = Running(command.spawn().unwrap());
    let pid = child.pid();
    wait_until(&format!("{program} to exec"), || {
        comm_of(pid).as_deref() == Some(program)
    });
    child
}

/// Polls `ready` until it holds; panics after 10 s. This only waits for processes to get
/// somewhere, it asserts nothing about time.
fn wait_until(what: &str, mut ready: impl FnMut() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while !ready() {
        assert!(Instant::now() < give_up, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn comm_of(pid: u32) -> Option<String> {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end().to_owned())
}

fn real_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

/// A resolver over the real /proc. Env and procname-uid only: if the tests themselves run in a
/// Slurm job, every child is in its cgroup and would resolve to that job.
fn real_resolver() -> JobResolver {
    let sources = vec![Source::Env, Source::ProcnameUid];
    JobResolver::new(IdentConfig {
        sources,
        ..IdentConfig::default()
    })
    .unwrap()
}

#[test]
fn a_child_with_iosets_job_id_resolves_to_it_then_hits() {
    let child = spawn(
        &[("IOSETS_JOB_ID", "123"), ("SLURM_JOB_ID", "77")],
        "sleep",
        &["30"],
    );
    let resolver = real_resolver();
    let resolved = resolver.resolve(child.pid(), real_uid());
    assert_eq!((resolved.job, resolved.source), (JobId(123), Source::Env));
    assert_eq!(resolver.resolve(child.pid(), real_uid()), resolved);
    let stats = resolver.stats();
    assert_eq!((stats.hits, stats.misses(), stats.pidfds), (1, 1, 1));
}

#[test]
fn a_child_with_only_slurm_job_id_resolves_to_it() {
    let child = spawn(&[("SLURM_JOB_ID", "77")], "sleep", &["30"]);
    assert_eq!(
        real_resolver().resolve(child.pid(), real_uid()).job,
        JobId(77)
    );
}

#[test]
fn a_child_with_neither_variable_resolves_to_its_name_and_uid() {
    let child = spawn(&[], "sleep", &["30"]);
    let uid = real_uid();
    let resolved = real_resolver().resolve(child.pid(), uid);
    let name = format!("sleep.{uid}");
    assert_eq!((&resolved.name, resolved.job), (&name, hashed(&name)));
}

#[test]
fn a_forked_grandchild_inherits_the_job() {
    let shell = spawn(
        &[("IOSETS_JOB_ID", "321")],
        "sh",
        &["-c", "sleep 30 & wait"],
    );
    let children = format!("/proc/{0}/task/{0}/children", shell.pid());
    let mut grandchild = 0;
    wait_until("sh to fork sleep", || {
        let text = fs::read_to_string(&children).unwrap_or_default();
        grandchild = text
            .split_whitespace()
            .next()
            .and_then(|pid| pid.parse().ok())
            .unwrap_or(0);
        grandchild != 0 && comm_of(grandchild).as_deref() == Some("sleep")
    });
    let resolved = real_resolver().resolve(grandchild, real_uid());
    let _ = kill_process(Pid::from_raw(grandchild as i32).unwrap(), Signal::KILL);
    assert_eq!(resolved.job, JobId(321));
}

#[test]
fn a_thread_resolves_to_its_process_job_under_the_process_name() {
    let uid = real_uid();
    let process_comm = comm_of(std::process::id()).unwrap();
    let (tid_tx, tid_rx) = std::sync::mpsc::channel();
    let (stop_tx, stop_rx) = std::sync::mpsc::channel::<()>();
    let worker = std::thread::Builder::new()
        .name("ident-worker".to_owned())
        .spawn(move || {
            tid_tx
                .send(rustix::thread::gettid().as_raw_nonzero().get() as u32)
                .unwrap();
            let _ = stop_rx.recv();
        })
        .unwrap();
    let tid = tid_rx.recv().unwrap();
    let resolver = JobResolver::new(IdentConfig {
        sources: vec![Source::ProcnameUid],
        ..IdentConfig::default()
    })
    .unwrap();
    let by_thread = resolver.resolve(tid, uid);
    let by_process = resolver.resolve(std::process::id(), uid);
    assert_eq!(
        comm_of(tid).as_deref(),
        Some("ident-worker"),
        "the thread has its own name"
    );
    assert_eq!(by_thread.name, format!("{process_comm}.{uid}"));
    assert_eq!(by_thread, by_process);
    assert_eq!(resolver.resolve(tid, uid), by_thread);
    assert_eq!(resolver.stats().hits, 1, "a live thread's entry is used");
    drop(stop_tx);
    worker.join().unwrap();
}

#[test]
fn an_exited_child_is_never_answered_from_the_cache() {
    let mut child = spawn(&[("IOSETS_JOB_ID", "123")], "sleep", &["30"]);
    let (pid, uid) = (child.pid(), real_uid());
    let resolver = real_resolver();
    assert_eq!(resolver.resolve(pid, uid).job, JobId(123));
    assert_eq!(resolver.resolve(pid, uid).job, JobId(123));
    assert_eq!(counts(&resolver), (1, [1, 0, 0], 1));

    // Killed but not reaped: a zombie still has its pid, but the pidfd says it has exited.
    child.0.kill().unwrap();
    wait_until("the child to die", || {
        fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| stat.contains(") Z "))
    });
    let zombie = resolver.resolve(pid, uid);
    // Its environment is gone with its memory; what is read is not cached.
    assert_eq!(
        (zombie.name, zombie.source),
        (format!("sleep.{uid}"), Source::ProcnameUid)
    );
    assert_eq!(counts(&resolver), (1, [1, 0, 1], 0));
    assert_eq!(resolver.stats().uncached, 1);

    // Reaped: the pid is free for reuse; nothing of the old entry remains.
    child.0.wait().unwrap();
    assert_eq!(resolver.resolve(pid, uid).name, format!("unknown.{uid}"));
    assert_eq!(counts(&resolver), (1, [2, 0, 1], 0));
    assert_eq!(resolver.stats().pidfds, 0);
}

#[test]
fn a_real_tid_with_a_zero_ttl_is_read_again_at_every_call() {
    let child = spawn(&[("IOSETS_JOB_ID", "123")], "sleep", &["30"]);
    let resolver = JobResolver::new(IdentConfig {
        sources: vec![Source::Env],
        ttl: Duration::ZERO,
        fallback_ttl: Duration::ZERO,
        ..IdentConfig::default()
    })
    .unwrap();
    for _ in 0..3 {
        assert_eq!(resolver.resolve(child.pid(), real_uid()).job, JobId(123));
    }
    assert_eq!(counts(&resolver), (0, [1, 2, 0], 1));
    // The expired entry's pidfd is reused, not reopened: still one.
    assert_eq!(resolver.stats().pidfds, 1);
}

#[test]
fn the_pidfd_check_refuses_a_proc_root_that_is_not_this_processes_procfs() {
    let proc = FakeProc::new();
    let cfg = IdentConfig {
        proc_root: proc.root().to_owned(),
        ..IdentConfig::default()
    };
    assert!(matches!(
        JobResolver::new(cfg),
        Err(IdentError::ProcRoot { .. })
    ));
}

/// The counters the caching tests pin: hits, misses (new, expired, stale), entries.
fn counts(resolver: &JobResolver) -> (u64, [u64; 3], u64) {
    let s = resolver.stats();
    (
        s.hits,
        [s.misses_new, s.misses_expired, s.misses_stale],
        s.entries,
    )
}

/// Counts `WARN` events.
struct CountWarnings(Arc<AtomicUsize>);

impl tracing::Subscriber for CountWarnings {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }

    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}

    fn event(&self, event: &tracing::Event<'_>) {
        if *event.metadata().level() == tracing::Level::WARN {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn enter(&self, _: &tracing::span::Id) {}

    fn exit(&self, _: &tracing::span::Id) {}
}
