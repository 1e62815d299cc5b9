//! Asking the servers: one round = `ctl jobs`, `ctl stats` and `ctl rule list` to every server
//! at once, each server's three answers within one bounded time.
//!
//! Each server has its own client (a down server must not keep the others from answering) on
//! one small runtime shared by all. A server that does not answer within the timeout is
//! reported down with the reason and its client dropped; the next round connects afresh, so it
//! shows up again as soon as it answers.

use std::time::Duration;

use anyhow::{Context, Result};
use iosets_client::{Client, ClientConfig};
use iosets_proto::{auth::Secret, Control, Reply};
use iosets_types::JobId;

use super::model::Snapshot;

/// The servers' clients and what is needed to ask them.
#[derive(Debug)]
pub(crate) struct Poller {
    rt: tokio::runtime::Runtime,
    servers: Vec<String>,
    clients: Vec<Option<Client>>,
    cfg: ClientConfig,
    token: String,
    timeout: Duration,
}

impl Poller {
    /// A poller of `servers` with control token `token`, the cluster secret `auth` if any, and
    /// `timeout` for each server's whole round (connecting included).
    pub fn new(
        servers: Vec<String>,
        token: String,
        auth: Option<Secret>,
        timeout: Duration,
    ) -> Result<Poller> {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("iosets-top")
            .enable_all()
            .build()
            .context("starting the polling runtime")?;
        // No retries (a round that fails shows the server down; the next round tries again),
        // no same-host transport (control requests move no data).
        let mut cfg = ClientConfig::new(JobId(0));
        cfg.retries = 0;
        cfg.connect_timeout = timeout;
        cfg.request_timeout = Some(timeout);
        cfg.local = false;
        cfg.phase_stamps = false;
        cfg.auth = auth;
        let clients = servers.iter().map(|_| None).collect();
        Ok(Poller {
            rt,
            servers,
            clients,
            cfg,
            token,
            timeout,
        })
    }

    /// One round: every server's answers, or why it gave none, in the servers' order. Takes at
    /// most about the timeout, however many servers are down.
    pub fn round(&mut self) -> Vec<Result<Snapshot, String>> {
        let tasks: Vec<_> = self
            .servers
            .iter()
            .zip(self.clients.iter_mut())
            .map(|(addr, client)| {
                let (addr, client) = (addr.clone(), client.take());
                let (cfg, token, timeout) = (self.cfg.clone(), self.token.clone(), self.timeout);
                self.rt.spawn(async move {
                    match tokio::time::timeout(timeout, ask(&addr, client, cfg, &token)).await {
                        Ok(Ok((snap, client))) => (Ok(snap), Some(client)),
                        Ok(Err(e)) => (Err(reason(&e)), None),
                        Err(_) => (Err(format!("no answer within {timeout:?}")), None),
                    }
                })
            })
            .collect();
        let mut answers = Vec::with_capacity(tasks.len());
        for (i, t) in tasks.into_iter().enumerate() {
            let (answer, client) = self
                .rt
                .block_on(t)
                .unwrap_or_else(|e| (Err(format!("polling task failed: {e}")), None));
            self.clients[i] = client;
            answers.push(answer);
        }
        answers
    }
}

/// Connects to `addr` if `client` is none, then asks its jobs, stats and rules.
async fn ask(
    addr: &str,
    client: Option<Client>,
    cfg: ClientConfig,
    token: &str,
) -> Result<(Snapshot, Client)> {
    let client = match client {
        Some(c) => c,
        None => Client::connect_to(&[addr], cfg).await?,
    };
    let jobs = json(&client, token, Control::Jobs).await?;
    let stats = json(&client, token, Control::Stats).await?;
    let rules = json(&client, token, Control::Rules).await?;
    let snap = Snapshot {
        jobs: serde_json::from_str(&jobs).context("jobs: not the expected report")?,
        stats: serde_json::from_str(&stats).context("stats: not the expected report")?,
        rules: serde_json::from_str(&rules).context("rules: not the expected report")?,
    };
    Ok((snap, client))
}

/// One control request whose answer is a JSON report: its text.
async fn json(client: &Client, token: &str, op: Control) -> Result<String> {
    let what = format!("{op:?}");
    match client.control(0, token, op).await? {
        Reply::Json(text) => Ok(text),
        other => anyhow::bail!("{what}: unexpected reply {other:?}"),
    }
}

/// An error with its causes, each cause only if the text so far does not already say it (the
/// client's errors repeat their source in their own message).
fn reason(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if !text.contains(&c) {
            if !text.is_empty() {
                text.push_str(": ");
            }
            text.push_str(&c);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reason_does_not_repeat_its_causes() {
        let io = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = anyhow::Error::new(io).context("cannot connect to a:1: refused");
        assert_eq!(reason(&e), "cannot connect to a:1: refused");
        let e = anyhow::anyhow!("bad json").context("jobs: not the expected report");
        assert_eq!(reason(&e), "jobs: not the expected report: bad json");
    }

    #[test]
    fn a_round_reports_a_server_that_refuses_connections_as_down() {
        // Bind then drop a listener: nothing listens on that port any more.
        let addr = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .to_string();
        let mut p =
            Poller::new(vec![addr.clone()], "t".into(), None, Duration::from_secs(2)).unwrap();
        let answers = p.round();
        let why = answers[0].as_ref().unwrap_err();
        assert!(why.contains(&addr), "{why}");
    }

    /// A real server on `listen` serving a fresh directory, with control token `t`.
    fn server(listen: &str, root: &std::path::Path) -> iosets_server::ServerHandle {
        let mut cfg = iosets_server::ServerConfig::new(root).with_insecure_loopback();
        cfg.listen = listen.into();
        cfg.token = Some("t".into());
        cfg.admin_listen = None;
        iosets_server::Server::start(cfg).unwrap()
    }

    #[test]
    fn a_server_that_stops_shows_down_and_up_again_when_it_is_back() {
        let root = std::env::temp_dir().join(format!("iosets-top-poll-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let s = server("127.0.0.1:0", &root);
        let addr = s.addr().to_string();
        let mut p =
            Poller::new(vec![addr.clone()], "t".into(), None, Duration::from_secs(2)).unwrap();
        let snap = p.round().remove(0).unwrap();
        assert_eq!(snap.stats.policy, "iosets");
        assert!(snap.jobs.jobs.is_empty() && snap.rules.rules.is_empty());
        s.shutdown().unwrap();
        assert!(p.round().remove(0).is_err(), "down once it stopped");
        assert!(p.round().remove(0).is_err(), "and still down");
        let s = server(&addr, &root);
        assert!(p.round().remove(0).is_ok(), "up again on the same address");
        s.shutdown().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_wrong_token_is_reported_as_the_reason() {
        let root = std::env::temp_dir().join(format!("iosets-top-tok-{}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap();
        let s = server("127.0.0.1:0", &root);
        let mut p = Poller::new(
            vec![s.addr().to_string()],
            "nope".into(),
            None,
            Duration::from_secs(2),
        )
        .unwrap();
        let why = p.round().remove(0).unwrap_err();
        assert!(why.contains("wrong token"), "{why}");
        s.shutdown().unwrap();
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn a_round_is_bounded_by_the_timeout_for_a_server_that_never_answers() {
        // A listener that accepts connections (the kernel does) but never reads or answers.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap().to_string();
        let mut p = Poller::new(vec![addr], "t".into(), None, Duration::from_millis(300)).unwrap();
        let answers = p.round();
        let why = answers[0].as_ref().unwrap_err();
        assert!(
            why.contains("no answer within") || why.contains("no response"),
            "{why}"
        );
        drop(l);
    }
}
