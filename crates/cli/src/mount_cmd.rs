//! `iosets mount` and `iosets umount`. With `--local` this command starts the server in this
//! process and hands it to the mount ([`iosets_mount::mount_local`]): the mount crate knows
//! the client only.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;
use iosets_mount::ident::{parse_env_vars, parse_sources};
use iosets_mount::{LocalServer, MountOptions, Mounted};
use iosets_server::{read_token_file, Server, ServerConfig, ServerHandle};

/// `iosets mount MOUNTPOINT (--servers ADDR,... | --local ROOT)`.
#[derive(Debug, Args)]
pub(crate) struct MountArgs {
    /// Where to mount (an existing, empty directory).
    mountpoint: PathBuf,
    /// The I/O servers, `host:port` separated by commas, in layout order (every client of a
    /// file must list the same servers in the same order).
    #[arg(long, value_delimiter = ',', conflicts_with = "local")]
    servers: Vec<String>,
    /// Run a server in this process on ROOT with the default policy instead (nothing else
    /// needs to run). It has no TCP port and no socket: the mount reaches it in process, and
    /// no other process or user can.
    #[arg(long, value_name = "ROOT")]
    local: Option<PathBuf>,
    /// The servers' control token (for `.iosets/`), as `iosets serve --token-file` got it.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// FUSE worker threads.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Threads of the client runtime, where requests meet the servers: each extra one adds a
    /// wake-up to a small request's path; raise it where the network outruns one core.
    #[arg(long, default_value_t = 1, value_name = "N")]
    net_threads: usize,
    /// Let the page cache serve file data (faster re-reads; attribution then comes from the
    /// file's opener). Default: direct I/O, every byte through the scheduler.
    #[arg(long)]
    cache: bool,
    /// Seconds before a request to a dead or stuck server fails with EIO.
    #[arg(
        long,
        default_value_t = 30.0,
        value_name = "SECONDS",
        allow_negative_numbers = true
    )]
    timeout: f64,
    /// Milliseconds the kernel may cache attributes and names.
    #[arg(long, default_value_t = 1000)]
    attr_ttl_ms: u64,
    /// Where a caller's job comes from, in order: cgroup (Slurm's `job_<id>`), env, procname-uid.
    #[arg(long, default_value = "cgroup,env,procname-uid")]
    job_source: String,
    /// More environment variables naming the job, read after IOSETS_JOB_ID and SLURM_JOB_ID.
    #[arg(long, value_name = "VAR,...")]
    job_env: Option<String>,
    /// The striping chunk in bytes (the same for every client of the files).
    #[arg(long, default_value_t = iosets_client::DEFAULT_CHUNK_SIZE)]
    chunk_size: u64,
    /// Allow other users on the mount (default: yes when run as root).
    #[arg(long)]
    allow_other: Option<bool>,
    /// Detach: mount, then keep serving in the background (logs to --log).
    #[arg(long)]
    daemon: bool,
    /// With --daemon: where the background process writes its log.
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// The cluster's shared secret file (default: the node's, where `iosets serve` makes it:
    /// /etc/iosets/secret for root, ~/.local/state/iosets/secret for another user). Not
    /// used with --local, whose server is reached in process.
    #[arg(long, value_name = "FILE", env = "IOSETS_AUTH_FILE")]
    auth_file: Option<PathBuf>,
    /// Who besides root may write `.iosets/jobs/<id>/priority`: `capped` (a process of the job,
    /// known by its Slurm cgroup, up to the servers' hint cap), `any` (no cap), `off` (only
    /// root). See CONTROL DIRECTORY below.
    #[arg(long, default_value = "capped", value_name = "off|capped|any")]
    self_priority: iosets_mount::control::SelfPriority,
}

/// `iosets umount MOUNTPOINT`.
#[derive(Debug, Args)]
pub(crate) struct UmountArgs {
    /// The mount point.
    mountpoint: PathBuf,
}

fn options(args: &MountArgs) -> Result<MountOptions> {
    let mut o = MountOptions::new(&args.mountpoint);
    o.servers = args.servers.clone();
    o.threads = args.threads;
    o.net_threads = args.net_threads;
    o.self_priority = args.self_priority;
    o.cache = args.cache;
    if !(args.timeout.is_finite() && args.timeout > 0.0 && args.timeout <= 86_400.0) {
        bail!(
            "--timeout must be a number of seconds in (0, 86400], not {}",
            args.timeout
        );
    }
    o.timeout = Duration::from_secs_f64(args.timeout);
    o.attr_ttl = Duration::from_millis(args.attr_ttl_ms);
    o.chunk_size = args.chunk_size;
    o.allow_other = args.allow_other;
    o.ident.sources = parse_sources(&args.job_source)?;
    if let Some(vars) = &args.job_env {
        o.ident.env_vars.extend(parse_env_vars(vars)?);
    }
    if let Some(f) = &args.token_file {
        o.token = Some(read_token_file(f)?);
    }
    // With --local the server is in this process: nothing to prove.
    if args.local.is_none() {
        o.auth = match &args.auth_file {
            Some(f) => Some(iosets_server::read_auth_file(f)?),
            None => iosets_client::ClientConfig::auth_default()?,
        };
    }
    Ok(o)
}

pub(crate) fn mount(args: &MountArgs) -> Result<()> {
    let opts = options(args)?;
    if args.daemon {
        return daemonize(args, &opts);
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
    let m: Mounted = match &args.local {
        Some(root) => {
            let mut opts = opts;
            let token = opts
                .token
                .get_or_insert_with(iosets_mount::random_token)
                .clone();
            let root = root.clone();
            iosets_mount::mount_local(
                opts,
                Box::new(move || {
                    Local::start(&root, token).map(|l| Box::new(l) as Box<dyn LocalServer>)
                }),
            )?
        }
        None => iosets_mount::mount(opts)?,
    };
    eprintln!(
        "iosets: mounted on {} ({}); SIGTERM or `iosets umount` to unmount",
        m.mountpoint().display(),
        m.servers().join(",")
    );
    m.serve_until_signal()?;
    Ok(())
}

/// `--local`: a server in this process on `root`, at the defaults, that the mount reaches by a
/// channel no other process or user can (issue 33: no TCP port, no same-host socket).
#[derive(Debug)]
struct Local {
    root: PathBuf,
    server: ServerHandle,
}

impl Local {
    fn start(root: &Path, token: String) -> Result<Local, String> {
        let mut cfg = ServerConfig::new(root);
        cfg.token = Some(token);
        cfg.listen_tcp = false;
        cfg.admin_listen = None;
        let server = Server::start(cfg).map_err(|e| e.to_string())?;
        Ok(Local {
            root: root.to_path_buf(),
            server,
        })
    }
}

impl LocalServer for Local {
    fn root(&self) -> &Path {
        &self.root
    }

    fn addr(&self) -> std::net::SocketAddr {
        self.server.addr()
    }

    fn connector(&self) -> iosets_client::Connector {
        let link = self.server.in_process();
        std::sync::Arc::new(move || link.connect())
    }

    fn shutdown(self: Box<Self>) -> Result<(), String> {
        self.server.shutdown().map(drop).map_err(|e| e.to_string())
    }
}

/// Starts this command again without `--daemon` in a new process group, and returns once the
/// file system is mounted (or the child has failed, with its log).
fn daemonize(args: &MountArgs, opts: &MountOptions) -> Result<()> {
    use std::os::unix::process::CommandExt;
    iosets_mount::check_mountpoint(&opts.mountpoint)?;
    let exe = std::env::current_exe().context("locating this program")?;
    let argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--daemon")
        .collect();
    let log = args
        .log
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("iosets-mount.log"));
    let out = std::fs::File::create(&log).with_context(|| format!("creating {}", log.display()))?;
    let mut child = std::process::Command::new(exe)
        .args(&argv)
        .stdin(std::process::Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .process_group(0)
        .spawn()
        .context("starting the background mount")?;
    let deadline = std::time::Instant::now() + opts.timeout + Duration::from_secs(5);
    loop {
        if iosets_mount::mounted_at(&opts.mountpoint).is_some() {
            eprintln!(
                "iosets: mounted on {} (pid {}, log {})",
                opts.mountpoint.display(),
                child.id(),
                log.display()
            );
            return Ok(());
        }
        if let Some(status) = child.try_wait()? {
            let text = std::fs::read_to_string(&log).unwrap_or_default();
            bail!("the background mount exited ({status}):\n{}", text.trim());
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            bail!(
                "the background mount did not come up in time (log {})",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

pub(crate) fn umount(args: &UmountArgs) -> Result<()> {
    iosets_mount::umount(&args.mountpoint)?;
    Ok(())
}
