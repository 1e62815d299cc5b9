//! `iosets top`: a live view of one or many servers' jobs, as `top` is of processes.
//!
//! Three parts, kept apart so that the drawing can be tested on constructed states:
//! [`poll`] asks the servers (the same control requests as `iosets ctl jobs`, `ctl stats` and
//! `ctl rule list`, with bounded timeouts), [`model`] merges their answers across servers,
//! measures bandwidth, keeps each job's history and the sort order, and [`view`] draws the
//! model on a terminal (ratatui with its crossterm backend) or as plain-text frames.
//!
//! Interactive when standard output is a terminal; otherwise, or with `--once` / `--batch N`,
//! it prints plain-text frames (like `top -b`) and needs no terminal at all.

mod model;
mod poll;
mod view;

pub(crate) use view::wait;

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::Args;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use iosets_server::read_auth_file;
use model::{Action, Model, Snapshot};
use poll::Poller;

/// `iosets top`'s arguments: the servers and their credentials as for `iosets ctl`.
#[derive(Debug, Args)]
pub(crate) struct TopArgs {
    /// A server (host:port); repeat for several: their jobs are merged.
    #[arg(long = "server", value_name = "ADDR", required = true)]
    servers: Vec<String>,
    /// File holding the control token (or set IOSETS_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The cluster's shared secret file (default: the node's, where `iosets serve` makes it).
    #[arg(long, value_name = "FILE", env = "IOSETS_AUTH_FILE")]
    auth_file: Option<PathBuf>,
    /// Seconds between two rounds of questions to the servers (0.05 to 3600).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 1.0,
        allow_negative_numbers = true
    )]
    interval: f64,
    /// Seconds a server has to answer one round, connecting included, before it shows as
    /// down (0.05 to 60).
    #[arg(
        long,
        value_name = "SECONDS",
        default_value_t = 2.0,
        allow_negative_numbers = true
    )]
    timeout: f64,
    /// Bandwidth values kept per job for its sparkline (1 to 1000).
    #[arg(long, value_name = "N", default_value_t = 60)]
    history: usize,
    /// Print one plain-text frame and exit (it takes one interval: bandwidth is measured
    /// between two rounds). Exits with an error if no server answered.
    #[arg(long, conflicts_with = "batch")]
    once: bool,
    /// Print N plain-text frames, one per interval, and exit (like `top -b -n N`). Without a
    /// terminal on standard output, frames are printed until interrupted.
    #[arg(long, value_name = "N")]
    batch: Option<u64>,
}

/// `value` if it lies in `lo..=hi`, else an error naming `flag`.
fn checked(flag: &str, value: f64, lo: f64, hi: f64, unit: &str) -> Result<f64> {
    if value.is_finite() && (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        bail!("{flag} {value}: expected {lo} to {hi} {unit}")
    }
}

/// Runs `iosets top`.
pub(crate) fn run(args: &TopArgs) -> Result<()> {
    let interval = checked("--interval", args.interval, 0.05, 3600.0, "seconds")?;
    let timeout = checked("--timeout", args.timeout, 0.05, 60.0, "seconds")?;
    if !(1..=1000).contains(&args.history) {
        bail!("--history {}: expected 1 to 1000 values", args.history);
    }
    if args.batch == Some(0) {
        bail!("--batch 0: expected at least one frame");
    }
    let token = crate::serve_cmd::control_token(args.token_file.as_deref())?;
    let auth = match args.auth_file.as_deref() {
        Some(f) => Some(read_auth_file(f)?),
        None => iosets_client::ClientConfig::auth_default()?,
    };
    let poller = Poller::new(
        args.servers.clone(),
        token,
        auth,
        Duration::from_secs_f64(timeout),
    )?;
    let model = Model::new(&args.servers, interval, args.history);
    let frames = match (args.once, args.batch) {
        (true, _) => Some(1),
        (false, Some(n)) => Some(n),
        (false, None) if !std::io::stdout().is_terminal() => None,
        (false, None) => return interactive(poller, model),
    };
    batch(poller, model, frames)
}

/// Plain-text frames: a first round, then one frame per round, `frames` of them (none: until
/// standard output is closed or the process is interrupted).
fn batch(mut poller: Poller, mut model: Model, frames: Option<u64>) -> Result<()> {
    let start = Instant::now();
    let interval = Duration::from_secs_f64(model.interval_s);
    model.ingest_round(start.elapsed(), poller.round());
    let mut out = std::io::stdout().lock();
    let mut printed = 0u64;
    while frames.is_none_or(|n| printed < n) {
        std::thread::sleep(interval);
        model.ingest_round(start.elapsed(), poller.round());
        let sep = if printed > 0 { "\n" } else { "" };
        match write!(out, "{sep}{}", view::text_frame(&model)).and_then(|()| out.flush()) {
            Ok(()) => {}
            // A reader that went away (`| head`) ends the run, not as an error.
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(e).context("writing a frame"),
        }
        printed += 1;
    }
    if model.up_down().0 == 0 {
        bail!(
            "no server answered ({})",
            model
                .servers
                .iter()
                .map(|s| match &s.health {
                    model::Health::Down(why) => format!("{}: {why}", s.name),
                    _ => format!("{}: not asked", s.name),
                })
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// What the screen loop and the polling thread share.
#[derive(Debug, Default)]
struct Shared {
    /// Milliseconds between rounds.
    interval_ms: AtomicU64,
    /// No rounds while set.
    paused: AtomicBool,
    /// The screen is gone: the polling thread ends.
    stop: AtomicBool,
}

/// One round's answers and when they were taken.
type Round = (Duration, Vec<Result<Snapshot, String>>);

/// Polls a round, then waits the interval (in short steps, so that quitting, pausing and a
/// new interval take effect at once), until told to stop.
fn poll_loop(mut poller: Poller, shared: Arc<Shared>, start: Instant, tx: mpsc::Sender<Round>) {
    let step = Duration::from_millis(20);
    while !shared.stop.load(Ordering::Relaxed) {
        if !shared.paused.load(Ordering::Relaxed) {
            let answers = poller.round();
            if tx.send((start.elapsed(), answers)).is_err() {
                return;
            }
        }
        let began = Instant::now();
        while !shared.stop.load(Ordering::Relaxed)
            && began.elapsed() < Duration::from_millis(shared.interval_ms.load(Ordering::Relaxed))
        {
            std::thread::sleep(step);
        }
    }
}

/// What a key does; none for keys without a meaning (and `Quit` for q, Esc and Ctrl-C).
fn key_action(code: KeyCode, mods: KeyModifiers) -> Option<Result<Action, Quit>> {
    Some(Ok(match code {
        KeyCode::Char('q') | KeyCode::Esc => return Some(Err(Quit)),
        KeyCode::Char('c') if mods.contains(KeyModifiers::CONTROL) => return Some(Err(Quit)),
        KeyCode::Char('s') => Action::NextSort,
        KeyCode::Char('S') => Action::ReverseSort,
        KeyCode::Char('p') | KeyCode::Char(' ') => Action::TogglePause,
        KeyCode::Char('+') | KeyCode::Char('=') => Action::Slower,
        KeyCode::Char('-') => Action::Faster,
        KeyCode::Up | KeyCode::Char('k') => Action::Up,
        KeyCode::Down | KeyCode::Char('j') => Action::Down,
        KeyCode::PageUp => Action::PageUp,
        KeyCode::PageDown => Action::PageDown,
        _ => return None,
    }))
}

/// The user asked to quit.
#[derive(Debug)]
struct Quit;

/// The terminal screen until q: rounds come from a polling thread, keys from the terminal.
fn interactive(poller: Poller, mut model: Model) -> Result<()> {
    let shared = Arc::new(Shared::default());
    shared
        .interval_ms
        .store((model.interval_s * 1000.0) as u64, Ordering::Relaxed);
    let (tx, rx) = mpsc::channel();
    let start = Instant::now();
    let poll_shared = shared.clone();
    std::thread::Builder::new()
        .name("iosets-top-poll".into())
        .spawn(move || poll_loop(poller, poll_shared, start, tx))
        .context("starting the polling thread")?;
    // Raw mode and the alternate screen, restored on return and on panic.
    let mut terminal = ratatui::try_init().context("setting up the terminal")?;
    let result = (|| -> Result<()> {
        loop {
            terminal.draw(|f| model.page = view::draw(f, &model))?;
            if event::poll(Duration::from_millis(100))? {
                if let Event::Key(k) = event::read()? {
                    if k.kind != KeyEventKind::Release {
                        match key_action(k.code, k.modifiers) {
                            Some(Err(Quit)) => return Ok(()),
                            Some(Ok(a)) => {
                                model.act(a);
                                shared.paused.store(model.paused, Ordering::Relaxed);
                                shared
                                    .interval_ms
                                    .store((model.interval_s * 1000.0) as u64, Ordering::Relaxed);
                            }
                            None => {}
                        }
                    }
                }
            }
            while let Ok((at, answers)) = rx.try_recv() {
                // A round that was under way when the user paused still counts: it was asked.
                model.ingest_round(at, answers);
            }
        }
    })();
    shared.stop.store(true, Ordering::Relaxed);
    ratatui::try_restore().context("restoring the terminal")?;
    result
}
