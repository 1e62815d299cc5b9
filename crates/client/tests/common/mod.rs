//! Real servers on loopback for the client tests: in-process, each on its own temporary root.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use iosets_server::{Server, ServerConfig, ServerHandle};

/// A fresh, empty directory, removed when dropped.
#[derive(Debug)]
pub struct Scratch(pub PathBuf);

impl Scratch {
    pub fn new(name: &str) -> Scratch {
        static N: AtomicUsize = AtomicUsize::new(0);
        let dir = std::env::temp_dir().join(format!(
            "iosets-client-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A subdirectory, created.
    pub fn sub(&self, name: &str) -> PathBuf {
        let d = self.0.join(name);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts a server on `root` (loopback, free port unless `listen` is given).
pub fn start(root: &Path, listen: Option<SocketAddr>) -> ServerHandle {
    let mut cfg = ServerConfig::new(root).with_insecure_loopback();
    cfg.workers = 2;
    if let Some(a) = listen {
        cfg.listen = a.to_string();
    }
    Server::start(cfg).expect("server starts")
}

/// `n` servers, each on its own root under `scratch` (`root0`, `root1`, ...), or all on one
/// shared root (`shared`).
pub fn servers(scratch: &Scratch, n: usize, shared: bool) -> (Vec<ServerHandle>, Vec<PathBuf>) {
    let roots: Vec<PathBuf> = (0..n)
        .map(|i| {
            if shared {
                scratch.sub("shared")
            } else {
                scratch.sub(&format!("root{i}"))
            }
        })
        .collect();
    let handles = roots.iter().map(|r| start(r, None)).collect();
    (handles, roots)
}

pub fn addrs(handles: &[ServerHandle]) -> Vec<SocketAddr> {
    handles.iter().map(|h| h.addr()).collect()
}

/// A runtime for the async client, outside of which the servers are started and stopped.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}
