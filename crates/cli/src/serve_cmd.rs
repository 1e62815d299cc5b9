//! `iosets serve` and `iosets ctl`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{ArgAction, Args, Subcommand};

use iosets_client::{BlockingClient, ClientConfig};
use iosets_policy::tunables::parse_pairs;
use iosets_proto::{Control, JobsReport, Reply, RulesReport, ServerReport, WaitCausesReport};
use iosets_server::settings::{Kind, Setting, Value, SETTINGS};
use iosets_server::{read_auth_file, read_token_file, Server, ServerConfig};
use iosets_types::{JobId, Priority};

use crate::top::wait;

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// A configuration file (iosets.toml); the flags below override its values.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    #[command(flatten)]
    settings: SettingFlags,
}

/// The flags of `iosets serve` for the server's settings, made from the one definition of each
/// ([`SETTINGS`]: name, value, help, conflicts), and the values given, in the settings' order.
#[derive(Clone, Debug, Default)]
pub(crate) struct SettingFlags(Vec<(&'static Setting, Value)>);

impl SettingFlags {
    /// The value given for the setting `key`, if its flag was given.
    fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(s, _)| s.key == key).map(|(_, v)| v)
    }
}

/// `KEY=VALUE`, as `--policy-opt` takes it.
fn key_value(arg: &str) -> std::result::Result<(String, String), String> {
    match parse_pairs(&[arg]) {
        Ok(mut pairs) => Ok(pairs.remove(0)),
        Err(e) => Err(e.to_string()),
    }
}

impl clap::Args for SettingFlags {
    fn augment_args(cmd: clap::Command) -> clap::Command {
        let flagged = |key: &str| Setting::named(key).is_some_and(|s| s.flag.is_some());
        cmd.args(SETTINGS.iter().filter_map(|s| {
            let flag = s.flag?;
            let help = s.help.strip_suffix('.').unwrap_or(s.help);
            let arg = clap::Arg::new(s.key).long(flag).help(help);
            let arg = match s.kind {
                Kind::Switch => arg.action(ArgAction::SetTrue),
                Kind::Count => arg.value_parser(clap::value_parser!(u64)),
                Kind::Number => arg
                    .value_parser(clap::value_parser!(f64))
                    .allow_negative_numbers(true),
                Kind::Text | Kind::Word => arg.value_parser(clap::value_parser!(String)),
                Kind::Path | Kind::Table => arg.value_parser(clap::value_parser!(PathBuf)),
                Kind::Pairs => arg.value_parser(key_value).action(ArgAction::Append),
            };
            let arg = match s.kind {
                Kind::Switch => arg,
                _ => arg.value_name(s.value_name),
            };
            let arg = match s.excludes.filter(|o| flagged(o)) {
                Some(other) => arg.conflicts_with(other),
                None => arg,
            };
            Some(match s.requires {
                Some(other) => arg.requires(other),
                None => arg,
            })
        }))
    }

    fn augment_args_for_update(cmd: clap::Command) -> clap::Command {
        SettingFlags::augment_args(cmd)
    }
}

impl clap::FromArgMatches for SettingFlags {
    fn from_arg_matches(m: &clap::ArgMatches) -> std::result::Result<Self, clap::Error> {
        let mut given = Vec::new();
        for s in SETTINGS.iter().filter(|s| s.flag.is_some()) {
            let value = match s.kind {
                Kind::Switch => m.get_flag(s.key).then_some(Value::Switch(true)),
                Kind::Count => m.get_one::<u64>(s.key).map(|n| Value::Count(*n)),
                Kind::Number => m.get_one::<f64>(s.key).map(|x| Value::Number(*x)),
                Kind::Text | Kind::Word => m.get_one::<String>(s.key).cloned().map(Value::Text),
                Kind::Path | Kind::Table => m.get_one::<PathBuf>(s.key).cloned().map(Value::Path),
                Kind::Pairs => m
                    .get_many::<(String, String)>(s.key)
                    .map(|pairs| Value::Pairs(pairs.cloned().collect())),
            };
            given.extend(value.map(|v| (s, v)));
        }
        Ok(SettingFlags(given))
    }

    fn update_from_arg_matches(
        &mut self,
        m: &clap::ArgMatches,
    ) -> std::result::Result<(), clap::Error> {
        *self = SettingFlags::from_arg_matches(m)?;
        Ok(())
    }
}

/// The configuration `iosets serve` runs with: the file's (or `--root`'s defaults), then every
/// flag given over it, checked.
fn configuration(args: &ServeArgs) -> Result<ServerConfig> {
    let flags = &args.settings;
    let mut config = match (&args.config, flags.get("root")) {
        (Some(path), _) => ServerConfig::from_toml_file(path)?,
        (None, Some(Value::Path(root))) => ServerConfig::new(root),
        (None, _) => bail!("give --root DIR or --config iosets.toml"),
    };
    if args.config.is_none() && flags.get("listen").is_none() {
        config.listen = "127.0.0.1:7070".into();
    }
    for (setting, value) in &flags.0 {
        setting
            .apply(&mut config, value.clone())
            .map_err(|e| anyhow::anyhow!("--{}: {e}", setting.flag.unwrap_or(setting.key)))?;
    }
    config.handle_signals = true;
    config.validate()?;
    Ok(config)
}

pub(crate) fn serve(args: &ServeArgs) -> Result<()> {
    let mut config = configuration(args)?;
    // The easy path is the safe one: no secret given and the host not trusted explicitly, the
    // node's default secret (made now if this is the first start).
    let mut secret_note = String::new();
    if config.auth.is_none() && !config.insecure_loopback {
        let path = iosets_proto::auth::default_path()?;
        let (secret, made) = iosets_proto::auth::Secret::load_or_create(&path)?;
        config.auth = Some(secret);
        secret_note = format!(
            " {} {}",
            if made { "made now in" } else { "from" },
            path.display()
        );
    }
    let handle = Server::start(config.clone())?;
    println!(
        "iosets serve: listening on {} (policy {}{}, {} workers{}, root {}; control {}; \
         authentication {}); metrics at {}",
        handle.addr(),
        config.policy,
        if config.auto_priority {
            " with automatic priorities"
        } else {
            ""
        },
        config.workers,
        config
            .throttle_mib_s
            .map_or(String::new(), |r| format!(", emulated device {r} MiB/s")),
        config.root.display(),
        if config.token.is_some() {
            "enabled"
        } else {
            "disabled (no token)"
        },
        if config.auth.is_some() {
            format!("by cluster secret{secret_note}")
        } else {
            "none: any local user can act as any user (--insecure-loopback)".to_string()
        },
        handle
            .admin_addr()
            .map_or_else(|| "nowhere".to_string(), |a| format!("http://{a}/metrics")),
    );
    let _ = std::io::stdout().flush();
    let report = handle.wait()?;
    println!(
        "iosets serve: stopped; {} requests completed, {} files fsynced, counters {}",
        report.completed,
        report.fsynced_files,
        if report.balanced {
            "balanced"
        } else {
            "NOT balanced"
        }
    );
    if !report.balanced {
        bail!("the conservation counters did not balance at shutdown");
    }
    Ok(())
}

#[derive(Debug, Args)]
pub(crate) struct CtlArgs {
    /// A server (host:port); repeat the flag for several (a mount's servers): a change
    /// (priority, policy, rule) goes to every one, a report (jobs, stats, rule list) comes from
    /// each, `why` sums the job's waits over them. Before or after the command.
    #[arg(long, value_name = "ADDR", global = true)]
    server: Vec<String>,
    /// File holding the control token (or set IOSETS_TOKEN).
    #[arg(long, value_name = "FILE", global = true)]
    token_file: Option<PathBuf>,
    /// Print the raw JSON report (jobs, stats, why); with several servers, one line per server:
    /// `{"server": ADDR, "report": REPORT}`.
    #[arg(long, global = true)]
    json: bool,
    /// The cluster's shared secret file (default: the node's, where `iosets serve` makes it:
    /// /etc/iosets/secret for root, ~/.local/state/iosets/secret for another user).
    #[arg(long, value_name = "FILE", env = "IOSETS_AUTH_FILE", global = true)]
    auth_file: Option<PathBuf>,
    #[command(subcommand)]
    command: CtlCommand,
}

#[derive(Debug, Subcommand)]
pub(crate) enum CtlCommand {
    /// Per-job statistics (like beegfs-ctl --jobstats).
    Jobs,
    /// Give a job a priority (positive number; IO-SETS set i has priority 10^-i).
    SetPriority {
        /// The job: its id, or its name as the mount names jobs (IOSETS_JOB_ID=myjob, or
        /// procname.uid).
        #[arg(value_parser = job_arg)]
        job: u64,
        /// The priority.
        priority: f64,
    },
    /// Forget the priority given to a job.
    ClearPriority {
        /// The job: its id, or its name as the mount names jobs.
        #[arg(value_parser = job_arg)]
        job: u64,
    },
    /// Switch the scheduling policy; queued requests move to the new one.
    Policy {
        /// The policy's name.
        name: String,
        /// Its tunables, KEY=VALUE.
        options: Vec<String>,
    },
    /// Server statistics and the conservation counters.
    Stats,
    /// Quota rules (thread quotas, rates, reservations): add, list, delete, at run time.
    #[command(subcommand)]
    Rule(RuleCommand),
    /// Share weights of the fair-share tree (`--policy wfq --policy-opt key=account,user,job`):
    /// set, clear, list; kept in the server's state file.
    #[command(subcommand)]
    Share(ShareCommand),
    /// Tell the servers a job's Slurm account and node count (the SPANK plugin does it at job
    /// start, and clears it at the end): the fair-share tree places the job under its account
    /// and `size-fair` weighs it by its nodes.
    JobInfo {
        /// The job: its id, or its name as the mount names jobs.
        #[arg(value_parser = job_arg)]
        job: u64,
        /// Its Slurm account.
        #[arg(long, value_name = "NAME", conflicts_with = "clear")]
        account: Option<String>,
        /// How many nodes it runs on.
        #[arg(long, value_name = "N", conflicts_with = "clear",
              value_parser = clap::value_parser!(u32).range(1..))]
        nodes: Option<u32>,
        /// Forget the job's account and node count.
        #[arg(long)]
        clear: bool,
    },
    /// Why did a job wait: its queue waits split by cause (quota rule, its own requests on the
    /// device, another job of its set, other sets' share, the policy), summed over the servers.
    Why {
        /// The job: its id, or its name as the mount names jobs.
        #[arg(value_parser = job_arg)]
        job: u64,
    },
}

/// `iosets ctl rule`.
#[derive(Debug, Subcommand)]
pub(crate) enum RuleCommand {
    /// Add a rule: requests matching MATCH fall under it (the first matching rule governs).
    Add {
        /// The rule's name (letters, digits, -, _, .).
        name: String,
        /// What it matches: `*`, or key=value terms that must all hold, e.g.
        /// "job={1 2} class=meta", "job={dd.1000 myjob}", "user=alice", "account=physics",
        /// "client=10.0.0.0/8". Keys: job (ids or names as the mount names jobs), uid (user),
        /// gid (group), account (the job's Slurm account: `ctl job-info`), client, class
        /// (data-read, data-write, meta).
        #[arg(value_name = "MATCH")]
        matcher: String,
        /// Percentage of the service threads its requests may hold (seed 003), e.g. 71 or 71%.
        #[arg(long, value_name = "P%")]
        threads: Option<String>,
        /// Operations per second per job (Lustre NRS TBF's rate), weighed by each operation's
        /// cost (`[op_cost]` of the quota: create 3 by default, others 1).
        #[arg(long, value_name = "OPS")]
        rate: Option<f64>,
        /// Bytes per second per job, with an optional K, M, G suffix (powers of 1024).
        #[arg(long, value_name = "BYTES")]
        rate_bytes: Option<String>,
        /// Make the rates hard caps (by default a rate lends idle capacity).
        #[arg(long)]
        strict: bool,
        /// One rate for every job of the rule together (a project's cap), job-wide across
        /// servers; by default each job has the rate.
        #[arg(long)]
        per_rule: bool,
        /// Operations per second per job served ahead of every weight (mClock reservation).
        #[arg(long, value_name = "OPS")]
        reserve: Option<f64>,
        /// Share of contended threads relative to other rules (mClock weight; default 1).
        #[arg(long, value_name = "W")]
        weight: Option<f64>,
        /// Its position among the rules, 0 first (default: last).
        #[arg(long, value_name = "N")]
        rank: Option<u32>,
    },
    /// List the rules in order with their counters.
    List,
    /// Delete a rule; the requests it holds fall under the remaining rules.
    Del {
        /// The rule's name.
        name: String,
    },
}

/// `iosets ctl share`.
#[derive(Debug, Subcommand)]
pub(crate) enum ShareCommand {
    /// Give a node of the tree a weight among its siblings (every node weighs 1 by default).
    Set {
        /// The node: account=NAME, user=NAME|UID, set=PRIORITY (IO-SETS' set) or job=ID|NAME.
        #[arg(value_parser = share_node)]
        node: String,
        /// Its weight, a number > 0.
        weight: f64,
    },
    /// Put a node back to weight 1.
    Clear {
        /// The node: account=NAME, user=NAME|UID, set=PRIORITY or job=ID|NAME.
        #[arg(value_parser = share_node)]
        node: String,
    },
    /// The weights set, the active policy's tree levels, and the jobs' accounts.
    List,
}

/// A share node as the servers take it: a job's name becomes its id, as the mount hashes it.
fn share_node(s: &str) -> std::result::Result<String, String> {
    match s.split_once('=') {
        Some((level, name)) if level.trim() == "job" => {
            Ok(format!("job={}", job_arg(name.trim())?))
        }
        Some(_) => Ok(s.to_owned()),
        None => Err(format!(
            "`{s}` is not level=name (account=NAME, user=NAME|UID, set=PRIORITY, job=ID|NAME)"
        )),
    }
}

/// `71`, `71%` or `71.5 %` as a percentage.
fn percent(text: &str) -> Result<f64> {
    let t = text.trim().trim_end_matches('%').trim();
    t.parse::<f64>()
        .ok()
        .filter(|p| p.is_finite())
        .with_context(|| format!("--threads {text}: not a percentage (e.g. 71 or 71%)"))
}

/// `1048576`, `512K`, `100M`, `1.5G` (powers of 1024; a trailing `B`, `iB` or `/s` allowed).
fn bytes_per_sec(text: &str) -> Result<f64> {
    let t = text.trim().trim_end_matches("/s");
    let t = t
        .strip_suffix("iB")
        .or_else(|| t.strip_suffix('B'))
        .unwrap_or(t);
    let (num, mult) = match t.char_indices().last() {
        Some((i, c)) if c.eq_ignore_ascii_case(&'k') => (&t[..i], 1024.0),
        Some((i, c)) if c.eq_ignore_ascii_case(&'m') => (&t[..i], 1024.0 * 1024.0),
        Some((i, c)) if c.eq_ignore_ascii_case(&'g') => (&t[..i], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    num.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * mult)
        .with_context(|| format!("--rate-bytes {text}: not a byte rate (e.g. 100M, 512K)"))
}

/// The JSON `[[rule]]` table of `iosets ctl rule add`.
fn rule_json(cmd: &RuleCommand) -> Result<Option<(String, Option<u32>)>> {
    let RuleCommand::Add {
        name,
        matcher,
        threads,
        rate,
        rate_bytes,
        strict,
        per_rule,
        reserve,
        weight,
        rank,
    } = cmd
    else {
        return Ok(None);
    };
    let mut rule = serde_json::Map::new();
    rule.insert("name".into(), name.clone().into());
    rule.insert("match".into(), matcher.clone().into());
    let mut put = |k: &str, v: Option<f64>| {
        if let Some(v) = v {
            rule.insert(k.into(), v.into());
        }
    };
    put("threads_pct", threads.as_deref().map(percent).transpose()?);
    put("rate_ops", *rate);
    put(
        "rate_bytes",
        rate_bytes.as_deref().map(bytes_per_sec).transpose()?,
    );
    put("reserve_ops", *reserve);
    put("weight", *weight);
    if *strict {
        rule.insert("strict".into(), true.into());
    }
    if *per_rule {
        rule.insert("rate_scope".into(), "rule".into());
    }
    Ok(Some((serde_json::Value::Object(rule).to_string(), *rank)))
}

fn token(args: &CtlArgs) -> Result<String> {
    control_token(args.token_file.as_deref())
}

/// The control token of `iosets ctl` and `iosets top`: `--token-file`, else IOSETS_TOKEN.
pub(crate) fn control_token(token_file: Option<&Path>) -> Result<String> {
    if let Some(f) = token_file {
        return Ok(read_token_file(f)?);
    }
    match std::env::var("IOSETS_TOKEN") {
        Ok(t) if !t.trim().is_empty() => Ok(t.trim().to_string()),
        _ => bail!("give --token-file FILE or set IOSETS_TOKEN"),
    }
}

pub(crate) fn ctl(args: &CtlArgs) -> Result<()> {
    if args.server.is_empty() {
        bail!("ctl needs --server ADDR (repeat it for each server, e.g. every server of a mount)");
    }
    if let CtlCommand::Why { job } = args.command {
        return why(args, job);
    }
    let op = match &args.command {
        CtlCommand::Why { .. } => unreachable!("answered above"),
        CtlCommand::Jobs => Control::Jobs,
        CtlCommand::Stats => Control::Stats,
        CtlCommand::SetPriority { job, priority } => Control::SetPriority {
            job: JobId(*job),
            priority: Priority::new(*priority)
                .with_context(|| format!("priority {priority} must be a finite positive number"))?,
        },
        CtlCommand::ClearPriority { job } => Control::ClearPriority { job: JobId(*job) },
        CtlCommand::Policy { name, options } => Control::Policy {
            name: name.clone(),
            options: parse_pairs(options)?,
        },
        CtlCommand::Rule(RuleCommand::List) => Control::Rules,
        CtlCommand::Rule(RuleCommand::Del { name }) => Control::RuleDel { name: name.clone() },
        CtlCommand::Rule(add) => {
            let (rule, rank) = rule_json(add)?.expect("an add command");
            Control::RuleAdd { rule, rank }
        }
        CtlCommand::Share(ShareCommand::Set { node, weight }) => {
            if !(weight.is_finite() && *weight > 0.0) {
                bail!("share {node}: the weight must be a finite number > 0, not {weight}");
            }
            Control::ShareSet {
                node: node.clone(),
                weight: Some(*weight),
            }
        }
        CtlCommand::Share(ShareCommand::Clear { node }) => Control::ShareSet {
            node: node.clone(),
            weight: None,
        },
        CtlCommand::Share(ShareCommand::List) => Control::Shares,
        CtlCommand::JobInfo {
            job,
            account,
            nodes,
            clear,
        } => {
            if !clear && account.is_none() && nodes.is_none() {
                bail!("job-info needs --account NAME, --nodes N, or --clear");
            }
            Control::JobInfo {
                job: JobId(*job),
                account: account.clone(),
                nodes: *nodes,
            }
        }
    };
    let token = token(args)?;
    if let [server] = args.server.as_slice() {
        let reply = control(args, server, &token, op)?;
        return print_reply(args, None, reply);
    }
    // Several servers: each is asked, a failure is reported and the others still are.
    let mut failed = 0;
    for server in &args.server {
        let answered = control(args, server, &token, op.clone())
            .and_then(|reply| print_reply(args, Some(server.as_str()), reply));
        if let Err(e) = answered {
            eprintln!("error: {server}: {}", crate::error_text(&e));
            failed += 1;
        }
    }
    if failed > 0 {
        bail!("{failed} of {} servers failed", args.server.len());
    }
    Ok(())
}

/// Prints `reply`, from `server` when there are several (a heading, or a JSON line naming it).
fn print_reply(args: &CtlArgs, server: Option<&str>, reply: Reply) -> Result<()> {
    if let (Some(server), Reply::Json(text)) = (server, &reply) {
        if args.json {
            let report: serde_json::Value = serde_json::from_str(text)?;
            println!(
                "{}",
                serde_json::json!({ "server": server, "report": report })
            );
            return Ok(());
        }
        println!("== {server}");
    }
    match (&args.command, reply) {
        (_, Reply::Json(text)) if args.json => println!("{text}"),
        (CtlCommand::Jobs, Reply::Json(text)) => print_jobs(&serde_json::from_str(&text)?),
        (CtlCommand::Stats, Reply::Json(text)) => print_stats(&serde_json::from_str(&text)?),
        (CtlCommand::Rule(_), Reply::Json(text)) => print_rules(&serde_json::from_str(&text)?),
        (CtlCommand::Share(_), Reply::Json(text)) => print_shares(&serde_json::from_str(&text)?),
        (_, Reply::Done) => match server {
            Some(server) => println!("ok: {server}"),
            None => println!("ok"),
        },
        (_, other) => bail!("unexpected reply {other:?}"),
    }
    Ok(())
}

/// Sends `op` to `server` and returns its reply.
fn control(args: &CtlArgs, server: &str, token: &str, op: Control) -> Result<Reply> {
    // The client library's connection, no retries: a control request is answered or reported.
    let mut cfg = ClientConfig::new(JobId(0));
    cfg.retries = 0;
    cfg.connect_timeout = Duration::from_secs(5);
    cfg.auth = match &args.auth_file {
        Some(f) => Some(read_auth_file(f)?),
        None => ClientConfig::auth_default()?,
    };
    let client = BlockingClient::connect_to(&[server], cfg)?;
    Ok(client.control(0, token, op)?)
}

/// A job argument: a decimal id (as `iosets ctl jobs` shows them), or a job's name, hashed as
/// the mount hashes it ([`iosets_mount::ident::job_named`]).
fn job_arg(s: &str) -> std::result::Result<u64, String> {
    iosets_mount::ident::job_named(s)
        .map(|j| j.0)
        .map_err(|e| e.to_string())
}

/// `iosets ctl why JOB`: the job's line from every server, its wait causes summed.
fn why(args: &CtlArgs, job: u64) -> Result<()> {
    let token = token(args)?;
    let mut parts: Vec<(String, WaitCausesReport)> = Vec::new();
    for server in &args.server {
        let reply = control(args, server, &token, Control::Jobs)
            .with_context(|| format!("asking {server}"))?;
        let Reply::Json(text) = reply else {
            bail!("unexpected reply {reply:?} from {server}");
        };
        let report: JobsReport =
            serde_json::from_str(&text).with_context(|| format!("the report of {server}"))?;
        if let Some(j) = report.jobs.iter().find(|j| j.job == job) {
            parts.push((server.clone(), j.wait_causes));
        }
    }
    if parts.is_empty() {
        bail!(
            "job {job} is not known to {} (it did no I/O there yet, or it was forgotten)",
            if args.server.len() == 1 {
                "the server".to_string()
            } else {
                format!("any of the {} servers", args.server.len())
            }
        );
    }
    let mut total = WaitCausesReport::default();
    for (_, p) in &parts {
        total.merge(p);
    }
    if args.json {
        let servers: Vec<_> = parts
            .iter()
            .map(|(s, p)| serde_json::json!({ "server": s, "wait_causes": p }))
            .collect();
        let v = serde_json::json!({ "job": job, "total": total, "servers": servers });
        println!("{}", serde_json::to_string_pretty(&v)?);
        return Ok(());
    }
    print!("{}", why_text(job, parts.len(), &total));
    Ok(())
}

/// The one-line verdict on `c`'s dominant cause.
fn verdict(c: &WaitCausesReport) -> String {
    let Some((name, top)) = c.dominant() else {
        return "it never waited".into();
    };
    let what = match name {
        "rule" => "held by a quota rule (thread quota, rate or reservation)",
        "device" => "behind its own requests: every thread busy with them (the device)",
        "exclusivity" => "behind another job of its set (exclusivity)",
        "share" => "behind jobs of other sets (their share)",
        _ => {
            "not dispatched though a thread was free: a policy timer, or the workers' own \
              time between batches (policy)"
        }
    };
    let pct = 100.0 * top.ns as f64 / c.wait_ns.max(1) as f64;
    let how = if pct > 50.0 { "mostly" } else { "most of all" };
    format!("{how} {what}: {pct:.1}% of the wait")
}

/// The text of `iosets ctl why`.
fn why_text(job: u64, servers: usize, c: &WaitCausesReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let on = if servers == 1 {
        String::new()
    } else {
        format!(" over {servers} servers")
    };
    let mean = c.wait_ns.checked_div(c.requests).unwrap_or(0);
    let _ = writeln!(
        out,
        "job {job}{on}: {} requests waited {} in all (mean {})",
        c.requests,
        duration(c.wait_ns),
        duration(mean)
    );
    let _ = writeln!(
        out,
        "  {:<12} {:>16} {:>7} {:>9}",
        "cause", "ns", "%", "requests"
    );
    for (name, part) in c.causes() {
        let pct = 100.0 * part.ns as f64 / c.wait_ns.max(1) as f64;
        let _ = writeln!(
            out,
            "  {:<12} {:>16} {:>6.1}% {:>9}",
            name, part.ns, pct, part.requests
        );
    }
    if c.causes_ns() != c.wait_ns {
        // A server that does not split waits (older) reports no causes.
        let _ = writeln!(
            out,
            "  {:<12} {:>16}",
            "unsplit",
            c.wait_ns.saturating_sub(c.causes_ns())
        );
    }
    let _ = writeln!(out, "verdict: {}", verdict(c));
    out
}

/// `ns` for a person: ns, µs, ms or s.
fn duration(ns: u64) -> String {
    let f = ns as f64;
    if ns >= 1_000_000_000 {
        format!("{:.2} s", f / 1e9)
    } else if ns >= 1_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else if ns >= 1_000 {
        format!("{:.1} us", f / 1e3)
    } else {
        format!("{ns} ns")
    }
}

/// The dominant wait cause of a job line and its part, e.g. `excl 71%` (`-` if it never
/// waited).
fn top_cause(c: &WaitCausesReport) -> String {
    match c.dominant() {
        None => "-".into(),
        Some((name, part)) => format!(
            "{} {:.0}%",
            &name[..name.len().min(4)],
            100.0 * part.ns as f64 / c.wait_ns.max(1) as f64
        ),
    }
}

fn print_jobs(r: &JobsReport) {
    println!("policy: {}", r.policy);
    println!(
        "{:>8} {:>10} {:>4} {:>8} {:>9} {:>9} {:>10} {:>10} {:>9} {:>9} {:>7} {:>7} {:>10} {:>10} {:>10}  peers",
        "job",
        "priority",
        "set",
        "source",
        "period",
        "ops",
        "read MiB",
        "write MiB",
        "MiB/s 1s",
        "MiB/s 10s",
        "queued",
        "in svc",
        "wait p50",
        "wait p99",
        "waited on"
    );
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    for j in &r.jobs {
        println!(
            "{:>8} {:>10} {:>4} {:>8} {:>9} {:>9} {:>10.1} {:>10.1} {:>9.1} {:>9.1} {:>7} {:>7} {:>10} {:>10} {:>10}  {}",
            // Its name when its client told it (`procname.uid` rather than a 20-digit hash).
            j.name.clone().unwrap_or_else(|| j.job.to_string()),
            j.priority.map_or("-".into(), |p| format!("{p}")),
            j.set.map_or("-".into(), |s| s.to_string()),
            j.source_name(),
            j.period_s.map_or("-".into(), |p| format!("{p:.2}s")),
            j.ops,
            mib(j.bytes_read),
            mib(j.bytes_written),
            j.bw_1s_mib_s,
            j.bw_10s_mib_s,
            j.queued,
            j.in_service,
            wait(j.queue_wait.p50_us),
            wait(j.queue_wait.p99_us),
            top_cause(&j.wait_causes),
            if j.peers.is_empty() {
                "-".to_string()
            } else {
                j.peers.join(",")
            },
        );
    }
}

fn print_rules(r: &RulesReport) {
    println!(
        "{} service threads; a job holds at most {}% of its rule's; idle threads {}",
        r.threads,
        r.job_share_pct,
        if r.lend { "lent" } else { "not lent" }
    );
    if r.rules.is_empty() {
        println!("no rules: no request is held back");
        return;
    }
    println!(
        "{:>4} {:<16} {:<24} {:<28} {:>7} {:>7} {:>7} {:>6} {:>10} {:>10} {:>9} {:>9}  jobs",
        "rank",
        "name",
        "match",
        "limits",
        "threads",
        "in svc",
        "peak",
        "held",
        "admitted",
        "lent",
        "thread s",
        "rate s"
    );
    for x in &r.rules {
        let jobs: Vec<String> = x.jobs.iter().map(u64::to_string).collect();
        println!(
            "{:>4} {:<16} {:<24} {:<28} {:>7} {:>7} {:>7} {:>6} {:>10} {:>10} {:>9.1} {:>9.1}  {}",
            x.rank,
            x.name,
            x.matcher,
            x.limits,
            x.threads.map_or("-".into(), |t| t.to_string()),
            x.in_service,
            x.peak_in_service,
            x.held,
            x.admitted_total,
            x.lent_total,
            x.held_threads_s,
            x.held_rate_s,
            if jobs.is_empty() {
                "-".into()
            } else {
                jobs.join(",")
            }
        );
    }
    // Who each rule held most: "thread s / rate s" per job and user.
    let list = |v: &[iosets_proto::HeldReport]| -> String {
        v.iter()
            .map(|h| format!("{} ({:.1}/{:.1})", h.id, h.threads_s, h.rate_s))
            .collect::<Vec<_>>()
            .join(", ")
    };
    for x in &r.rules {
        let t = &x.top;
        if t.jobs_1h.is_empty() {
            continue;
        }
        println!("{}: held most (thread s/rate s)", x.name);
        for (what, v) in [
            ("jobs, last minute", &t.jobs_1m),
            ("users, last minute", &t.users_1m),
            ("jobs, last hour", &t.jobs_1h),
            ("users, last hour", &t.users_1h),
        ] {
            if !v.is_empty() {
                println!("  {what:<18} {}", list(v));
            }
        }
    }
}

fn print_shares(r: &iosets_proto::SharesReport) {
    if r.levels.is_empty() {
        println!(
            "policy {}: no fair-share tree (the weights wait for `wfq key=account,user,job` or \
             a preset)",
            r.policy
        );
    } else {
        println!("policy {}: tree {}", r.policy, r.levels.join(" > "));
    }
    if r.shares.is_empty() {
        println!("no weights set: every node weighs 1");
    } else {
        println!("{:<32} {:>10}", "node", "weight");
        for s in &r.shares {
            println!("{:<32} {:>10}", s.node, s.weight);
        }
    }
    if !r.jobs.is_empty() {
        println!("{:>20} {:<24} {:>6}", "job", "account", "nodes");
        for j in &r.jobs {
            println!(
                "{:>20} {:<24} {:>6}",
                j.job,
                j.account.as_deref().unwrap_or("-"),
                j.nodes.map_or("-".into(), |n| n.to_string())
            );
        }
    }
}

fn print_stats(s: &ServerReport) {
    println!("policy            {}", s.policy);
    println!("uptime            {:.1} s", s.uptime_s);
    println!("workers           {}", s.workers);
    match s.throttle_mib_s {
        Some(r) => println!("emulated device   {r} MiB/s"),
        None => println!("emulated device   none"),
    }
    println!("connections       {}", s.connections);
    println!(
        "frames            {} ({} malformed)",
        s.frames, s.bad_frames
    );
    println!("error replies     {}", s.errors);
    println!("bytes read        {}", s.bytes_read);
    println!("bytes written     {}", s.bytes_written);
    println!("submitted         {}", s.submitted);
    println!(
        "counters          inserted {} merged {} dispatched {} completed {} failed {} withdrawn {}",
        s.inserted, s.merged, s.dispatched, s.completed, s.failed, s.withdrawn
    );
    println!("queued now        {}", s.queued);
    println!("in service now    {}", s.in_service);
    println!("policy switches   {}", s.switches);
    println!(
        "balance           {}",
        if s.balanced { "ok" } else { "NOT BALANCED" }
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    /// The configuration of `iosets serve ARGS`.
    fn configured(args: &[&str]) -> Result<ServerConfig> {
        let mut argv = vec!["iosets", "serve"];
        argv.extend(args);
        match crate::Cli::try_parse_from(argv)?.command {
            crate::Command::Serve(a) => configuration(&a),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn every_flagged_setting_is_a_flag_and_flags_override_the_file() {
        use clap::CommandFactory;
        let cli = crate::Cli::command();
        let serve = cli.find_subcommand("serve").unwrap();
        for s in SETTINGS {
            let long = serve.get_arguments().find(|a| a.get_id() == s.key);
            assert_eq!(long.and_then(|a| a.get_long()), s.flag, "{}", s.key);
        }
        let dir = std::env::temp_dir().join(format!("iosets-serve-flags-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let file = dir.join("iosets.toml");
        std::fs::write(
            &file,
            "root = \"data\"\nworkers = 8\ninsecure_loopback = true\nmax_inflight_mib = 64\n\
             [policy_options]\nmax_exclusive_ms = 10\n",
        )
        .unwrap();
        let file = file.to_str().unwrap();
        let c = configured(&["--config", file]).unwrap();
        assert_eq!((c.workers, c.insecure_loopback), (8, true));
        assert_eq!(c.max_inflight_bytes, 64 << 20);
        assert_eq!(
            c.listen, "127.0.0.1:0",
            "the file's default, not the flags'"
        );
        let key = dir.join("k");
        std::fs::write(&key, "0123456789abcdef0123456789abcdef\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600)).unwrap();
        let c = configured(&[
            "--config",
            file,
            "--workers",
            "3",
            "--max-inflight-mib",
            "8",
            "--policy-opt",
            "max_exclusive_ms=20",
            "--auth-file",
            key.to_str().unwrap(),
        ])
        .unwrap();
        assert_eq!(c.workers, 3);
        assert_eq!(c.max_inflight_bytes, 8 << 20);
        assert_eq!(c.policy_options, [("max_exclusive_ms".into(), "20".into())]);
        assert!(c.auth.is_some() && !c.insecure_loopback, "the secret holds");
        let e = configured(&["--config", file, "--max-inflight-mib", "0"]).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("--max-inflight-mib: max_inflight_mib = 0"),
            "{e}"
        );
        let root = dir.join("data");
        let c = configured(&["--root", root.to_str().unwrap()]).unwrap();
        assert_eq!(c.listen, "127.0.0.1:7070");
        assert!(configured(&[]).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
