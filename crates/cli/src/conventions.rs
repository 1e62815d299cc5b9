//! What a Unix tool is expected to ship beside its commands: shell completions
//! (`iosets completions SHELL`), manual pages (`iosets man`), and a check of a configuration file
//! before a server is started with it (`iosets config check FILE`).
//!
//! Completions and pages are generated from the same clap definition as the parser, so they
//! cannot drift from it; the Debian package (`scripts/package.sh`) ships both.

use std::io::Write;
use std::net::ToSocketAddrs;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use clap_complete::Shell;

use iosets_server::ServerConfig;

/// Arguments of `iosets completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish, elvish or powershell.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Arguments of `iosets man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// Write every page (iosets.1, iosets-serve.1, iosets-ctl-rule-add.1, …) into this
    /// directory (created if missing); without it, the main page goes to standard output.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// `iosets config`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Check a server configuration file (iosets.toml) as `iosets serve --config FILE` would
    /// read it, without starting anything: every key, value, path, address, policy and quota
    /// rule. Prints the effective settings; exits 1 with one line naming the first error.
    Check {
        /// The configuration file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
    },
}

/// Prints the completion script for `args.shell` to standard output.
pub fn completions(args: &CompletionsArgs, mut cmd: clap::Command) -> Result<()> {
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "iosets", &mut out);
    std::io::stdout()
        .write_all(&out)
        .context("writing the completion script")
}

/// Writes the manual pages (see [`ManArgs`]).
pub fn man(args: &ManArgs, cmd: clap::Command) -> Result<()> {
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(cmd, dir)
                .with_context(|| format!("writing manual pages into {}", dir.display()))?;
            name_control_section(&dir.join("iosets-mount.1"))?;
            let pages = std::fs::read_dir(dir)
                .with_context(|| format!("listing {}", dir.display()))?
                .filter_map(|e| e.ok())
                .filter(|e| e.file_name().to_string_lossy().ends_with(".1"))
                .count();
            println!("wrote {pages} manual pages into {}", dir.display());
            Ok(())
        }
        None => {
            let mut out = Vec::new();
            clap_mangen::Man::new(cmd)
                .render(&mut out)
                .context("rendering the manual page")?;
            std::io::stdout()
                .write_all(&out)
                .context("writing the manual page")
        }
    }
}

/// `iosets-mount.1`: the control directory's text (the mount's long help after its options)
/// under its own heading, which its options refer to, not clap_mangen's "EXTRA".
fn name_control_section(page: &Path) -> Result<()> {
    let text =
        std::fs::read_to_string(page).with_context(|| format!("reading {}", page.display()))?;
    if !text.contains("\n.SH EXTRA\n") {
        bail!("{}: no EXTRA section to name", page.display());
    }
    let text = text.replacen("\n.SH EXTRA\n", "\n.SH \"CONTROL DIRECTORY\"\n", 1);
    std::fs::write(page, text).with_context(|| format!("writing {}", page.display()))
}

/// Runs `iosets config ...`.
pub fn config(command: &ConfigCommand) -> Result<()> {
    match command {
        ConfigCommand::Check { file } => {
            let (config, from_state) = check(file)?;
            for w in warnings(&config) {
                eprintln!("warning: {}: {w}", file.display());
            }
            println!("{}: ok", file.display());
            if let (Some(rules), Some(path)) = (from_state, &config.state_file) {
                println!(
                    "{}: ok, {rules} quota rule(s) changed at run time, used in place of the \
                     configuration's [quota] (delete it to go back to those)",
                    path.display()
                );
            }
            print!("{}", describe(&config));
            Ok(())
        }
    }
}

/// Everything `iosets serve --config FILE` checks before it binds a socket: the file's keys and
/// values ([`ServerConfig::from_toml_file`], [`ServerConfig::validate`]) with the state file's
/// rules in place of `[quota]`, the policy and its tunables, and that the listen and admin
/// addresses resolve.
fn check(file: &Path) -> Result<(ServerConfig, Option<usize>)> {
    let mut config = ServerConfig::from_toml_file(file)?;
    // The rules changed at run time, read in place of [quota] as the server reads them at start
    // ([`ServerConfig::load_state`]): the number read, if there is a state file.
    let from_state = config.load_state()?;
    config
        .validate()
        .with_context(|| file.display().to_string())?;
    iosets_policy::registry::build(&config.policy, &config.policy_options)
        .with_context(|| format!("{}: policy {:?}", file.display(), config.policy))?;
    if config.auth.is_none() && !config.insecure_loopback {
        // The node's default secret `iosets serve` would use: if one is there, it must be
        // usable (a missing one is made at the first start).
        let path = iosets_proto::auth::default_path()
            .with_context(|| format!("{}: no auth_file", file.display()))?;
        if std::fs::symlink_metadata(&path).is_ok() {
            iosets_proto::auth::Secret::load_private(&path)
                .with_context(|| format!("{}: no auth_file", file.display()))?;
        }
    }
    resolves(file, "listen", &config.listen)?;
    if let Some(admin) = &config.admin_listen {
        resolves(file, "admin_listen", admin)?;
    }
    Ok((config, from_state))
}

fn resolves(file: &Path, key: &str, addr: &str) -> Result<()> {
    match addr.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(_)) => Ok(()),
        Ok(None) => bail!(
            "{}: {key} = {addr:?} resolves to no address",
            file.display()
        ),
        Err(e) => bail!(
            "{}: {key} = {addr:?} is not a host:port address ({e})",
            file.display()
        ),
    }
}

/// Settings that are valid but probably not what a site wants.
fn warnings(c: &ServerConfig) -> Vec<String> {
    let mut w = Vec::new();
    let loopback = |addr: &str| {
        addr.to_socket_addrs()
            .map(|mut a| a.all(|a| a.ip().is_loopback()))
            .unwrap_or(false)
    };
    if c.insecure_loopback {
        w.push(
            "insecure_loopback = true: clients on this host are served without a proof and \
             the uid they claim is believed: any local user can act as any user"
                .into(),
        );
        if !loopback(&c.listen) {
            w.push(format!(
                "listen = {:?} with insecure_loopback: clients of other hosts will be refused \
                 (they have no secret to prove)",
                c.listen
            ));
        }
    }
    if c.token.is_none() {
        w.push("no token or token_file: every control request (priorities, rules, policy) will be refused".into());
    }
    w
}

/// Who the server will serve, as `iosets serve --config` would decide it: the `auth_file`'s
/// secret, no proof (`insecure_loopback`), or the node's default secret (its place, and
/// whether it is there and private, or will be made at the first start).
fn authentication(c: &ServerConfig) -> String {
    if c.auth.is_some() {
        return "cluster secret (auth_file); every client proves it, on loopback too".into();
    }
    if c.insecure_loopback {
        return "none (insecure_loopback): any local user can act as any user; other hosts \
                refused"
            .into();
    }
    match iosets_proto::auth::default_path() {
        Err(e) => format!("the node's default secret, but {e}"),
        Ok(p) => match std::fs::symlink_metadata(&p) {
            Err(_) => format!(
                "the node's default secret {} (made at the first start, mode 600); every \
                 client proves it, on loopback too",
                p.display()
            ),
            Ok(_) => match iosets_proto::auth::Secret::load_private(&p) {
                Ok(_) => format!(
                    "the node's default secret {} (present, private); every client proves it, \
                     on loopback too",
                    p.display()
                ),
                Err(e) => format!("the node's default secret, unusable: {e}"),
            },
        },
    }
}

/// The effective settings, one `key = value` per line, as the server will run with them.
fn describe(c: &ServerConfig) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "none".into());
    let options: Vec<String> = c
        .policy_options
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    let mut lines = vec![
        format!("root = {}", c.root.display()),
        format!("listen = {}", c.listen),
        format!("admin_listen = {}", opt(c.admin_listen.clone())),
        format!(
            "policy = {}{}",
            c.policy,
            if options.is_empty() {
                String::new()
            } else {
                format!(" ({})", options.join(", "))
            }
        ),
        format!("workers = {}", c.workers),
        format!(
            "throttle_mib_s = {}",
            opt(c.throttle_mib_s.map(|r| r.to_string()))
        ),
        format!(
            "control = {}",
            if c.token.is_some() {
                "token set"
            } else {
                "refused (no token)"
            }
        ),
        format!("authentication = {}", authentication(c)),
        format!("auto_priority = {}", c.auto_priority),
        format!("max_jobs = {}", c.max_jobs),
        format!("forget_idle_s = {}", c.forget_idle_s),
        format!(
            "trace = {}",
            opt(c.trace.as_ref().map(|p| p.display().to_string()))
        ),
    ];
    if let Some(q) = &c.quota {
        lines.push(format!("quota = {} rule(s)", q.rules.len()));
    }
    if !c.shares.is_empty() {
        let shares: Vec<String> = c.shares.iter().map(|s| s.to_string()).collect();
        lines.push(format!("shares = {}", shares.join(", ")));
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn the_mount_page_has_a_control_directory_section() {
        use clap::CommandFactory;
        let dir = std::env::temp_dir().join(format!("iosets-man-{}", std::process::id()));
        man(
            &ManArgs {
                out: Some(dir.clone()),
            },
            crate::Cli::command(),
        )
        .unwrap();
        let page = std::fs::read_to_string(dir.join("iosets-mount.1")).unwrap();
        let at = page.find(".SH \"CONTROL DIRECTORY\"").expect("the section");
        assert!(page[at..].contains(".iosets/"), "{page}");
        assert!(!page.contains(".SH EXTRA"));
        assert!(name_control_section(&dir.join("iosets-serve.1")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_good_file_passes_and_every_kind_of_mistake_is_named() {
        let dir = std::env::temp_dir().join(format!("iosets-config-check-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let good = write(
            &dir,
            "good.toml",
            "root = \"data\"\nlisten = \"127.0.0.1:0\"\npolicy = \"wfq\"\nworkers = 4\n",
        );
        let (c, from_state) = check(&good).unwrap();
        assert_eq!(from_state, None);
        assert_eq!(c.workers, 4);
        assert!(describe(&c).contains("policy = wfq"));

        let cases = [
            (
                "unknown-key.toml",
                "root = \"data\"\nwrokers = 4\n",
                "wrokers",
            ),
            ("no-root.toml", "listen = \"127.0.0.1:0\"\n", "root"),
            (
                "missing-dir.toml",
                "root = \"nowhere\"\n",
                "not a directory",
            ),
            (
                "policy.toml",
                "root = \"data\"\npolicy = \"fastest\"\n",
                "fastest",
            ),
            (
                "tunable.toml",
                "root = \"data\"\npolicy = \"wfq\"\n[policy_options]\ndefault_weight = \"x\"\n",
                "default_weight",
            ),
            (
                "listen.toml",
                "root = \"data\"\nlisten = \"7070\"\n",
                "listen",
            ),
            ("workers.toml", "root = \"data\"\nworkers = 0\n", "workers"),
            ("syntax.toml", "root = \"data\nworkers = 4\n", "line"),
        ];
        for (name, text, needle) in cases {
            let err = format!("{:#}", check(&write(&dir, name, text)).unwrap_err());
            assert!(
                err.contains(needle),
                "{name}: {err:?} does not name {needle:?}"
            );
            assert!(!err.contains('\n'), "{name}: not one line: {err:?}");
        }
        let missing = format!("{:#}", check(&dir.join("absent.toml")).unwrap_err());
        assert!(missing.contains("absent.toml"), "{missing}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
